"""The queue of a server's tool calls: at most ``limit`` inside at once, the others in arrival order,
and no slot lost to a caller that gives up (cancelled while waiting, or just after its turn came)."""

from __future__ import annotations

import asyncio

import pytest

from memory_orchestrator.entrypoints.mcp.admission import Admission


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.anyio
async def test_at_most_limit_run_at_once_and_the_others_enter_in_arrival_order() -> None:
    admission = Admission(2)
    entered: list[int] = []
    inside = peak = 0
    release = asyncio.Event()

    async def call(number: int) -> None:
        nonlocal inside, peak
        async with admission:
            entered.append(number)
            inside += 1
            peak = max(peak, inside)
            await release.wait()
            await asyncio.sleep(0)
            inside -= 1

    tasks = []
    for number in range(7):
        tasks.append(asyncio.create_task(call(number)))
        await _settle()  # each call arrives after the one before
    assert entered == [0, 1] and admission.running == 2
    release.set()
    async with asyncio.timeout(5):
        await asyncio.gather(*tasks)
    assert entered == list(range(7))
    assert peak == 2 and admission.running == 0


@pytest.mark.anyio
@pytest.mark.parametrize("when", ["while waiting", "just as its turn came"])
async def test_a_caller_cancelled_never_keeps_a_slot(when: str) -> None:
    admission = Admission(1)
    order: list[str] = []
    hold = asyncio.Event()

    async def call(name: str) -> None:
        async with admission:
            order.append(name)
            await hold.wait()
        if name == "first" and when == "just as its turn came":
            middle.cancel()  # the slot was handed to "middle" as "first" left: it has not run yet

    first = asyncio.create_task(call("first"))
    await _settle()
    middle = asyncio.create_task(call("middle"))
    last = asyncio.create_task(call("last"))
    await _settle()
    if when == "while waiting":
        middle.cancel()
        await _settle()
    hold.set()
    async with asyncio.timeout(5):  # a lost slot would keep "last" out for ever
        await asyncio.gather(first, last)
    assert middle.cancelled()
    assert order == ["first", "last"] and admission.running == 0


@pytest.mark.anyio
async def test_a_failing_call_frees_its_slot() -> None:
    admission = Admission(1)
    with pytest.raises(RuntimeError):
        async with admission:
            raise RuntimeError("the call failed")
    assert admission.running == 0
    async with asyncio.timeout(1):
        async with admission:
            assert admission.running == 1


def test_a_queue_lets_at_least_one_call_in() -> None:
    with pytest.raises(ValueError):
        Admission(0)
