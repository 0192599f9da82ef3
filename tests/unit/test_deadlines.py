"""Stage deadlines: a call that ignores cancellation is left behind, and its late error is consumed."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from memory_orchestrator.domain.deadlines import within


async def _stubborn(finished: asyncio.Event) -> None:
    # a driver call that swallows its cancellation and fails later (a retry loop on a dead server)
    try:
        await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        await asyncio.sleep(0.05)
    finished.set()
    raise ConnectionError("the server went away")


async def _unretrieved_errors(run: Any) -> list[dict[str, Any]]:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        await run()
        gc.collect()  # asyncio reports an error nobody retrieved when its task is collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    return reported


@pytest.mark.anyio
async def test_a_call_past_its_deadline_is_left_and_its_late_error_consumed() -> None:
    finished = asyncio.Event()

    async def run() -> None:
        with pytest.raises(TimeoutError):
            await within(_stubborn(finished), 0.01)
        await asyncio.wait_for(finished.wait(), 5)

    assert await _unretrieved_errors(run) == []


@pytest.mark.anyio
async def test_a_caller_cancelled_by_an_outer_deadline_leaves_the_call_the_same_way() -> None:
    finished = asyncio.Event()

    async def run() -> None:
        with pytest.raises(TimeoutError):  # the outer deadline fires first
            await asyncio.wait_for(within(_stubborn(finished), 10.0), 0.01)
        await asyncio.wait_for(finished.wait(), 5)

    assert await _unretrieved_errors(run) == []
