"""The in-memory backend as a test fake: deterministic ids, inspectable state, injected failures."""

from __future__ import annotations

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend, create_backend
from memory_orchestrator.ports import (
    BackendRejected,
    BackendUnavailable,
    EdgeType,
    FixedClock,
    MemoryBackend,
    NewMemory,
    RecallQuery,
)

pytestmark = pytest.mark.anyio


async def test_ids_are_deterministic_and_state_is_inspectable() -> None:
    from datetime import UTC, datetime

    backend = create_backend({"clock": FixedClock(datetime(2026, 2, 1, tzinfo=UTC))})
    assert isinstance(backend, MemoryBackend)
    async with backend:
        first = await backend.remember(NewMemory("We use Kafka", source="a", entities=("Kafka",)))
        second = await backend.remember(NewMemory("Kafka lag alert", source="a"))
    assert (first.id, second.id) == ("mem-000001", "mem-000002")
    assert list(backend.records) == ["mem-000001", "mem-000002"]
    assert {key[2] for key in backend.edges} >= {EdgeType.TEMPORAL, EdgeType.ENTITY}
    assert [name for name, _ in backend.calls] == ["open", "remember", "remember"]
    assert backend.called("remember") == 2
    assert [change.memory_id for change in backend.change_log] == ["mem-000001", "mem-000002"]


async def test_fail_next_fails_once_then_recovers() -> None:
    backend = InMemoryBackend()
    backend.fail_next("recall")
    with pytest.raises(BackendUnavailable, match="injected"):
        await backend.recall(RecallQuery("x"))
    assert await backend.recall(RecallQuery("x")) == []


async def test_fail_always_until_healed_with_a_chosen_error() -> None:
    backend = InMemoryBackend()
    backend.fail_always("remember", BackendRejected("read only", backend="memory"))
    for _ in range(2):
        with pytest.raises(BackendRejected, match="read only"):
            await backend.remember(NewMemory("x"))
    assert backend.records == {}
    backend.heal()
    assert (await backend.remember(NewMemory("x"))).id == "mem-000001"


async def test_delay_makes_a_method_slow() -> None:
    import anyio

    backend = InMemoryBackend()
    backend.delay("search", 10.0)
    with anyio.move_on_after(0.05) as scope:
        await backend.search("anything")
    assert scope.cancelled_caught
    assert backend.called("search") == 1
