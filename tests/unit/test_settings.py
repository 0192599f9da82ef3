"""Settings: TOML file + environment overrides, validation errors, masking, mapping to PipelineConfig."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from memory_orchestrator.domain.config import ExpansionLimits, PipelineConfig
from memory_orchestrator.entrypoints.config.settings import (
    PipelineSection,
    find_config_file,
    hash_token,
    load_settings,
)
from memory_orchestrator.ports import EdgeType, Intent, InvalidRequest

pytestmark = pytest.mark.usefixtures("no_ambient_config")


def write_toml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_mirror_the_domain_pipeline_config() -> None:
    settings = load_settings()
    assert settings.config_file is None
    assert settings.backend.name == "sqlite"
    assert settings.pipeline_config() == PipelineConfig()


def test_toml_file_values_reach_the_pipeline_config(tmp_path: Path) -> None:
    config = write_toml(
        tmp_path / "custom.toml",
        """
data_dir = "/srv/memories"
[backend]
name = "memory"
[pipeline]
hops = 3
beam_width = 4
allowed_edge_types = ["causal", "temporal"]
passthrough = true
[pipeline.weights]
recency = 0.5
[pipeline.edge_weights.WHY]
causal = 0.9
[traces]
retention = 50
verbosity = "full"
""",
    )
    settings = load_settings(config)
    pipeline = settings.pipeline_config()
    assert settings.config_file == config
    assert settings.backend.name == "memory"
    assert pipeline.expansion.hops == 3
    assert pipeline.expansion.beam_width == 4
    assert pipeline.allowed_edge_types == (EdgeType.CAUSAL, EdgeType.TEMPORAL)
    assert pipeline.passthrough is True
    assert pipeline.weights.recency == 0.5
    # A partial table overrides one weight and keeps the others of that intent.
    assert pipeline.edge_weights[Intent.WHY][EdgeType.CAUSAL] == 0.9
    assert pipeline.edge_weights[Intent.WHY][EdgeType.TEMPORAL] == 0.2
    assert (pipeline.trace_retention, pipeline.trace_verbosity) == (50, "full")
    assert settings.backend_options("sqlite")["path"] == "/srv/memories/memories.db"


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_toml(tmp_path / "orchestrator.toml", '[backend]\nname = "memory"\n[pipeline]\nhops = 1\n')
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NAME", "neo4j")
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NEO4J__PASSWORD", "s3cret")
    settings = load_settings()
    assert settings.config_file == tmp_path / "orchestrator.toml"
    assert settings.backend.name == "neo4j"
    assert settings.pipeline.hops == 1
    assert settings.backend_options("neo4j")["password"] == "s3cret"


def test_config_env_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_toml(tmp_path / "elsewhere.toml", "[pipeline]\nhops = 4\n")
    monkeypatch.setenv("ORCHESTRATOR_CONFIG", str(config))
    assert load_settings().pipeline.hops == 4


def test_explicitly_named_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="configuration file not found"):
        find_config_file(tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[pipeline]\nhops = 9\n", "pipeline.hops"),
        ("[pipeline]\nbeem_width = 3\n", "pipeline.beem_width"),
        ('[pipeline]\nallowed_edge_types = ["wormhole"]\n', "pipeline.allowed_edge_types"),
        ("[pipeline.edge_weights.WHY]\ncausal = 2.0\n", "WHY.causal must lie in [0, 1]"),
        ("[pipeline.channel_weights]\nvectorz = 1.0\n", "unknown channel(s) ['vectorz']"),
        ("[pipeline.channel_weights]\nrecall = -1.0\n", "recall must lie in [0, 10]"),
        ('[backend.neo4j]\nuri = "http://x"\n', "backend.neo4j.uri"),
        ('[backend.sqlite]\nstore = "no spaces"\n', "backend.sqlite.store"),
        ('[[auth.tokens]]\nname = "agent"\nsha256 = "plaintext"\n', "auth.tokens.0.sha256"),
        ("[pipeline\nhops = 1\n", "cannot read configuration"),
    ],
)
def test_invalid_configuration_names_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    config = write_toml(tmp_path / "bad.toml", text)
    with pytest.raises(InvalidRequest) as caught:
        load_settings(config)
    assert expected in str(caught.value)
    assert str(config) in str(caught.value)


def test_masked_view_hides_secrets(tmp_path: Path) -> None:
    digest = hash_token("agent-token")
    config = write_toml(
        tmp_path / "secrets.toml",
        f'[backend.neo4j]\npassword = "hunter2"\n[[auth.tokens]]\nname = "agent"\nsha256 = "{digest}"\n'
        'stores = ["default", "team"]\nwrite = true\n',
    )
    settings = load_settings(config)
    shown = json.dumps(settings.masked())
    assert "hunter2" not in shown
    assert digest not in shown
    assert settings.auth.tokens[0].sha256.get_secret_value() == digest
    assert settings.auth.tokens[0].stores == ["default", "team"]


def test_hash_token_is_sha256_hex() -> None:
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    with pytest.raises(InvalidRequest):
        hash_token("")


def test_plugin_and_scorer_sections(tmp_path: Path) -> None:
    config = write_toml(
        tmp_path / "plugins.toml",
        '[plugins]\nallow = ["sample"]\n[scorers]\nenabled = ["tag_match"]\n'
        "[scorers.options.tag_match]\nweight = 0.2\n",
    )
    settings = load_settings(config)
    assert settings.plugins.allow == ["sample"]
    assert settings.scorers.enabled == ["tag_match"]
    assert settings.scorers.options["tag_match"] == {"weight": 0.2}


def test_data_dir_drives_default_file_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ORCHESTRATOR_DATA_DIR", str(tmp_path / "data"))
    settings = load_settings()
    assert settings.backend_options("sqlite") == {
        "path": str(tmp_path / "data" / "memories.db"),
        "store": "default",
        "bulk_helper": True,
    }
    assert settings.trace_path() == tmp_path / "data" / "traces.db"


def test_every_tunable_of_the_domain_is_configurable() -> None:
    # A field added to the domain's config must get a settings key too (or be listed here on purpose).
    elsewhere = {"expansion", "weights", "trace_retention", "trace_verbosity", "known_entities_ttl_s"}
    keys = set(PipelineSection.model_fields)
    missing = {f.name for f in fields(PipelineConfig)} - elsewhere - keys
    missing |= {f.name for f in fields(ExpansionLimits)} - keys
    assert not missing, f"not configurable: {sorted(missing)}"


def test_channel_weights_reach_the_pipeline_and_keep_unnamed_defaults(tmp_path: Path) -> None:
    config = write_toml(tmp_path / "c.toml", "[pipeline.channel_weights]\nrecall = 0.5\n")
    weights = load_settings(config).pipeline_config().channel_weights
    assert weights["recall"] == 0.5
    assert weights["keyword"] == PipelineConfig().channel_weights["keyword"]


def test_cache_ttl_reaches_the_pipeline(tmp_path: Path) -> None:
    config = write_toml(tmp_path / "cache.toml", "[cache]\nknown_entities_ttl_s = 0\n")
    assert load_settings(config).pipeline_config().known_entities_ttl_s == 0


def test_annotated_example_file_is_valid_and_documents_the_defaults() -> None:
    example = Path(__file__).parents[2] / "orchestrator.example.toml"
    settings = load_settings(example)
    assert settings.pipeline_config() == PipelineConfig()
    assert settings.backend.name == "sqlite"
