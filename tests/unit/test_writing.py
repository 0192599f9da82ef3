"""Write-path decisions: duplicates, contradictions and link proposals (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_orchestrator.domain.writing import contradiction_candidates, find_duplicate, link_proposals
from memory_orchestrator.ports import EdgeType, MemoryRecord, NewMemory

AT = datetime(2026, 3, 1, tzinfo=UTC)


def record(memory_id: str, content: str, entities: tuple[str, ...] = ()) -> MemoryRecord:
    return MemoryRecord(memory_id, content, AT, AT, entities=entities)


EXISTING = [
    record("m1", "Atlas uses Postgres for storage", ("Atlas", "Postgres")),
    record("m2", "The Atlas budget is 40000 euros", ("Atlas",)),
    record("m3", "Vendor X ships sensors from Lyon", ("Vendor X",)),
]


def test_exact_duplicate_wins_over_near_duplicates() -> None:
    found = find_duplicate(NewMemory("atlas uses  POSTGRES for storage"), EXISTING, 0.85)
    assert found is not None and found.exact and found.record.id == "m1"


def test_near_duplicate_at_the_threshold() -> None:
    found = find_duplicate(NewMemory("Atlas uses Postgres for storage!"), EXISTING, 0.85)
    assert found is not None and found.record.id == "m1"
    assert find_duplicate(NewMemory("Atlas uses Postgres for analytics storage now"), EXISTING, 0.85) is None


def test_negation_on_the_same_entity_is_a_supersedes_candidate() -> None:
    candidates = contradiction_candidates(
        NewMemory("Atlas no longer uses Postgres for storage", entities=("Atlas",)), EXISTING
    )
    assert [(c.id, c.edge_type) for c in candidates] == [("m1", EdgeType.SUPERSEDES)]
    assert candidates[0].reason.startswith("may contradict: negation")


def test_changed_value_is_a_supersedes_candidate() -> None:
    candidates = contradiction_candidates(
        NewMemory("The Atlas budget is 55000 euros", entities=("Atlas",)), EXISTING
    )
    assert [c.id for c in candidates] == ["m2"]
    assert "changed value" in candidates[0].reason


def test_unrelated_memory_contradicts_nothing() -> None:
    assert contradiction_candidates(NewMemory("Lunch is at noon on Friday"), EXISTING) == []


def test_link_proposals_rank_similar_content_and_shared_entities() -> None:
    proposals = link_proposals(
        NewMemory("Atlas storage migration planned", entities=("Atlas",)), EXISTING, set()
    )
    assert proposals[0].id == "m1"
    assert {p.id for p in proposals} == {"m1", "m2"}
    assert all(p.id != "m3" for p in proposals)
    assert link_proposals(NewMemory("Atlas storage", entities=("Atlas",)), EXISTING, {"m1", "m2"}) == []
