"""The start-up measurement (``evaluation/startup.py``) against processes that misbehave: it fails with a
clear error within its timeout, leaves no process behind, and never hangs."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from memory_orchestrator.evaluation import startup
from memory_orchestrator.ports import BackendUnavailable

# A stdio "server" that answers each line it reads with ``reply`` (a JSON-RPC result unless told).
_ECHO = """
import sys
for line in sys.stdin:
    sys.stdout.write({reply!r} + "\\n")
    sys.stdout.flush()
"""


def _env() -> dict[str, str]:
    return dict(os.environ)


def test_a_server_that_never_answers_fails_within_the_timeout() -> None:
    silent = [sys.executable, "-c", "import sys, time; sys.stdin.read(); time.sleep(60)"]
    started = time.perf_counter()
    with pytest.raises(BackendUnavailable, match="did not answer in 1 s"):
        asyncio.run(startup.serve_start(silent, _env(), timeout_s=1.0))
    assert time.perf_counter() - started < 15  # killed, not waited for


def test_a_server_that_exits_or_cannot_start_is_reported() -> None:
    with pytest.raises(BackendUnavailable, match="exited before answering"):
        asyncio.run(startup.serve_start([sys.executable, "-c", "pass"], _env(), timeout_s=20.0))
    with pytest.raises(BackendUnavailable, match="did not start"):
        asyncio.run(startup.serve_start(["/nonexistent/orchestrator", "serve"], _env(), timeout_s=20.0))
    with pytest.raises(BackendUnavailable, match="did not start"):
        asyncio.run(startup.exit_time(["/nonexistent/orchestrator", "--version"], _env(), 20.0))


def test_a_server_that_answers_with_an_error_is_not_timed() -> None:
    failing = [sys.executable, "-c", _ECHO.format(reply='{"jsonrpc": "2.0", "id": 1, "error": {}}')]
    with pytest.raises(BackendUnavailable, match="answered"):
        asyncio.run(startup.serve_start(failing, _env(), timeout_s=20.0))


def test_a_server_that_answers_both_requests_is_timed_in_order() -> None:
    answering = [sys.executable, "-c", _ECHO.format(reply='{"jsonrpc": "2.0", "id": 1, "result": {}}')]
    initialized, listed = asyncio.run(startup.serve_start(answering, _env(), timeout_s=20.0))
    assert 0 < initialized <= listed


def test_a_command_that_fails_or_hangs_has_no_exit_time() -> None:
    with pytest.raises(BackendUnavailable, match="exited with 3"):
        asyncio.run(startup.exit_time([sys.executable, "-c", "raise SystemExit(3)"], _env(), 20.0))
    with pytest.raises(BackendUnavailable, match="did not exit in 1 s"):
        asyncio.run(startup.exit_time([sys.executable, "-c", "import time; time.sleep(60)"], _env(), 1.0))
    assert asyncio.run(startup.exit_time([sys.executable, "-c", "pass"], _env(), 20.0)) > 0


def test_the_sdk_floor_server_answers_initialize_and_tools_list() -> None:
    floor = [sys.executable, "-c", startup.SDK_FLOOR_SERVER]
    initialized, listed = asyncio.run(startup.serve_start(floor, _env(), timeout_s=60.0))
    assert 0 < initialized <= listed


# A stand-in for the console script: it notes how it was started, exits on --version, and answers
# each request (a line with an id) with an empty result.
_FAKE = """
import json, os, sys
with open({log!r}, "a") as notes:
    notes.write(json.dumps({{"args": sys.argv[1:], "cwd": os.getcwd(),
        "settings": sorted(key for key in os.environ if key.startswith("ORCHESTRATOR_"))}}) + "\\n")
if sys.argv[1:] != ["--version"]:
    for line in sys.stdin:
        if '"id"' in line:
            print(json.dumps({{"jsonrpc": "2.0", "id": 1, "result": {{}}}}), flush=True)
"""


def test_each_run_starts_serve_and_the_floor_in_turn_in_an_empty_folder_without_the_callers_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    fake = tmp_path / "orchestrator"
    fake.write_text(f"#!{sys.executable}\n" + _FAKE.format(log=str(notes)))
    fake.chmod(0o755)
    monkeypatch.setenv("ORCHESTRATOR_BACKEND__NAME", "neo4j")  # the caller's settings stay out
    (tmp_path / "orchestrator.toml").write_text('[backend]\nname = "neo4j"\n')
    monkeypatch.chdir(tmp_path)

    result = asyncio.run(startup.start_times(2, str(fake), floor=[str(fake), "floor"]))

    started = [json.loads(line) for line in notes.read_text().splitlines()]
    assert [entry["args"] for entry in started] == [
        ["serve"], ["floor"], ["--version"],  # the first run starts serve first,
        ["floor"], ["serve"], ["--version"],  # the next one the floor
    ]  # fmt: skip
    folders = {entry["cwd"] for entry in started}
    assert len(folders) == 1 and Path(folders.pop()) != tmp_path
    assert {tuple(entry["settings"]) for entry in started} == {("ORCHESTRATOR_DATA_DIR",)}
    cells = result["seconds"]
    assert result["runs"] == 2 and all(0 < cell["best"] <= cell["median"] for cell in cells.values())
