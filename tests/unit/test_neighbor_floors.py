"""NeighborFloors: per origin, entries below a floor that grows with their rank are left out, except
the origin's first entries in the hop's order; the order of what is kept never changes."""

from __future__ import annotations

from operator import itemgetter

from memory_orchestrator.ports import NeighborFloors

# (origin, reached memory, strength), in the order a hop returns them
Entry = tuple[str, str, float]
ORIGIN, REACHED, STRENGTH = itemgetter(0), itemgetter(1), itemgetter(2)


def keep(floors: NeighborFloors, entries: list[Entry]) -> list[Entry]:
    return floors.keep(entries, ORIGIN, REACHED, STRENGTH)


def test_an_origin_keeps_what_reaches_its_floor_at_each_rank() -> None:
    entries = [("a", "m1", 0.9), ("a", "m2", 0.5), ("a", "m3", 0.45), ("a", "m4", 0.2)]
    # position k needs 0.3 * (1 + k): 0.3, 0.6, 0.9, 1.2
    assert keep(NeighborFloors({"a": 0.3}, growth=1.0, slack=0), entries) == entries[:1]
    # position k needs 0.3 * (1 + max(0, k - 1)): 0.3, 0.3, 0.6, 0.9
    assert keep(NeighborFloors({"a": 0.3}, growth=1.0, slack=1), entries) == entries[:2]
    # 0.1, 0.1, 0.2, 0.3
    assert keep(NeighborFloors({"a": 0.1}, growth=1.0, slack=1), entries) == entries[:3]
    # no growth: one floor for every position
    assert keep(NeighborFloors({"a": 0.2}, slack=0), entries) == entries


def test_ranks_count_by_strength_and_id_not_by_the_hops_order() -> None:
    # returned by edge weight, say: the weakest first; its rank is still the last
    entries = [("a", "m3", 0.2), ("a", "m1", 0.9), ("a", "m2", 0.9)]
    floors = NeighborFloors({"a": 0.25}, growth=10.0, slack=1)
    # the first two returned are kept whatever they are; m2 ranks second (tie with m1, by id)
    assert keep(floors, entries) == entries
    floors = NeighborFloors({"a": 0.25}, growth=10.0, slack=0)
    assert keep(floors, entries) == [("a", "m3", 0.2), ("a", "m1", 0.9)]


def test_the_first_entries_of_each_origin_stay_so_the_walk_meets_origins_in_the_same_order() -> None:
    entries = [("b", "m9", 0.01), ("a", "m1", 0.9), ("b", "m8", 0.8), ("a", "m2", 0.01), ("b", "m7", 0.02)]
    floors = NeighborFloors({"a": 0.5, "b": 0.5}, slack=0)
    assert keep(floors, entries) == [("b", "m9", 0.01), ("a", "m1", 0.9), ("b", "m8", 0.8)]
    floors = NeighborFloors({"a": 0.5, "b": 0.5}, slack=1)
    assert keep(floors, entries) == [("b", "m9", 0.01), ("a", "m1", 0.9), ("b", "m8", 0.8), ("a", "m2", 0.01)]


def test_an_origin_without_a_floor_keeps_everything() -> None:
    entries = [("a", "m1", 0.01), ("a", "m2", 0.01), ("c", "m3", 0.01), ("c", "m4", 0.01)]
    assert keep(NeighborFloors({"c": 1.0}), entries) == entries[:3]
    assert keep(NeighborFloors({}), entries) == entries


def test_the_scale_decides_ties_as_the_walk_sees_them() -> None:
    # two strengths that differ, but not once scaled by 0.6 (as the walk orders a parent's
    # neighbours): then the id decides the rank, also here
    weaker, stronger = 0.4954, 0.49540000000000006
    assert weaker < stronger and weaker * 0.6 == stronger * 0.6
    entries = [("a", "m0", 0.9), ("a", "m9", 0.8), ("a", "m2", stronger), ("a", "m1", weaker)]
    # positions: m0, m9, m1 (the lower id: needs 0.3 * 1.5), m2 (needs 0.3 * 2): m2 is left out
    floors = NeighborFloors({"a": 0.3}, growth=0.5, slack=1, scale=0.6)
    assert keep(floors, entries) == [("a", "m0", 0.9), ("a", "m9", 0.8), ("a", "m1", weaker)]
    # unscaled, m2 ranks before m1, and m1 is left out instead
    unscaled = NeighborFloors({"a": 0.3}, growth=0.5, slack=1)
    assert keep(unscaled, entries) == [("a", "m0", 0.9), ("a", "m9", 0.8), ("a", "m2", stronger)]
