"""Settings from ``ORCHESTRATOR_*`` variables: key paths in any letter case, JSON for tables and lists
(text kept where a key may be text), one clear error for what is not JSON, unknown keys named, and
the merge with the file and explicit values key by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.entrypoints.config.environment import environment_values, merged
from memory_orchestrator.entrypoints.config.settings import ENV_PREFIX, Settings, load_settings
from memory_orchestrator.ports import EdgeType, InvalidRequest

pytestmark = pytest.mark.usefixtures("no_ambient_config")


def settings_with(monkeypatch: pytest.MonkeyPatch, **variables: str) -> Settings:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return load_settings()


@pytest.mark.parametrize(
    "name", ["ORCHESTRATOR_BACKEND__NAME", "ORCHESTRATOR_backend__name", "Orchestrator_Backend__Name"]
)
def test_a_variable_names_a_key_path_in_any_letter_case(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    assert settings_with(monkeypatch, **{name: "memory"}).backend.name == "memory"


def test_text_is_converted_and_checked_by_the_settings_model(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_with(
        monkeypatch,
        ORCHESTRATOR_PIPELINE__HOPS="3",
        ORCHESTRATOR_FEATURES__SESSION_TOOLS="false",
        ORCHESTRATOR_PIPELINE__WEIGHTS__RECENCY="0.25",
        ORCHESTRATOR_BACKEND__NEO4J__PASSWORD="s3cret",
    )
    assert settings.pipeline.hops == 3
    assert settings.features.session_tools is False
    assert settings.pipeline.weights.recency == 0.25
    assert settings.backend_options("neo4j")["password"] == "s3cret"


def test_tables_and_lists_are_json(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_with(
        monkeypatch,
        ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS='{"keyword": 2}',
        ORCHESTRATOR_PIPELINE__ALLOWED_EDGE_TYPES='["causal"]',
        ORCHESTRATOR_BACKEND__EXTRA__NOTEBOOK='{"path": "/tmp/notes", "pages": 3}',
    )
    assert settings.pipeline.channel_weights["keyword"] == 2
    assert settings.pipeline.allowed_edge_types == [EdgeType.CAUSAL]
    assert settings.backend_options("notebook") == {"path": "/tmp/notes", "pages": 3}


def test_a_deeper_variable_is_merged_into_a_table_given_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_with(
        monkeypatch,
        ORCHESTRATOR_BACKEND__SQLITE__STORE="team",
        ORCHESTRATOR_BACKEND='{"name": "memory", "sqlite": {"bulk_helper": false}}',
    )
    assert settings.backend.name == "memory"
    assert (settings.backend.sqlite.store, settings.backend.sqlite.bulk_helper) == ("team", False)


def test_a_key_that_may_be_text_keeps_text_that_is_not_json(monkeypatch: pytest.MonkeyPatch) -> None:
    variable = "ORCHESTRATOR_BACKEND__NEO4J__TRUSTED_CERTIFICATES"  # "system", "all" or a list of files
    listed = settings_with(monkeypatch, **{variable: '["/etc/ca.pem"]'})
    assert listed.backend.neo4j.trusted_certificates == ["/etc/ca.pem"]
    assert settings_with(monkeypatch, **{variable: "system"}).backend.neo4j.trusted_certificates == "system"


@pytest.mark.parametrize(
    ("name", "value"),
    [("ORCHESTRATOR_CHANNELS__ENABLED", "dense"), ("ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS", "{keyword: 2")],
)
def test_text_where_json_is_needed_is_one_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    with pytest.raises(InvalidRequest, match=f"^environment variable {name} is not valid JSON$"):
        settings_with(monkeypatch, **{name: value})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ORCHESTRATOR_PIPELINE__BOGUS", "1", "pipeline.bogus: Extra inputs are not permitted"),
        (
            "ORCHESTRATOR_PIPELINE__WEIGHTS__NOPE",
            "1",
            "pipeline.weights.nope: Extra inputs are not permitted",
        ),
        ("ORCHESTRATOR_PIPELINE__HOPS", "many", "pipeline.hops: Input should be a valid integer"),
        (
            "ORCHESTRATOR_PIPELINE__CHANNEL_WEIGHTS",
            "",
            "pipeline.channel_weights: Input should be a valid dictionary",
        ),
        ("ORCHESTRATOR_BOGUS", "1", "unknown setting in environment variable ORCHESTRATOR_BOGUS"),
        (
            "ORCHESTRATOR_CONFIG_FILE",
            "x.toml",
            "unknown setting in environment variable ORCHESTRATOR_CONFIG_FILE",
        ),
    ],
)
def test_a_key_the_settings_do_not_have_or_a_bad_value_is_named(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message.replace(".", r"\.")):
        settings_with(monkeypatch, **{name: value})


def test_explicit_values_beat_the_environment_which_beats_the_file_key_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "orchestrator.toml").write_text(
        "[pipeline]\nhops = 2\nbeam_width = 7\n[pipeline.weights]\nrecency = 0.7\n"
        '[backend.sqlite]\nstore = "file"\n'
    )
    monkeypatch.setenv("ORCHESTRATOR_PIPELINE__HOPS", "3")
    monkeypatch.setenv("ORCHESTRATOR_PIPELINE__WEIGHTS__GRAPH", "0.2")
    monkeypatch.setenv("ORCHESTRATOR_DEFAULT_STORE", "from-env")
    settings = load_settings(default_store="explicit", pipeline={"beam_width": 5})
    assert settings.default_store == "explicit"
    assert (settings.pipeline.hops, settings.pipeline.beam_width) == (3, 5)
    assert (settings.pipeline.weights.recency, settings.pipeline.weights.graph) == (0.7, 0.2)
    assert settings.backend.sqlite.store == "file"


def test_the_configuration_variable_and_other_prefixes_are_not_settings() -> None:
    environ = {
        "ORCHESTRATOR_CONFIG": "a.toml",
        "OTHER_BACKEND__NAME": "x",
        "ORCHESTRATOR_LOG__LEVEL": "debug",
    }
    values = environment_values(Settings, ENV_PREFIX, environ, ignore={"ORCHESTRATOR_CONFIG"})
    assert values == {"log": {"level": "debug"}}


def test_merged_layers_merge_tables_recursively_and_the_later_wins() -> None:
    assert merged({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"c": 3}}, {"d": {"e": 4}}) == {
        "a": {"b": 1, "c": 3},
        "d": {"e": 4},
    }
