"""An exclusive lock across processes on a file, for adapters whose store has no writer queue of its
own (Mnemon sets no busy timeout; the knowledge-graph server's memory file has none at all)."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from memory_orchestrator.ports.errors import BackendUnavailable

#: How often a waiting writer tries the lock again, in seconds.
POLL_S = 0.01


@contextlib.asynccontextmanager
async def exclusive_file_lock(
    path: Path, timeout_s: float, *, held: str, backend: str
) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); ``BackendUnavailable`` saying
    "another writer held <held> for over N s" when it cannot be had within ``timeout_s``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    message = f"another writer held {held} for over {timeout_s:g} s"
                    raise BackendUnavailable(message, backend=backend) from None
                await asyncio.sleep(POLL_S)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
