"""Expansion: one neighbors() call per hop, intent weights, inherited shares, hub guard, paths, failures."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from linked_memories import linked_graph
from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import DEFAULT_EDGE_WEIGHTS, ExpansionLimits, PipelineConfig
from memory_orchestrator.domain.traversal import expand, relative_edge_weights
from memory_orchestrator.ports import EdgeType, Filters, Intent

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
CONFIG = PipelineConfig(stage_timeout_s=0.5)
ALLOWED = CONFIG.allowed_edge_types


async def graph(count: int, edges: list[tuple[int, int, EdgeType, float]]) -> InMemoryBackend:
    """Memories mem-000001.. (the first the newest), linked only by ``edges``."""
    return await linked_graph(count, edges, now=NOW, newest_first=True)


def seed(backend: InMemoryBackend, number: int, relevance: float = 1.0) -> Candidate:
    return Candidate(backend.records[f"mem-{number:06d}"], relevance=relevance, ranks={"keyword#0": 1})


def test_relative_weights_follow_the_intent_and_drop_supersedes() -> None:
    why = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.WHY, ALLOWED)
    assert why[EdgeType.CAUSAL] == 1.0
    assert why[EdgeType.TEMPORAL] == pytest.approx(0.2 / 0.7)
    assert EdgeType.SUPERSEDES not in why
    assert relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.WHY, ALLOWED, [EdgeType.ENTITY]) == {
        EdgeType.ENTITY: 1.0
    }


@pytest.mark.anyio
async def test_two_hop_causal_chain_with_paths_and_one_call_per_hop() -> None:
    backend = await graph(
        4, [(2, 1, EdgeType.CAUSAL, 1.0), (3, 2, EdgeType.CAUSAL, 1.0), (1, 4, EdgeType.TEMPORAL, 1.0)]
    )
    start = seed(backend, 1)
    pool = {start.memory_id: start}
    weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.WHY, ALLOWED)
    outcome = await expand(
        backend, [start], pool, weights=weights, hops=2, filters=Filters(), now=NOW, config=CONFIG
    )
    assert backend.called("neighbors") == outcome.neighbor_calls == 2
    two = pool["mem-000003"]
    assert [(step.from_id, step.to_id, step.edge_type) for step in two.path] == [
        ("mem-000001", "mem-000002", EdgeType.CAUSAL),
        ("mem-000002", "mem-000003", EdgeType.CAUSAL),
    ]
    assert two.seed_id == "mem-000001"
    one = pool["mem-000002"]
    assert one.inherited == pytest.approx(CONFIG.expansion.hop_decay)
    assert two.inherited == pytest.approx(one.inherited * CONFIG.expansion.hop_decay)
    # The temporal neighbour is reached with the WHY weight of temporal edges only.
    assert pool["mem-000004"].inherited < one.inherited


@pytest.mark.anyio
async def test_share_scales_with_seed_relevance_and_stays_below_it() -> None:
    backend = await graph(2, [(1, 2, EdgeType.TEMPORAL, 1.0)])
    start = seed(backend, 1, relevance=0.5)
    pool = {start.memory_id: start}
    weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.GENERAL, ALLOWED)
    await expand(backend, [start], pool, weights=weights, hops=1, filters=Filters(), now=NOW, config=CONFIG)
    assert pool["mem-000002"].inherited == pytest.approx(0.5 * CONFIG.expansion.hop_decay)


@pytest.mark.anyio
async def test_hub_guard_caps_fan_out_and_records_the_cut() -> None:
    backend = await graph(8, [(1, n, EdgeType.ENTITY, 1.0 - n / 100) for n in range(2, 9)])
    start = seed(backend, 1)
    pool = {start.memory_id: start}
    config = PipelineConfig(expansion=ExpansionLimits(max_fanout=3, min_path_score=0.0))
    weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.ENTITY, ALLOWED)
    outcome = await expand(
        backend, [start], pool, weights=weights, hops=1, filters=Filters(), now=NOW, config=config
    )
    assert sorted(c.memory_id for c in outcome.added) == ["mem-000002", "mem-000003", "mem-000004"]
    assert outcome.decisions[0]["cut"]["mem-000001"] == [
        "mem-000005",
        "mem-000006",
        "mem-000007",
        "mem-000008",
    ]
    assert all("hub guard" in reason for _, reason in outcome.dropped)
    # Siblings share the seed's relevance: the strongest neighbour inherits most.
    shares = [pool[f"mem-00000{n}"].inherited for n in (2, 3, 4)]
    assert shares == sorted(shares, reverse=True)


@pytest.mark.anyio
async def test_weak_seeds_do_not_start_a_walk() -> None:
    backend = await graph(2, [(1, 2, EdgeType.TEMPORAL, 1.0)])
    weak = seed(backend, 1, relevance=0.1)
    outcome = await expand(
        backend,
        [weak],
        {weak.memory_id: weak},
        weights={EdgeType.TEMPORAL: 1.0},
        hops=2,
        filters=Filters(),
        now=NOW,
        config=CONFIG,
    )
    assert outcome.added == [] and backend.called("neighbors") == 0


@pytest.mark.anyio
async def test_neighbours_outside_filters_or_after_now_are_dropped() -> None:
    backend = await graph(3, [(1, 2, EdgeType.TEMPORAL, 1.0), (1, 3, EdgeType.TEMPORAL, 1.0)])
    start = seed(backend, 1)
    pool = {start.memory_id: start}
    outcome = await expand(
        backend,
        [start],
        pool,
        weights={EdgeType.TEMPORAL: 1.0},
        hops=1,
        filters=Filters(sources=("s0", "s1")),
        now=NOW,
        config=CONFIG,
    )
    assert "mem-000002" in pool and "mem-000003" not in pool
    assert outcome.added and outcome.added[0].memory_id == "mem-000002"


@pytest.mark.anyio
async def test_failing_expansion_is_a_warning_not_an_error() -> None:
    backend = await graph(2, [(1, 2, EdgeType.TEMPORAL, 1.0)])
    backend.fail_always("neighbors")
    start = seed(backend, 1)
    outcome = await expand(
        backend,
        [start],
        {start.memory_id: start},
        weights={EdgeType.TEMPORAL: 1.0},
        hops=2,
        filters=Filters(),
        now=NOW,
        config=CONFIG,
    )
    assert outcome.added == []
    assert outcome.warnings == [
        "expansion hop 1 failed (BackendUnavailable); results without further expansion"
    ]


@pytest.mark.anyio
async def test_slow_expansion_stops_at_the_stage_time_limit() -> None:
    backend = await graph(2, [(1, 2, EdgeType.TEMPORAL, 1.0)])
    backend.delay("neighbors", 5.0)
    start = seed(backend, 1)
    outcome = await expand(
        backend,
        [start],
        {start.memory_id: start},
        weights={EdgeType.TEMPORAL: 1.0},
        hops=2,
        filters=Filters(),
        now=NOW,
        config=PipelineConfig(stage_timeout_s=0.05),
    )
    assert "timed out" in outcome.warnings[0]


@pytest.mark.anyio
async def test_a_superseded_best_hit_does_not_keep_the_current_one_from_seeding() -> None:
    backend = await graph(3, [(2, 3, EdgeType.CAUSAL, 1.0)])
    stale = seed(backend, 1)
    stale.record = replace(stale.record, superseded_by=("mem-000002",))
    current = seed(backend, 2, relevance=0.4)  # below 0.5 of the stale hit, the best of the current ones
    outcome = await expand(
        backend,
        [stale, current],
        {stale.memory_id: stale, current.memory_id: current},
        weights={EdgeType.CAUSAL: 1.0},
        hops=1,
        filters=Filters(),
        now=NOW,
        config=CONFIG,
    )
    assert [item.memory_id for item in outcome.added] == ["mem-000003"]


@pytest.mark.anyio
async def test_a_direct_hit_reached_over_an_edge_is_walked_on_from() -> None:
    # 1 (the decision) <- 2 (a weak keyword hit too) <- 3 (its cause, no word in common)
    backend = await graph(3, [(2, 1, EdgeType.CAUSAL, 1.0), (3, 2, EdgeType.CAUSAL, 1.0)])
    start, weak = seed(backend, 1), seed(backend, 2, relevance=0.2)
    pool = {start.memory_id: start, weak.memory_id: weak}
    weights = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.WHY, ALLOWED)
    await expand(
        backend, [start, weak], pool, weights=weights, hops=2, filters=Filters(), now=NOW, config=CONFIG
    )
    assert pool["mem-000002"].inherited == pytest.approx(CONFIG.expansion.hop_decay)
    cause = pool["mem-000003"]
    assert [step.to_id for step in cause.path] == ["mem-000002", "mem-000003"]
