"""Start-up times of the processes a person or an MCP client launches, beside the MCP SDK's own floor.

``orchestrator --version``: from process start to its exit. ``orchestrator serve`` (stdio, the default
settings: SQLite in an empty data folder, which is also the working directory, so no
``orchestrator.toml`` of the caller's is read): from process start to its answer to ``initialize``,
and to ``tools/list`` sent right after. The SDK floor is the smallest server the MCP SDK makes (one
tool, the collector handled as ``serve`` handles it: off during the imports, then what they made
moved to the oldest generation), timed the same way: what any server built on the SDK pays before a
first answer on this machine, so ``serve``'s figure minus the floor's is the project's own share. The
runs alternate which of the two servers starts first, so both are measured at the same moments of a
shared machine.

A process that does not answer within ``timeout_s`` is killed and the measurement fails with
:class:`BackendUnavailable`: a start-up measurement never hangs.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memory_orchestrator.ports import BackendUnavailable

#: Seconds one process may take to answer (or, for ``--version``, to exit).
START_TIMEOUT_S = 30.0
#: The smallest MCP server the SDK makes, run by this Python (``python -c``).
SDK_FLOOR_SERVER = """
import gc
gc.disable()
from mcp.server import MCPServer
app = MCPServer("sdk-floor")
@app.tool()
def echo(text: str) -> str:
    \"\"\"Return the text.\"\"\"
    return text
gc.freeze()
gc.unfreeze()
gc.enable()
app.run()
"""
#: The handshake the bench's stdio clients make (a protocol version every 2.x server accepts): these
#: start-up timings and the bare stdio client (``transports.py``).
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "orchestrator-bench", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
_LIST_TOOLS = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def settings_free_environment() -> dict[str, str]:
    """This process's environment without its ``ORCHESTRATOR_*`` settings, for a process the bench
    starts with settings of its own."""
    return {key: value for key, value in os.environ.items() if not key.startswith("ORCHESTRATOR_")}


def orchestrator_command() -> str:
    """The ``orchestrator`` console script of this environment."""
    candidate = Path(sys.executable).parent / "orchestrator"
    if not candidate.exists():
        raise BackendUnavailable(
            "the orchestrator console script is not installed beside Python", backend="mcp"
        )
    return str(candidate)


def _lines(*messages: dict[str, Any]) -> bytes:
    return "".join(json.dumps(message) + "\n" for message in messages).encode()


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), 5.0)
    except TimeoutError:
        process.kill()
        await process.wait()


async def serve_start(
    command: Sequence[str], env: dict[str, str], timeout_s: float, *, cwd: str | None = None
) -> tuple[float, float]:
    """Seconds from starting ``command`` (an MCP stdio server) to its answers to ``initialize`` and to
    ``tools/list``."""
    started = time.perf_counter()
    process = await _started(command, env, cwd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(timeout_s):
            process.stdin.write(_lines(INITIALIZE))
            await process.stdin.drain()
            initialized = await process.stdout.readline()
            answered = time.perf_counter() - started
            process.stdin.write(_lines(INITIALIZED, _LIST_TOOLS))
            await process.stdin.drain()
            listed = await process.stdout.readline()
            finished = time.perf_counter() - started
    except TimeoutError:
        raise BackendUnavailable(f"{command[0]} did not answer in {timeout_s:g} s", backend="mcp") from None
    except OSError:  # its end of a pipe closed
        initialized = listed = b""
    finally:
        await _stop(process)
    for answer in (initialized, listed):
        if not answer:
            raise BackendUnavailable(f"{command[0]} exited before answering", backend="mcp")
        if b'"result"' not in answer:
            raise BackendUnavailable(f"{command[0]} answered {answer[:200]!r}", backend="mcp")
    return answered, finished


async def _started(
    command: Sequence[str], env: dict[str, str], cwd: str | None, **pipes: Any
) -> asyncio.subprocess.Process:
    try:
        return await asyncio.create_subprocess_exec(
            *command, stderr=asyncio.subprocess.DEVNULL, env=env, cwd=cwd, **pipes
        )
    except OSError as exc:  # not found, not executable
        raise BackendUnavailable(f"{command[0]} did not start: {exc}", backend="mcp") from None


async def exit_time(
    command: Sequence[str], env: dict[str, str], timeout_s: float, *, cwd: str | None = None
) -> float:
    """Seconds from starting ``command`` to its successful exit."""
    started = time.perf_counter()
    process = await _started(command, env, cwd, stdout=asyncio.subprocess.DEVNULL)
    try:
        code = await asyncio.wait_for(process.wait(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise BackendUnavailable(f"{command[0]} did not exit in {timeout_s:g} s", backend="mcp") from None
    if code != 0:
        raise BackendUnavailable(f"{' '.join(command)} exited with {code}", backend="mcp")
    return time.perf_counter() - started


def _seconds(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "best": round(min(values), 4)}


async def start_times(
    runs: int,
    orchestrator: str,
    *,
    floor: Sequence[str] | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> dict[str, Any]:
    """``runs`` starts of each: ``orchestrator --version``, ``orchestrator serve`` and the SDK floor
    (``floor``, by default :data:`SDK_FLOOR_SERVER` on this Python); medians and bests in seconds."""
    floor_command = list(floor or [sys.executable, "-c", SDK_FLOOR_SERVER])
    names = ("version", "serve_initialize", "serve_tools_list", "floor_initialize", "floor_tools_list")
    times: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="orchestrator-start-") as data_dir:
        env = {**settings_free_environment(), "ORCHESTRATOR_DATA_DIR": data_dir}
        for run in range(runs):
            servers = [("serve", [orchestrator, "serve"]), ("floor", floor_command)]
            for name, command in servers if run % 2 == 0 else servers[::-1]:
                answered, listed = await serve_start(command, env, timeout_s, cwd=data_dir)
                times[f"{name}_initialize"].append(answered)
                times[f"{name}_tools_list"].append(listed)
            version = await exit_time([orchestrator, "--version"], env, timeout_s, cwd=data_dir)
            times["version"].append(version)
    cells = {name: _seconds(values) for name, values in times.items()}
    added = cells["serve_initialize"]["median"] - cells["floor_initialize"]["median"]
    return {"runs": runs, "seconds": cells, "serve_over_floor_s": round(added, 4)}
