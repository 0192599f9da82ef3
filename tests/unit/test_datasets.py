"""Loading eval-format datasets: files, folders, store folders, and clear errors on bad lines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.evaluation.datasets import (
    chronological,
    ingest,
    load_dataset,
    to_new_memory,
)
from memory_orchestrator.evaluation.synthetic import synthetic_dataset
from memory_orchestrator.ports import (
    Capabilities,
    Edge,
    EdgeType,
    InvalidRequest,
    NewMemory,
    WriteResult,
)
from memory_orchestrator.ports.validation import validate_edge


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


MEMORIES = [
    {"id": "m2", "content": "Second", "created_at": "2026-03-15T09:00:00Z", "source": "bob"},
    {
        "id": "m1",
        "content": "First",
        "category": "decision",
        "importance": 4,
        "entities": ["Atlas"],
        "created_at": "2026-03-14T09:30:00Z",
    },
    {"link": {"source": "m1", "target": "m2", "type": "causal", "weight": 0.8}},
]
QUERIES = [
    {
        "id": "q1",
        "query": "why?",
        "now": "2026-10-01T09:00:00Z",
        "gold": ["m1"],
        "must_not": ["m2"],
        "intent": "WHY",
        "kind": "causal-chain",
        "gold_dups": {"m1": ["m2"]},
        "conversation": "c1",
    },
]


def test_folder_with_files_loads_memories_links_and_queries(tmp_path: Path) -> None:
    _write(tmp_path / "memories.jsonl", MEMORIES)
    _write(tmp_path / "queries.jsonl", QUERIES)
    _write(tmp_path / "links.jsonl", [{"source": "m2", "target": "m1", "type": "temporal"}])

    [store] = load_dataset(tmp_path)

    assert [m.id for m in store.memories] == ["m2", "m1"]
    first = store.memories[1]
    assert (first.category, first.importance, first.entities) == ("decision", 4, ("Atlas",))
    assert first.created_at == datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    assert [(link.source, link.type, link.weight) for link in store.links] == [
        ("m1", EdgeType.CAUSAL, 0.8),
        ("m2", EdgeType.TEMPORAL, 1.0),
    ]
    [query] = store.queries
    assert query.gold == ("m1",) and query.must_not == ("m2",)
    assert query.gold_dups["m1"] == ("m2",)
    assert dict(query.slices) == {"kind": "causal-chain", "intent": "WHY", "conversation": "c1"}


def test_queries_file_with_separate_corpus(tmp_path: Path) -> None:
    _write(tmp_path / "corpus" / "mem.jsonl", MEMORIES)
    _write(tmp_path / "q" / "queries.jsonl", QUERIES)

    [store] = load_dataset(tmp_path / "q" / "queries.jsonl", corpus=tmp_path / "corpus" / "mem.jsonl")

    assert len(store.memories) == 2 and len(store.queries) == 1


def test_folder_of_stores_loads_each_in_name_order(tmp_path: Path) -> None:
    for name in ("conv-2", "conv-1"):
        _write(tmp_path / name / "memories.jsonl", MEMORIES)
        _write(tmp_path / name / "queries.jsonl", QUERIES)

    stores = load_dataset(tmp_path)

    assert [store.name for store in stores] == ["conv-1", "conv-2"]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "m1"}, "missing 'content'"),
        ({"id": "m1", "content": "x", "category": "nope"}, "category 'nope'"),
        ({"id": "m1", "content": "x", "importance": 9}, "importance must be an integer 1-5"),
        ({"id": "m1", "content": "x", "created_at": "soon"}, "not an ISO 8601 timestamp"),
        ({"link": {"source": "a", "target": "b", "type": "friendship"}}, "link type 'friendship'"),
    ],
)
def test_bad_lines_are_rejected_with_file_and_line(
    tmp_path: Path, row: dict[str, object], message: str
) -> None:
    _write(tmp_path / "memories.jsonl", [{"id": "m0", "content": "fine"}, row])

    with pytest.raises(InvalidRequest, match=message) as caught:
        load_dataset(tmp_path)

    assert "memories.jsonl:2" in str(caught.value)


def test_duplicate_ids_and_missing_paths_are_rejected(tmp_path: Path) -> None:
    _write(tmp_path / "memories.jsonl", [{"id": "m1", "content": "a"}, {"id": "m1", "content": "b"}])
    with pytest.raises(InvalidRequest, match="duplicate id 'm1'"):
        load_dataset(tmp_path)
    with pytest.raises(InvalidRequest, match="not found"):
        load_dataset(tmp_path / "missing")


def test_chronological_order_and_write_requests(tmp_path: Path) -> None:
    _write(tmp_path / "memories.jsonl", [*MEMORIES, {"id": "m3", "content": "Undated"}])
    [store] = load_dataset(tmp_path)

    ordered = chronological(store.memories)

    assert [m.id for m in ordered] == ["m1", "m2", "m3"]
    backdated = to_new_memory(ordered[0], backdated=True)
    assert backdated.created_at == datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
    assert backdated.dedup is False and backdated.metadata["dataset_id"] == "m1"
    assert to_new_memory(ordered[0], backdated=False).created_at is None


@pytest.mark.anyio
async def test_ingest_writes_back_dated_memories_then_links_and_maps_ids(tmp_path: Path) -> None:
    _write(
        tmp_path / "memories.jsonl",
        [*MEMORIES, {"link": {"source": "m1", "target": "nope", "type": "causal"}}],
    )
    [store] = load_dataset(tmp_path)
    backend = InMemoryBackend()
    async with backend:
        report = await ingest(backend, store)

        assert set(report.ids) == {"m1", "m2"}
        assert (report.written, report.links, report.backdated) == (2, 1, True)
        assert report.warnings == ["link m1 -> nope skipped: unknown memory nope"]
        first = backend.records[report.ids["m1"]]
        assert first.content == "First"
        assert first.created_at == datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
        # written oldest first, so m1 got the first backend id
        assert report.ids["m1"] < report.ids["m2"]
        edge_types = {
            (edge.source, edge.target, edge.type)
            for edge in backend.edges.values()
            if edge.type is EdgeType.CAUSAL
        }
        assert (report.ids["m1"], report.ids["m2"], EdgeType.CAUSAL) in edge_types


@pytest.mark.anyio
async def test_ingest_survives_a_refused_memory(tmp_path: Path) -> None:
    _write(tmp_path / "memories.jsonl", MEMORIES)
    [store] = load_dataset(tmp_path)
    backend = InMemoryBackend()
    async with backend:
        backend.fail_next("remember")
        report = await ingest(backend, store)

    assert set(report.ids) == {"m2"}
    assert report.written == 1
    assert any("memory m1 not written" in warning for warning in report.warnings)


class _NoBackdating(InMemoryBackend):
    """The reference backend, claiming it cannot back-date writes (as Mnemon's CLI cannot)."""

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, backdated_writes=False)


