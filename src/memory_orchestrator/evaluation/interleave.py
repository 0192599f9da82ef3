"""Timing several paths at the same moments: each call made on every path in turn.

On a shared machine a quiet minute for one path and a busy one for the next make the differences
between paths measured one after the other noise; interleaved, every path meets the same moments.
The benchmark times the MCP transports this way (``transports.py``), and the growth of
``memory_context`` from the smallest store to the largest (``bench.py``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

#: One call on some path: ``(position, arguments)``; raises when the call failed.
Caller = Callable[[int, dict[str, Any]], Awaitable[None]]


async def interleaved(
    callers: Mapping[str, Caller], calls: Sequence[dict[str, Any]], warmup: int
) -> dict[str, list[float]]:
    """Milliseconds of each of ``calls`` on every path of ``callers``, after the first ``warmup``
    calls. Each call is made on every path in turn before the next (the path that goes first moves
    on by one from call to call)."""
    names = list(callers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for position, arguments in enumerate(calls):
        shift = position % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            await callers[name](position, arguments)
            if position >= warmup:
                times[name].append((time.perf_counter() - started) * 1000.0)
    return times
