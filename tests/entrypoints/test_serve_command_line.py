"""``serve``'s usual command lines, read without the CLI framework: what they mean, which lines are
left to the CLI, that the reader knows exactly the CLI's options, and that a served session imports
no CLI framework."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from memory_orchestrator.entrypoints.cli.app import LogLevel, build_app
from memory_orchestrator.entrypoints.cli.invocation import LOG_LEVELS, CliState
from memory_orchestrator.entrypoints.cli.serving import (
    GLOBAL_OPTIONS,
    SERVE_FLAGS,
    SERVE_OPTIONS,
    ServeCall,
    serve_call,
)
from memory_orchestrator.evaluation.startup import INITIALIZE, orchestrator_command, settings_free_environment


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("serve", ServeCall()),
        ("serve --http --port 9000", ServeCall(http=True, port=9000)),
        ("serve --host=::1 --port=1 --http", ServeCall(http=True, host="::1", port=1)),
        (
            "-c my.toml --backend memory --store team --log-level debug serve",
            ServeCall(CliState(Path("my.toml"), "memory", "team", "debug")),
        ),
        (
            "--config=a.toml -b neo4j --store=s serve --port 65535",
            ServeCall(CliState(Path("a.toml"), "neo4j", "s"), port=65535),
        ),
        ("--store serve serve", ServeCall(CliState(store="serve"))),  # a value named like the command
        ("--backend a --backend b serve", ServeCall(CliState(backend="b"))),  # the last one, as the CLI
    ],
)
def test_a_usual_serve_line_is_read_as_the_cli_reads_it(line: str, expected: ServeCall) -> None:
    assert serve_call(line.split()) == expected


@pytest.mark.parametrize(
    "line",
    [
        [],
        ["search", "serve"],  # serve is the query
        ["serve", "--help"],
        ["--help", "serve"],
        ["--version", "serve"],
        ["serve", "extra"],
        ["serve", "--port", "0"],
        ["serve", "--port", "65536"],
        ["serve", "--port", "eighty"],
        ["serve", "--port", "٣"],  # a digit int() reads, not one the CLI's parser is sure to
        ["serve", "--http=yes"],
        ["serve", "--host"],
        ["--store", "--http", "serve"],
        ["--log-level", "loud", "serve"],
        ["--log-level", "DEBUG", "serve"],
        ["-c=x.toml", "serve"],
        ["serve", "--"],
        ["--store", "caf\udce9", "serve"],  # not UTF-8: the CLI says so
    ],
)
def test_any_other_line_is_left_to_the_cli(line: list[str]) -> None:
    assert serve_call(line) is None


def _options(params: list[typer.core.click.Parameter]) -> dict[str, bool]:
    """Option strings of a click command's parameters, each with whether it is a flag."""
    return {
        name: bool(getattr(param, "is_flag", False))
        for param in params
        for name in (*param.opts, *param.secondary_opts)
    }


def test_the_reader_knows_exactly_the_options_of_the_cli() -> None:
    group = typer.main.get_command(build_app("serve"))
    command = group.commands["serve"]  # type: ignore[attr-defined]
    global_options = _options(group.params)
    serve_options = _options(command.params)
    assert {name for name, flag in global_options.items() if not flag} == set(GLOBAL_OPTIONS)
    assert {name for name, flag in global_options.items() if flag} == {"--version"}
    assert {name for name, flag in serve_options.items() if not flag} == SERVE_OPTIONS
    assert {name for name, flag in serve_options.items() if flag} == SERVE_FLAGS
    assert tuple(level.value for level in LogLevel) == LOG_LEVELS


def test_a_served_session_imports_no_cli_framework(tmp_path: Path) -> None:
    env = settings_free_environment()
    env["ORCHESTRATOR_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", orchestrator_command(), "serve"],
        input=json.dumps(INITIALIZE) + "\n",
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "import time:" in line
    }
    assert "memory_orchestrator.entrypoints.mcp.server" in imported
    assert not {name for name in imported if name.split(".")[0] == "typer"}
