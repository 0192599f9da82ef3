"""How the knowledge-graph server's names map onto memories and typed edges."""

from __future__ import annotations

import pytest

from memory_orchestrator.adapters.mcp_kg.graph import cause_first, edge_type, memory_id
from memory_orchestrator.ports import EdgeType


def test_memory_ids_depend_on_entity_and_text_only() -> None:
    assert memory_id("Ada", "likes tea") == memory_id("Ada", "likes tea")
    assert memory_id("Ada", "likes tea") != memory_id("Bob", "likes tea")
    assert memory_id("Ada", "likes tea") != memory_id("Ada", "likes coffee")
    # the separator keeps "a"+"bc" and "ab"+"c" apart
    assert memory_id("a", "bc") != memory_id("ab", "c")
    assert memory_id("Ada", "likes tea").startswith("kg-") and len(memory_id("x", "y")) == 27


@pytest.mark.parametrize(
    "relation",
    ["causes", "caused_by", "because_of", "Led To", "leads-to", "resulted_in", "motivated", "due_to"],
)
def test_causal_relation_names_become_causal_edges(relation: str) -> None:
    assert edge_type(relation) is EdgeType.CAUSAL


@pytest.mark.parametrize("relation", ["works_at", "uses", "owns", "decided", "knows", "depends_on"])
def test_other_relation_names_become_entity_edges(relation: str) -> None:
    assert edge_type(relation) is EdgeType.ENTITY


@pytest.mark.parametrize(
    ("relation", "forward"),
    [
        ("causes", True),
        ("led_to", True),
        ("motivated", True),
        ("caused_by", False),
        ("because_of", False),
        ("due-to", False),
        ("triggered_by", False),
    ],
)
def test_causal_direction_runs_from_cause_to_effect(relation: str, forward: bool) -> None:
    assert edge_type(relation) is EdgeType.CAUSAL
    assert cause_first(relation) is forward
