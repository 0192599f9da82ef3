"""The slot-by-slot constructors of records read from a store make what the dataclasses make, an
edge's metadata decoded once per text is never shared mutable state, and a link candidate pickles
as a call of its class (what the bulk planner's helper sends)."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from memory_orchestrator.adapters.sqlite.rows import EDGE_COLUMNS, edge_from_row, record_from_row
from memory_orchestrator.ports import Edge, EdgeType, LinkCandidate, MemoryRecord, Neighbor
from memory_orchestrator.ports.records import EMPTY_MAPPING, reached_neighbor, stored_record

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
FIELDS = ("m-1", "text", T0, T0, "fact", 4, ("t",), ("Ann",), "user")


def test_a_stored_record_is_the_record_the_constructor_makes() -> None:
    made = stored_record(*FIELDS, {"k": "v"}, ("m-2",))
    expected = MemoryRecord(*FIELDS, {"k": "v"}, ("m-2",))
    assert made == expected and repr(made) == repr(expected) and hash(made) == hash(expected)
    assert dict(made.metadata) == {"k": "v"}
    with pytest.raises(TypeError):
        made.metadata["k"] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError):
        made.content = "other"  # type: ignore[misc]
    assert stored_record(*FIELDS, EMPTY_MAPPING, ()).metadata is EMPTY_MAPPING


def test_a_reached_neighbor_is_the_neighbor_the_constructor_makes() -> None:
    record = MemoryRecord(*FIELDS)
    edge = Edge("m-0", "m-1", EdgeType.ENTITY, 0.5)
    made = reached_neighbor(record, edge, "m-0", 2)
    assert made == Neighbor(record, edge, "m-0", 2) and repr(made) == repr(Neighbor(record, edge, "m-0", 2))
    with pytest.raises(AttributeError):
        made.hops = 1  # type: ignore[misc]


def test_edges_read_back_their_metadata_and_share_nothing_mutable() -> None:
    assert EDGE_COLUMNS.count(",") == 5
    stamp = "2026-03-01T12:00:00.000000Z"
    plain = edge_from_row(("a", "b", "entity", 0.5, '{"entities":"ann","sub_type":"shared_entity"}', stamp))
    again = edge_from_row(("c", "d", "entity", 0.5, '{"entities":"ann","sub_type":"shared_entity"}', stamp))
    assert dict(plain.metadata) == {"entities": "ann", "sub_type": "shared_entity"} == dict(again.metadata)
    assert plain.created_at == T0 and plain.created_at.tzinfo is UTC
    with pytest.raises(TypeError):
        plain.metadata["entities"] = "x"  # type: ignore[index]
    # a value that is not text (a store written by hand): decoded for each edge, never shared
    odd = '{"ids":["x"]}'
    first, second = (
        edge_from_row(("a", "b", "semantic", 1, odd, stamp)),
        edge_from_row(("a", "b", "semantic", 1, odd, stamp)),
    )
    assert dict(first.metadata) == {"ids": ["x"]}
    assert first.metadata["ids"] is not second.metadata["ids"]
    assert edge_from_row(("a", "b", "temporal", 1, "{}", stamp)).metadata is EMPTY_MAPPING


def test_a_record_row_reads_back_as_the_record() -> None:
    row = (
        "m-1",
        "text",
        "fact",
        4,
        '["t"]',
        '["Ann"]',
        "user",
        '{"k":"v"}',
        "2026-03-01T12:00:00.000000Z",
        "2026-03-01T12:00:00Z",
    )
    record = record_from_row(row, ["m-2"])
    assert record == MemoryRecord(*FIELDS, {"k": "v"}, ("m-2",))
    assert record.created_at.tzinfo is UTC and record.updated_at.tzinfo is UTC


def test_a_link_candidate_pickles_as_a_call_of_its_class_and_loads_equal_and_frozen() -> None:
    candidates = (
        LinkCandidate("m-1", "the atlas cutover", 0.5, EdgeType.CAUSAL, "causes (0.50)"),
        LinkCandidate("m-2", "lunch", 0.25),
    )
    assert candidates[0].__reduce_ex__(pickle.HIGHEST_PROTOCOL) == (
        LinkCandidate,
        ("m-1", "the atlas cutover", 0.5, EdgeType.CAUSAL, "causes (0.50)"),
    )
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        loaded = pickle.loads(pickle.dumps(candidates, protocol=protocol))
        assert loaded == candidates and repr(loaded) == repr(candidates)
        assert loaded[1].edge_type is EdgeType.SEMANTIC and loaded[1].reason == ""
        with pytest.raises(AttributeError):
            loaded[0].similarity = 1.0  # type: ignore[misc]
