"""The start-up measurement (``evaluation/startup.py``) against processes that misbehave: it fails with a
clear error within its timeout, leaves no process behind, and never hangs."""

from __future__ import annotations

import asyncio
import os
import sys
import time

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
