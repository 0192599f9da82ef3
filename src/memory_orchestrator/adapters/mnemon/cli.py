"""The CLI transport: one ``mnemon`` process per call, JSON out, errors translated to the port tree.

Kept behind :class:`Transport` (one method) so that an MCP stdio transport can replace it once a Mnemon
release with ``mcp serve`` can be tested here.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_orchestrator.ports import BackendRejected, BackendUnavailable, InvalidRequest, NotFound

BACKEND = "mnemon"

#: Bounded retry of a write that found the store locked by another writer (Mnemon sets no busy timeout).
LOCKED_ATTEMPTS = 8
FIRST_LOCKED_BACKOFF_S = 0.05

_NOT_FOUND = re.compile(r"not found|no rows in result set|already deleted", re.IGNORECASE)
_INVALID = re.compile(
    r"invalid|must be|too long|unknown (flag|shorthand|command|intent)|accepts \d+ arg|required",
    re.IGNORECASE,
)


class Transport(Protocol):
    """Runs one Mnemon command and returns its parsed JSON answer."""

    async def call(self, args: Sequence[str]) -> Any:
        """Run ``mnemon <global flags> <args>``; raise port errors on failure."""
        ...


def error_message(stderr: str) -> str:
    """The one line that matters in Mnemon's stderr (it repeats the message around the usage text)."""
    for line in stderr.splitlines():
        if line.startswith("Error: "):
            return line.removeprefix("Error: ").strip()
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "mnemon failed without a message"


def translate(operation: str, stderr: str) -> Exception:
    """A port error for a failed call, from Mnemon's message (it always exits 1)."""
    message = error_message(stderr)
    text = f"mnemon {operation}: {message}"
    if "database is locked" in message or "SQLITE_BUSY" in message:
        return BackendUnavailable(text, backend=BACKEND)
    if _NOT_FOUND.search(message):
        return NotFound(text)
    if _INVALID.search(message):
        return InvalidRequest(text)
    if "open database" in message or "unable to open" in message:
        return BackendUnavailable(text, backend=BACKEND)
    return BackendRejected(text, backend=BACKEND)


@dataclass
class CliTransport:
    """Calls the ``mnemon`` binary with an argument list (never a shell) and a timeout on every call."""

    binary: str
    data_dir: str
    store: str
    timeout_s: float = 10.0
    environment: Mapping[str, str] = field(default_factory=dict)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.environment)
        env["MNEMON_DATA_DIR"] = self.data_dir
        env.pop("MNEMON_STORE", None)
        return env

    async def run(self, args: Sequence[str]) -> tuple[int, str, str]:
        """Run once; return (exit code, stdout, stderr). A timeout kills the process."""
        command = [self.binary, "--data-dir", self.data_dir, "--store", self.store, *args]
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env(),
            )
        except OSError as exc:
            raise BackendUnavailable(f"cannot start {self.binary}: {exc}", backend=BACKEND) from exc
        try:
            out, err = await asyncio.wait_for(process.communicate(), self.timeout_s)
        except (TimeoutError, asyncio.CancelledError):
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        return process.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")

    async def call(self, args: Sequence[str]) -> Any:
        """Run, retrying a locked store with bounded backoff; parse stdout as JSON."""
        operation = args[0] if args else "?"
        delay = FIRST_LOCKED_BACKOFF_S
        for attempt in range(LOCKED_ATTEMPTS):
            try:
                code, out, err = await self.run(args)
            except TimeoutError as exc:
                raise BackendUnavailable(
                    f"mnemon {operation} did not answer within {self.timeout_s:g} s", backend=BACKEND
                ) from exc
            if code == 0:
                return _parse(operation, out)
            failure = translate(operation, err)
            locked = isinstance(failure, BackendUnavailable) and "locked" in str(failure)
            if not locked or attempt == LOCKED_ATTEMPTS - 1:
                raise failure
            await asyncio.sleep(delay * (1 + random.random()))
            delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


def _parse(operation: str, out: str) -> Any:
    text = out.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # A few commands (store create) answer in plain text.
        return {"text": text, "operation": operation}