@pytest.mark.anyio
async def test_ingest_without_backdating_writes_oldest_first_and_says_so(tmp_path: Path) -> None:
    _write(tmp_path / "memories.jsonl", MEMORIES)
    [store] = load_dataset(tmp_path)
    backend = _NoBackdating()
    async with backend:
        report = await ingest(backend, store)

        written = [args[0] for name, args in backend.calls if name == "remember"]
        assert [memory.metadata["dataset_id"] for memory in written] == ["m1", "m2"]
        assert all(memory.created_at is None for memory in written)
        assert report.backdated is False
        assert "cannot back-date writes" in report.warnings[0]


class _Bulk(InMemoryBackend):
    """The reference backend with a bulk path that takes two memories a call, recording each call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    @property
    def capabilities(self) -> Capabilities:
        return replace(super().capabilities, bulk_writes=True, bulk_batch=2)

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        self.batches.append(len(memories))
        return [await self.remember(memory) for memory in memories]


@pytest.mark.anyio
async def test_ingest_hands_the_bulk_path_batches_of_the_size_the_backend_asks(tmp_path: Path) -> None:
    rows = [
        {"id": f"m{i}", "content": f"memory number {i}", "created_at": f"2026-03-{10 + i:02d}T09:00:00Z"}
        for i in range(5)
    ]
    _write(tmp_path / "memories.jsonl", rows)
    [store] = load_dataset(tmp_path)
    backend = _Bulk()
    async with backend:
        report = await ingest(backend, store)

    assert backend.batches == [2, 2, 1]
    assert report.written == 5


class _BulkLinks(InMemoryBackend):
    """The reference backend with a bulk link path (all or none), recording each call."""

    def __init__(self) -> None:
        super().__init__()
        self.link_calls: list[int] = []

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        self.link_calls.append(len(edges))
        for edge in edges:
            validate_edge(edge)
        return [await self.link(edge) for edge in edges]


@pytest.mark.anyio
@pytest.mark.parametrize("refused", [False, True], ids=["all linked", "one refused"])
async def test_ingest_links_in_one_bulk_call_and_one_by_one_when_it_is_refused(
    tmp_path: Path, refused: bool
) -> None:
    links = [{"link": {"source": "m1", "target": "m2", "type": "causal", "weight": 0.8}}]
    links.append({"link": {"source": "m2", "target": "m2" if refused else "m1", "type": "entity"}})
    _write(tmp_path / "memories.jsonl", [*MEMORIES[:2], *links])
    [store] = load_dataset(tmp_path)
    backend = _BulkLinks()
    async with backend:
        report = await ingest(backend, store)
        linked = {(edge.source, edge.target, edge.type) for edge in backend.edges.values()}

    m1, m2 = report.ids["m1"], report.ids["m2"]
    assert backend.link_calls == [2]
    assert (m1, m2, EdgeType.CAUSAL) in linked
    if refused:  # a link to itself fails the bulk call: the other link still went in, one by one
        assert report.links == 1
        assert len(report.warnings) == 1 and "link m2 -> m2 not written" in report.warnings[0]
    else:
        assert report.links == 2 and report.warnings == []
        assert (m2, m1, EdgeType.ENTITY) in linked


def test_synthetic_queries_are_drawn_one_after_the_other_so_asking_more_keeps_the_first() -> None:
    # the bench asks for twice its queries and times memory_context growth on the second half,
    # which no measured size has answered; its first half stays the queries it always timed
    few, more = synthetic_dataset(200, queries=6, seed=3), synthetic_dataset(200, queries=12, seed=3)
    assert more.memories == few.memories and more.links == few.links
    assert more.queries[:6] == few.queries
    assert {query.query for query in more.queries[6:]} - {query.query for query in few.queries}
