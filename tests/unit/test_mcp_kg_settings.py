"""[backend.mcp_kg]: the options the factory gets, bad values refused, the default memory file."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_orchestrator.adapters.mcp_kg import ServerCommand, create_backend
from memory_orchestrator.entrypoints.config.settings import load_settings
from memory_orchestrator.ports import InvalidRequest

pytestmark = pytest.mark.usefixtures("no_ambient_config")


def test_the_section_reaches_the_factory(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        f'data_dir = "{tmp_path}"\n[backend]\nname = "mcp_kg"\n'
        '[backend.mcp_kg]\nstore = "team"\nrecall = "literal"\ntimeout_s = 5\n',
        encoding="utf-8",
    )
    options = load_settings(config).backend_options()
    assert options["recall"] == "literal" and options["store"] == "team" and options["timeout_s"] == 5
    assert options["data_dir"] == str(tmp_path) and "memory_file" not in options


def test_an_unknown_recall_mode_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text('[backend.mcp_kg]\nrecall = "fuzzy"\n', encoding="utf-8")
    with pytest.raises(InvalidRequest, match=r"backend\.mcp_kg\.recall"):
        load_settings(config)


def test_the_factory_puts_one_memory_file_per_store_under_the_data_dir(
    kg_server: ServerCommand, tmp_path: Path
) -> None:
    backend = create_backend({"server": kg_server.script, "data_dir": str(tmp_path), "store": "team"})
    assert backend.memory_file == tmp_path / "mcp_kg" / "team.jsonl"
    assert backend.sidecar.path == tmp_path / "mcp_kg" / "team.orchestrator.db"
    assert not backend.memory_file.exists()  # construction does no I/O
    with pytest.raises(InvalidRequest):
        create_backend({"server": kg_server.script, "store": "../x"})
    with pytest.raises(InvalidRequest):
        create_backend({"server": kg_server.script, "recall": "fuzzy"})


def test_a_configured_memory_file_is_its_stores_alone(kg_server: ServerCommand, tmp_path: Path) -> None:
    config = tmp_path / "orchestrator.toml"
    config.write_text(
        f'[backend.mcp_kg]\nserver = "{kg_server.script}"\nmemory_file = "{tmp_path}/kg/memory.jsonl"\n'
        'store = "team"\n',
        encoding="utf-8",
    )
    settings = load_settings(config)
    own = create_backend(settings.backend_options("mcp_kg"))
    other = create_backend({**settings.backend_options("mcp_kg"), "store": "ops"})
    assert own.memory_file == tmp_path / "kg" / "memory.jsonl"
    assert other.memory_file == tmp_path / "kg" / "memory.ops.jsonl"
