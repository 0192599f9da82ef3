"""Drive the `orchestrator` CLI in process, as a user types it (typer's CliRunner)."""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from memory_orchestrator.entrypoints.cli.app import app

runner = CliRunner()


def invoke(*args: str, code: int = 0) -> Any:
    """Run ``orchestrator *args`` and assert its exit code."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    return result


def invoke_json(*args: str) -> Any:
    """Run ``orchestrator *args --json`` and parse its output."""
    return json.loads(invoke(*args, "--json").stdout)
