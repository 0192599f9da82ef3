"""Ids and reconciliation of the mcp_kg sidecar with the server's graph (pure, no server)."""

from __future__ import annotations

from datetime import UTC, datetime

from memory_orchestrator.adapters.mcp_kg.graph import Entity, Graph, memory_id
from memory_orchestrator.adapters.mcp_kg.ledger import allocate, reconcile
from memory_orchestrator.adapters.mcp_kg.sidecar import Row
from memory_orchestrator.adapters.mcp_kg.snapshot import NOTES_TYPE, build
from memory_orchestrator.ports import ChangeKind, Edge, EdgeType

NOW = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def test_a_used_id_moves_the_observation_to_its_next_generation() -> None:
    used: set[str] = set()
    first = allocate("Ada", "likes tea", used)
    second = allocate("Ada", "likes tea", used)
    assert first == memory_id("Ada", "likes tea")
    assert second == memory_id("Ada", "likes tea\0" + "1")
    assert used == {first, second}
    assert allocate("Ada", "likes tea", {first}) == second  # the same answer after a restart


def test_reconcile_adopts_new_observations_and_forgets_vanished_ones() -> None:
    graph = Graph((Entity("Ada", "person", ("likes tea", "leads Atlas")),), ())
    kept = Row(memory_id("Ada", "likes tea"), "Ada", "likes tea", NOW, NOW)
    gone = Row(memory_id("Bob", "left"), "Bob", "left", NOW, NOW)
    forgotten = Row(memory_id("Ada", "leads Atlas"), "Ada", "leads Atlas", NOW, NOW, forgotten_at=NOW)
    pending = reconcile(graph, [kept, gone, forgotten], NOW)
    [adopted] = pending.adopted
    # "leads Atlas" was forgotten once, so the observation seen again is a new memory
    assert adopted.id == memory_id("Ada", "leads Atlas\0" + "1") and adopted.adopted
    assert pending.forgotten == [(gone.id, NOW)]
    assert [(c.kind, c.memory_id) for c in pending.changes] == [
        (ChangeKind.ADDED, adopted.id),
        (ChangeKind.FORGOTTEN, gone.id),
    ]
    assert not reconcile(graph, [kept, adopted], NOW)


def test_adopted_observations_carry_their_entity_and_type_and_notes_holders_no_entity() -> None:
    graph = Graph((Entity("Ada", "person", ("likes tea",)), Entity("notes/ops", NOTES_TYPE, ("x",))), ())
    rows = reconcile(graph, [], NOW).adopted
    other = Row("kg-mine", "Ada", "leads Atlas", NOW, NOW, tags=("team",), entities=("Ada", "Atlas"))
    snap = build(graph, [*rows, other], [Edge(rows[0].id, "kg-mine", EdgeType.SUPERSEDES)])
    tea, note = (snap.records[row.id] for row in rows)
    assert (tea.entities, tea.tags) == (("Ada",), ("person",))
    assert (note.entities, note.tags) == ((), (NOTES_TYPE,))
    assert (snap.records["kg-mine"].entities, snap.records["kg-mine"].tags) == (("Ada", "Atlas"), ("team",))
    assert snap.records["kg-mine"].superseded_by == (tea.id,)
    # same-entity edges join observations of Ada, never those of a notes holder
    assert {edge.target for edge in snap.edges_of(tea.id, {EdgeType.ENTITY})} == {"kg-mine"}
    assert list(snap.edges_of(note.id, {EdgeType.ENTITY})) == []
