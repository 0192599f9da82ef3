"""Validation of new memories and edges: one clear InvalidRequest per problem."""

from __future__ import annotations

import pytest

from memory_orchestrator.ports import Edge, EdgeType, InvalidRequest, NewMemory
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)


def test_a_plain_memory_is_valid() -> None:
    validate_new_memory(NewMemory("We use Postgres", category="decision", importance=5, tags=("db",)))


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        (NewMemory(""), "non-empty"),
        (NewMemory("   "), "non-empty"),
        (NewMemory("é" * 4001), "8000"),
        (NewMemory("x", category="opinion"), "category"),
        (NewMemory("x", importance=0), "importance"),
        (NewMemory("x", importance=6), "importance"),
        (NewMemory("x", tags=tuple(str(i) for i in range(21))), "tag"),
        (NewMemory("x", tags=("",)), "tag"),
        (NewMemory("x", tags=("t" * 101,)), "tag"),
        (NewMemory("x", entities=("e" * 201,)), "entity"),
        (NewMemory("x", entities=tuple(str(i) for i in range(51))), "entity"),
        (NewMemory("x", source=""), "source"),
        (NewMemory("x", source="s" * 101), "source"),
        (NewMemory("caf\udce9"), "content is not valid Unicode text .lone surrogate U.DCE9 at character 3"),
        (NewMemory("x", tags=("\ud800",)), "tag is not valid Unicode"),
        (NewMemory("x", entities=("Ana\udcff",)), "entity is not valid Unicode"),
        (NewMemory("x", source="\udc80"), "source is not valid Unicode"),
        (NewMemory("x", metadata={"speaker": "\udcff"}), "metadata is not valid Unicode"),
    ],
)
def test_invalid_memories_are_rejected_with_a_reason(memory: NewMemory, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        validate_new_memory(memory)


def test_content_at_the_byte_limit_is_accepted() -> None:
    validate_new_memory(NewMemory("é" * 4000))


def test_valid_edge() -> None:
    validate_edge(Edge("a", "b", EdgeType.CAUSAL, 0.5))
    validate_edge(Edge("a", "b", EdgeType.SEMANTIC, 0.0))


@pytest.mark.parametrize(
    ("edge", "message"),
    [
        (Edge("a", "a", EdgeType.ENTITY), "itself"),
        (Edge("a\udcff", "b", EdgeType.ENTITY), "edge source is not valid Unicode"),
        (Edge("", "b", EdgeType.ENTITY), "non-empty"),
        (Edge("a", "b", EdgeType.ENTITY, 1.5), "out of range"),
        (Edge("a", "b", EdgeType.ENTITY, -0.1), "out of range"),
        (Edge("a", "b", EdgeType.ENTITY, float("nan")), "number"),
        (Edge("a", "b", "friend"), "edge type"),  # type: ignore[arg-type]
    ],
)
def test_invalid_edges_are_rejected(edge: Edge, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        validate_edge(edge)


def test_limits_and_hops() -> None:
    validate_limit(1)
    validate_hops(3)
    for bad in (0, -1, 10_001, True):
        with pytest.raises(InvalidRequest, match="limit"):
            validate_limit(bad)
    for bad in (0, 6):
        with pytest.raises(InvalidRequest, match="hops"):
            validate_hops(bad)


def test_text_outside_ascii_is_valid_unless_it_holds_a_lone_surrogate() -> None:
    validate_new_memory(NewMemory("Café in Zürich, 東京 and 🚀", entities=("Zoë",), metadata={"k": "ü"}))
