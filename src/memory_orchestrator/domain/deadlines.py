"""Stage deadlines that hold even when a backend call ignores cancellation.

``asyncio.wait_for`` waits for the cancelled call to finish, so a driver that swallows or shields
the cancellation (or blocks in a worker thread) would make the read path hang past its timeout.
:func:`within` returns at the deadline whatever the call does: the call is cancelled and left to
finish on its own, its late result or error discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(call: Awaitable[T], seconds: float) -> T:
    """The result of ``call``; ``TimeoutError`` once ``seconds`` have passed, without waiting longer.

    If the caller is cancelled first (an outer deadline), the call is cancelled and left the same way.
    """
    task = asyncio.ensure_future(call)
    try:
        done, _ = await asyncio.wait({task}, timeout=max(0.0, seconds))
    except BaseException:
        _abandon(task)
        raise
    if task in done:
        return task.result()
    _abandon(task)
    raise TimeoutError(f"no answer within {seconds:.3f} s")


def _abandon(task: asyncio.Future[T]) -> None:
    task.cancel()
    task.add_done_callback(_discard)


def _discard(task: asyncio.Future[T]) -> None:
    # Retrieve a late error so asyncio does not log "exception was never retrieved".
    if not task.cancelled():
        task.exception()
