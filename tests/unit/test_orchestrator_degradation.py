"""Degradation, passthrough and input validation of the Orchestrator (in-memory backend as the fake)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.orchestrator import PASSTHROUGH_REASON, Orchestrator
from memory_orchestrator.domain.requests import (
    Budget,
    ContextRequest,
    ExpandRequest,
    PlanOverrides,
    SearchRequest,
    WriteRequest,
)
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    FixedClock,
    Hit,
    InvalidRequest,
    NewMemory,
    TimeRange,
    WriteAction,
)

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)


async def store() -> InMemoryBackend:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    await backend.open()
    for days, content in enumerate(
        ["Atlas launch moved to April", "Vendor X sensors late", "Atlas budget approved", "Atlas QA hire"]
    ):
        await backend.remember(NewMemory(content, created_at=NOW - timedelta(days=10 - days)))
    return backend


def orchestrator(backend: InMemoryBackend, **config: object) -> Orchestrator:
    config.setdefault("channel_weights", {"keyword": 1.0, "recall": 0.6})
    return Orchestrator(backend, config=PipelineConfig(**config), clock=FixedClock(NOW))  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_backend_down_gives_an_empty_answer_with_warnings_not_an_error() -> None:
    backend = await store()
    for method in ("search", "recall", "known_entities"):
        backend.fail_always(method)
    orch = orchestrator(backend)
    result = await orch.search(SearchRequest("Atlas launch"))
    assert result.items == ()
    assert any("unavailable" in warning for warning in result.warnings)
    context = await orch.context(ContextRequest("Atlas launch"))
    assert context.context_block == "" and context.warnings
    document = await orch.trace(result.trace_id)
    assert document["warnings"] == list(result.warnings)


@pytest.mark.anyio
async def test_one_failing_channel_still_answers_from_the_other() -> None:
    backend = await store()
    backend.fail_next("search")
    result = await orchestrator(backend).search(SearchRequest("Atlas launch", expand=False))
    assert "mem-000001" in {item.memory_id for item in result.items}
    assert all(item.channels == ("recall",) for item in result.items)
    assert any("keyword#0 failed" in warning for warning in result.warnings)


@pytest.mark.anyio
async def test_expansion_failure_and_timeout_keep_the_direct_results() -> None:
    backend = await store()
    backend.fail_always("neighbors")
    failed = await orchestrator(backend).search(SearchRequest("Atlas launch"))
    assert failed.items and all(not item.path for item in failed.items)
    assert any("expansion hop 1 failed" in warning for warning in failed.warnings)
    backend.heal()
    backend.delay("neighbors", 5.0)
    slow = await orchestrator(backend, stage_timeout_s=0.05).search(SearchRequest("Atlas launch"))
    assert slow.items and any("timed out" in warning for warning in slow.warnings)


@pytest.mark.anyio
async def test_slow_channel_is_cut_by_the_stage_timeout() -> None:
    backend = await store()
    backend.delay("recall", 5.0)
    result = await orchestrator(backend, stage_timeout_s=0.05).search(
        SearchRequest("Atlas launch", expand=False)
    )
    assert result.items[0].memory_id == "mem-000001"
    assert any("recall#0 timed out" in warning for warning in result.warnings)


@pytest.mark.anyio
async def test_passthrough_uses_backend_recall_and_remember_directly() -> None:
    backend = await store()
    orch = orchestrator(backend, passthrough=True)
    result = await orch.search(SearchRequest("Atlas launch", top_k=2))
    assert len(result.items) == 2
    assert all(item.reasons == (PASSTHROUGH_REASON,) for item in result.items)
    assert backend.called("search") == 0 and backend.called("neighbors") == 0
    assert result.plan.strategy == "passthrough"
    written = await orch.write(WriteRequest(NewMemory("Atlas launch moved to April!")))
    assert written.action == WriteAction.ADDED  # the backend only skips identical text
    assert backend.called("remember") == 5


@pytest.mark.anyio
@pytest.mark.parametrize(
    "request_",
    [
        SearchRequest("x", top_k=0),
        SearchRequest("x", top_k=1000),
        SearchRequest("x" * 5000),
        SearchRequest("x", overrides=PlanOverrides(strategy="magic")),
        SearchRequest("x", overrides=PlanOverrides(hops=9)),
        SearchRequest("x", filters=Filters(time_range=TimeRange(NOW, NOW - timedelta(days=1)))),
        SearchRequest("x", filters=Filters(categories=("",))),
    ],
)
async def test_invalid_search_input_is_rejected(request_: SearchRequest) -> None:
    backend = await store()
    with pytest.raises(InvalidRequest):
        await orchestrator(backend).search(request_)
    assert backend.called("search") == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    "request_",
    [
        ContextRequest("x", budget=Budget(max_items=0)),
        ContextRequest("x", budget=Budget(max_chars=0)),
        ContextRequest("x", group_by="colour"),
    ],
)
async def test_invalid_context_input_is_rejected(request_: ContextRequest) -> None:
    with pytest.raises(InvalidRequest):
        await orchestrator(await store()).context(request_)


@pytest.mark.anyio
async def test_invalid_expand_input_is_rejected() -> None:
    orch = orchestrator(await store())
    with pytest.raises(InvalidRequest):
        await orch.expand(ExpandRequest())
    with pytest.raises(InvalidRequest):
        await orch.expand(ExpandRequest(seeds=("mem-000001",), hops=0))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "request_",
    [
        WriteRequest(NewMemory("   ")),
        WriteRequest(NewMemory("fine", category="nonsense")),
        WriteRequest(NewMemory("fine"), supersedes=("mem-999999",)),
        WriteRequest(NewMemory("fine"), links=(Edge("", "mem-999999", EdgeType.ENTITY),)),
        WriteRequest(NewMemory("fine"), links=(Edge("", "mem-000001", EdgeType.ENTITY, 3.0),)),
    ],
)
async def test_invalid_write_changes_nothing(request_: WriteRequest) -> None:
    backend = await store()
    with pytest.raises(InvalidRequest):
        await orchestrator(backend).write(request_)
    assert len(backend.records) == 4 and backend.called("remember") == 4


@pytest.mark.anyio
async def test_duplicate_explosion_is_merged_with_a_warning() -> None:
    backend = await store()
    for _ in range(6):
        await backend.remember(
            NewMemory("Vendor X sensors late", dedup=False, created_at=NOW - timedelta(days=3))
        )
    result = await orchestrator(backend).search(SearchRequest("Vendor X sensors late", expand=False))
    assert [item.memory_id for item in result.items].count("mem-000002") + len(
        result.items[0].absorbed_ids
    ) >= 6
    assert len({item.content for item in result.items}) == len(result.items)
    assert any("duplicate memories merged" in warning for warning in result.warnings)


@pytest.mark.anyio
async def test_held_back_recall_answers_when_keyword_search_fails() -> None:
    backend = await store()
    backend.fail_always("search")
    orch = Orchestrator(backend, clock=FixedClock(NOW))  # default channels: keyword only
    result = await orch.search(SearchRequest("Atlas launch", expand=False))
    assert "mem-000001" in {item.memory_id for item in result.items}
    assert "channel keyword#0 failed (BackendUnavailable); results without it" in result.warnings
    assert "falling back to the recall channel" in result.warnings
    assert not any("injected" in warning for warning in result.warnings)


class StubbornBackend(InMemoryBackend):
    """A backend whose keyword search ignores cancellation (a driver blocking in its own thread)."""

    finished = False

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        try:
            await asyncio.sleep(0.5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)  # swallows the cancellation and keeps going
        self.finished = True
        return []


@pytest.mark.anyio
async def test_a_call_that_ignores_cancellation_cannot_hold_the_answer_past_the_deadline() -> None:
    backend = StubbornBackend(clock=FixedClock(NOW))
    await backend.open()
    await backend.remember(NewMemory("Atlas launch moved to April", created_at=NOW - timedelta(days=1)))
    orch = Orchestrator(backend, config=PipelineConfig(stage_timeout_s=0.05), clock=FixedClock(NOW))
    result = await orch.search(SearchRequest("Atlas launch", expand=False))
    assert not backend.finished  # the answer did not wait for the stubborn call
    assert "channel keyword#0 timed out; results without it" in result.warnings
    assert [item.memory_id for item in result.items] == ["mem-000001"]  # from the held-back recall


@pytest.mark.anyio
@pytest.mark.parametrize("failure", [None, RuntimeError("driver bug")], ids=["backend-error", "any-error"])
async def test_a_write_whose_link_failed_says_so_and_converges_when_retried(
    failure: Exception | None,
) -> None:
    backend = await store()
    orch = orchestrator(backend)
    [cause] = [record for record in await backend.recent(limit=10) if "sensors" in record.content]
    request = WriteRequest(
        NewMemory("Atlas launch slipped because the sensors were late", created_at=NOW),
        links=(Edge(cause.id, "", EdgeType.CAUSAL, 0.9),),
    )
    backend.fail_next("link", failure)
    first = await orch.write(request)
    assert first.action is WriteAction.ADDED and first.links_created == ()
    assert any(first.id in warning and "stored but link" in warning for warning in first.warnings)
    retried = await orch.write(request)
    assert (retried.action, retried.id) == (WriteAction.SKIPPED, first.id)
    assert [(edge.source, edge.target, edge.type) for edge in retried.links_created] == [
        (cause.id, first.id, EdgeType.CAUSAL)
    ]
    linked = {
        item.record.id: item.edge
        for item in await backend.neighbors([first.id], edge_types=[EdgeType.CAUSAL])
    }
    assert (linked[cause.id].source, linked[cause.id].weight) == (cause.id, 0.9)
