"""Traces: JSON-safe documents with plan, stages, drops, timings; the bounded in-process store."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from memory_orchestrator.domain.results import QueryPlan
from memory_orchestrator.domain.trace import BASIC_LIST_LIMIT, InProcessTraceStore, Trace
from memory_orchestrator.ports import Intent, TraceStore

AT = datetime(2026, 3, 18, tzinfo=UTC)


def test_trace_document_is_json_safe_and_complete() -> None:
    trace = Trace("search", {"query": "why"}, created_at=AT)
    trace.set_plan(QueryPlan("why", "why", ("why",), Intent.WHY, ("why",), (), None, "expanded", 2, 0.7))
    with trace.timed("retrieval"):
        trace.record("retrieval", lists={"keyword#0": [{"id": "m1", "score": 1.5}]})
    trace.drop("m2", "duplicate of m1", "dedup")
    trace.warn("channel recall#0 failed")
    trace.warn("channel recall#0 failed")
    trace.result_ids = ["m1"]
    document = json.loads(json.dumps(trace.to_dict()))
    assert document["trace_id"] == trace.trace_id and trace.trace_id.startswith("tr-")
    assert document["plan"]["intent"] == "WHY"
    assert document["stages"]["retrieval"]["lists"]["keyword#0"][0]["id"] == "m1"
    assert document["drops"] == [{"memory_id": "m2", "reason": "duplicate of m1", "stage": "dedup"}]
    assert document["warnings"] == ["channel recall#0 failed"]
    assert document["timings_ms"]["retrieval"] >= 0
    assert document["created_at"] == "2026-03-18T00:00:00Z"


def test_basic_verbosity_caps_long_lists_full_keeps_them() -> None:
    long = list(range(BASIC_LIST_LIMIT + 7))
    basic = Trace("search", {}, created_at=AT)
    basic.record("ranking", items=long)
    full = Trace("search", {}, created_at=AT, verbosity="full")
    full.record("ranking", items=long)
    assert basic.to_dict()["stages"]["ranking"]["items"][-1] == {"omitted": 7}
    assert full.to_dict()["stages"]["ranking"]["items"] == long


@pytest.mark.parametrize("size", [0, BASIC_LIST_LIMIT, BASIC_LIST_LIMIT + 1, BASIC_LIST_LIMIT + 90])
@pytest.mark.parametrize("verbosity", ["basic", "full"])
def test_listed_formats_only_what_the_trace_keeps_and_records_as_record_would(
    size: int, verbosity: str
) -> None:
    values = list(range(size))
    formatted: list[int] = []

    def form(value: int) -> dict[str, int]:
        formatted.append(value)
        return {"id": value}

    lazy = Trace("search", {}, created_at=AT, verbosity=verbosity)
    lazy.record("ranking", items=lazy.listed(values, form))
    eager = Trace("search", {}, created_at=AT, verbosity=verbosity)
    eager.record("ranking", items=[{"id": value} for value in values])
    assert lazy.to_dict()["stages"] == eager.to_dict()["stages"]
    kept = size if verbosity == "full" else min(size, BASIC_LIST_LIMIT)
    assert formatted == values[:kept]


@pytest.mark.anyio
async def test_in_process_store_prunes_oldest_and_lists_newest_first() -> None:
    store = InProcessTraceStore(retention=2)
    assert isinstance(store, TraceStore)
    for n in range(3):
        await store.save(f"t{n}", AT + timedelta(minutes=n), {"n": n})
    assert await store.load("t0") is None
    assert await store.load("t2") == {"n": 2}
    assert [trace_id for trace_id, _ in await store.recent()] == ["t2", "t1"]


@pytest.mark.anyio
async def test_in_process_store_keeps_documents_as_bytes_and_returns_fresh_copies() -> None:
    store = InProcessTraceStore()
    trace = Trace("search", {"query": "why did we leave Stratus?", "k": 10}, created_at=AT)
    trace.record("retrieval", lists={"keyword#0": [{"id": "m1", "score": 1.5}]})
    document = trace.to_dict()
    await store.save(trace.trace_id, AT, document)
    await store.save("odd", AT, {"when": AT, "names": ("Ana", "Bo")})
    first, second = await store.load(trace.trace_id), await store.load(trace.trace_id)
    assert first == document and first is not document and first is not second
    assert await store.load("odd") == {"when": str(AT), "names": ["Ana", "Bo"]}
    assert all(isinstance(packed, bytes) for _, packed in store._documents.values())
