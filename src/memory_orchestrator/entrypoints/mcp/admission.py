"""First come, first served: at most ``limit`` tool calls of a server process run at once.

Every call let in shares the process's CPU with all the others: under more calls than the machine
can take, each one slows down with the crowd, and past the deadline (``[server] read_timeout_s``)
whole waves of them fail, their work wasted. Let in a few at a time, each runs at nearly full speed
while the rest wait in line, so calls finish in the order they came, and a deadline is missed only
by a call that never started (``ServerBusy``: nothing of it ran). The README's performance section
has the measurements (200 HTTP clients on a 10k store: hundreds of failed calls in 10 s with every
call let in at once, none or a few with 16 at a time).
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType


class Admission:
    """An async context manager that lets at most ``limit`` callers in at once, the others in the
    order they came (a slot is handed straight to the longest waiter)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("at least one call must be let in")
        self.limit = limit
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def __aenter__(self) -> None:
        if self.running < self.limit:  # a slot is free only while nobody waits: _release hands it on
            self.running += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed a slot, but cancelled before it could use it
            else:
                waiter.cancel()  # (cancelling the task cancelled it already) skipped by _release
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on: ``running`` stays
                return
        self.running -= 1
