"""Retrieval: channels by capability, concurrency, fusion, filters, "as of now", failures and timeouts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.retrieval import (
    channel_weights,
    fuse,
    native_filters,
    retrieve,
    retrieve_recent,
    with_window,
)
from memory_orchestrator.ports import (
    Capabilities,
    Filters,
    FixedClock,
    Hit,
    Intent,
    MemoryRecord,
    NewMemory,
    TimeRange,
)

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
#: Both channels in use (the default config skips native recall next to keyword search).
CONFIG = PipelineConfig(stage_timeout_s=0.5, channel_weights={"keyword": 1.0, "recall": 0.6})


async def backend_with(*rows: tuple[str, int, str]) -> InMemoryBackend:
    backend = InMemoryBackend(clock=FixedClock(NOW))
    await backend.open()
    for content, days_ago, category in rows:
        await backend.remember(
            NewMemory(content, category=category, created_at=NOW - timedelta(days=days_ago))
        )
    return backend


ROWS = (
    ("vendor x shipped the sensors late", 10, "fact"),
    ("atlas launch postponed to april", 8, "decision"),
    ("lunch menu for friday", 2, "general"),
    ("sensors calibrated for atlas", 1, "fact"),
)


@pytest.mark.anyio
async def test_every_subquery_runs_on_every_channel_and_fuses() -> None:
    backend = await backend_with(*ROWS)
    outcome = await retrieve(
        backend,
        ("sensors late", "atlas launch"),
        intent=Intent.GENERAL,
        filters=Filters(),
        now=NOW,
        config=CONFIG,
    )
    assert set(outcome.lists) == {"keyword#0", "recall#0", "keyword#1", "recall#1"}
    assert backend.called("search") == 2 and backend.called("recall") == 2
    assert outcome.candidates[0].memory_id == "mem-000001"
    assert outcome.candidates[0].relevance == pytest.approx(1.0)
    assert {"keyword", "recall"} <= outcome.candidates[0].channels
    assert all(0.0 <= c.relevance <= 1.0 for c in outcome.candidates)
    assert outcome.warnings == []


@pytest.mark.anyio
async def test_failing_channel_is_a_warning_and_others_still_count() -> None:
    backend = await backend_with(*ROWS)
    backend.fail_always("recall")
    outcome = await retrieve(
        backend, ("sensors",), intent=Intent.GENERAL, filters=Filters(), now=NOW, config=CONFIG
    )
    assert [c.memory_id for c in outcome.candidates][:2] == ["mem-000004", "mem-000001"] or outcome.candidates
    assert outcome.channels_failed == 1
    assert any("recall#0 failed" in warning for warning in outcome.warnings)
    assert all(c.channels == {"keyword"} for c in outcome.candidates)


@pytest.mark.anyio
async def test_slow_channel_times_out_without_blocking_the_others() -> None:
    backend = await backend_with(*ROWS)
    backend.delay("recall", 5.0)
    outcome = await retrieve(
        backend,
        ("sensors",),
        intent=Intent.GENERAL,
        filters=Filters(),
        now=NOW,
        config=PipelineConfig(stage_timeout_s=0.05, channel_weights=CONFIG.channel_weights),
    )
    assert outcome.candidates
    assert any("recall#0 timed out" in warning for warning in outcome.warnings)


@pytest.mark.anyio
async def test_memories_created_after_now_are_invisible() -> None:
    backend = await backend_with(*ROWS)
    outcome = await retrieve(
        backend,
        ("sensors",),
        intent=Intent.GENERAL,
        filters=Filters(),
        now=NOW - timedelta(days=5),
        config=CONFIG,
    )
    assert "mem-000004" not in {c.memory_id for c in outcome.candidates}
    assert "mem-000001" in {c.memory_id for c in outcome.candidates}


class NoFilterBackend(InMemoryBackend):
    """A backend that cannot filter natively and ignores filters (the domain must apply them)."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            category_filters=False, time_filters=False, entity_filters=False, source_filters=False
        )

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        assert filters.is_empty()
        return await super().search(text, limit=limit, now=now)


@pytest.mark.anyio
async def test_filters_are_applied_in_the_domain_when_the_backend_cannot() -> None:
    backend = NoFilterBackend(clock=FixedClock(NOW))
    await backend.open()
    for content, days_ago, category in ROWS:
        await backend.remember(
            NewMemory(content, category=category, created_at=NOW - timedelta(days=days_ago))
        )
    outcome = await retrieve(
        backend,
        ("sensors",),
        intent=Intent.GENERAL,
        filters=Filters(categories=("fact",), time_range=TimeRange(NOW - timedelta(days=5))),
        now=NOW,
        config=CONFIG,
    )
    assert [c.memory_id for c in outcome.candidates] == ["mem-000004"]
    assert ("mem-000001", "filtered: outside the request filters") in outcome.filtered


def test_default_channels_skip_recall_next_to_keyword_search() -> None:
    assert channel_weights(Capabilities(), PipelineConfig()) == {"keyword": 1.0}
    assert channel_weights(Capabilities(keyword_search=False), PipelineConfig()) == {"recall": 1.0}
    assert channel_weights(Capabilities(), CONFIG) == {"keyword": 1.0, "recall": 0.6}


def test_native_filters_follow_capabilities_and_windows_intersect() -> None:
    filters = Filters(categories=("fact",), time_range=TimeRange(NOW - timedelta(days=30), NOW))
    assert native_filters(filters, Capabilities(time_filters=False)).time_range is None
    assert native_filters(filters, Capabilities()).categories == ("fact",)
    narrowed = with_window(filters, TimeRange(NOW - timedelta(days=7), None))
    assert narrowed.time_range == TimeRange(NOW - timedelta(days=7), NOW)


def record(memory_id: str) -> MemoryRecord:
    return MemoryRecord(memory_id, memory_id, NOW, NOW)


def test_fusion_rewards_agreement_and_channel_strength() -> None:
    from memory_orchestrator.domain.retrieval import _ListSpec, _no_call

    keyword = _ListSpec("keyword#0", "keyword", 0, 1.0, _no_call)
    recall = _ListSpec("recall#0", "recall", 0, 0.6, _no_call)
    fused = fuse(
        [
            (keyword, [Hit(record("a"), 10.0), Hit(record("b"), 9.0), Hit(record("c"), 1.0)]),
            (recall, [Hit(record("b"), 0.5), Hit(record("d"), 0.4)]),
        ],
        rrf_k=60,
    )
    order = [c.memory_id for c in fused]
    assert order.index("b") < order.index("c") and order.index("a") < order.index("c")
    assert fused[order.index("b")].ranks == {"keyword#0": 2, "recall#0": 1}
    assert fused[order.index("c")].relevance < 0.5


@pytest.mark.anyio
async def test_recent_channel_returns_newest_within_filters() -> None:
    backend = await backend_with(*ROWS)
    outcome = await retrieve_recent(
        backend,
        filters=Filters(time_range=TimeRange(NOW - timedelta(days=9))),
        now=NOW,
        limit=10,
        config=CONFIG,
    )
    assert [c.memory_id for c in outcome.candidates] == ["mem-000004", "mem-000003", "mem-000002"]
