"""The client snippets in README.md work pasted as-is: every JSON block parses and names what it needs."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[2] / "README.md"


def json_blocks() -> list[Any]:
    blocks = re.findall(r"^```json\n(.*?)^```", README.read_text(encoding="utf-8"), re.S | re.M)
    return [json.loads(block) for block in blocks]


def servers() -> list[dict[str, Any]]:
    return [server for block in json_blocks() for server in block.get("mcpServers", {}).values()]


def test_every_json_block_parses_and_every_server_has_a_command() -> None:
    assert len(servers()) >= 3
    for server in servers():
        assert isinstance(server["command"], str) and server["command"]
        assert all(isinstance(arg, str) for arg in server.get("args", []))
        assert all(isinstance(value, str) for value in server.get("env", {}).values())


def test_the_http_bridge_takes_its_token_from_its_env_block() -> None:
    (bridge,) = [server for server in servers() if "mcp-remote" in server.get("args", [])]
    args = bridge["args"]
    header = args[args.index("--header") + 1]
    assert header.startswith("Authorization:")
    variables = re.findall(r"\$\{(\w+)\}", " ".join(args))
    assert variables, "the header reads the token from a variable"
    for name in variables:
        assert bridge["env"][name].startswith("Bearer ")
    assert any(arg.endswith("/mcp") for arg in args)


def test_stdio_snippets_run_orchestrator_serve() -> None:
    stdio = [server for server in servers() if "mcp-remote" not in server.get("args", [])]
    assert any(server["command"].endswith("/orchestrator") for server in stdio)
    (uvx,) = [server for server in stdio if server["command"] == "uvx"]
    assert uvx["args"][0] == "--from"
    assert uvx["args"][-2:] == ["orchestrator", "serve"]
    for server in stdio:
        assert server.get("args", [])[-1] == "serve"
