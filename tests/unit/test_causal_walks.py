"""WHY walks: causal edges read by direction, causes undecayed, replaced hits lead to their replacement."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from linked_memories import linked_graph, mid
from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import DEFAULT_EDGE_WEIGHTS, PipelineConfig
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import ExpandRequest
from memory_orchestrator.domain.traversal import ExpansionOutcome, expand, relative_edge_weights
from memory_orchestrator.ports import EdgeType, Filters, FixedClock, Intent

NOW = datetime(2026, 3, 18, 12, tzinfo=UTC)
CONFIG = PipelineConfig(stage_timeout_s=0.5)
DECAY = CONFIG.expansion.hop_decay
WHY = relative_edge_weights(DEFAULT_EDGE_WEIGHTS, Intent.WHY, CONFIG.allowed_edge_types)


async def graph(count: int, edges: list[tuple[int, int, EdgeType, float]]) -> InMemoryBackend:
    """Memories 1..count (the first the oldest), linked only by ``edges``."""
    return await linked_graph(count, edges, now=NOW, newest_first=False)


async def expanded(
    backend: InMemoryBackend, seeds: list[Candidate], intent: Intent, hops: int = 2, now: datetime = NOW
) -> tuple[dict[str, Candidate], ExpansionOutcome]:
    """The pool after a walk from ``seeds`` with the WHY weights, and the walk's outcome."""
    pool = {candidate.memory_id: candidate for candidate in seeds}
    outcome = await expand(
        backend, seeds, pool, weights=WHY, hops=hops, filters=Filters(), now=now, config=CONFIG, intent=intent
    )
    return pool, outcome


async def walk(
    backend: InMemoryBackend, seeds: list[Candidate], intent: Intent, hops: int = 2
) -> dict[str, Candidate]:
    return (await expanded(backend, seeds, intent, hops))[0]


def seed(backend: InMemoryBackend, number: int, relevance: float = 1.0) -> Candidate:
    return Candidate(backend.records[mid(number)], relevance=relevance, ranks={"keyword#0": 1})


@pytest.mark.anyio
async def test_a_why_walk_passes_the_share_to_causes_and_decays_it_to_consequences() -> None:
    # 2 causes 1 (the hit), 1 causes 3
    backend = await graph(3, [(2, 1, EdgeType.CAUSAL, 0.8), (1, 3, EdgeType.CAUSAL, 0.8)])
    pool = await walk(backend, [seed(backend, 1, relevance=0.9)], Intent.WHY)
    assert pool[mid(2)].inherited == pytest.approx(0.9 * 0.8)
    assert pool[mid(3)].inherited < pool[mid(2)].inherited
    assert pool[mid(3)].inherited <= 0.9 * 0.8 * DECAY + 1e-9


@pytest.mark.anyio
async def test_other_intents_read_causal_edges_in_both_directions_alike() -> None:
    backend = await graph(3, [(2, 1, EdgeType.CAUSAL, 0.8), (1, 3, EdgeType.CAUSAL, 0.8)])
    pool = await walk(backend, [seed(backend, 1)], Intent.GENERAL)
    # The same edge weight either way: the two are siblings (ties broken by id), both decayed.
    assert sorted([pool[mid(2)].inherited, pool[mid(3)].inherited]) == pytest.approx(
        [0.8 * DECAY / (1 + CONFIG.expansion.sibling_decay), 0.8 * DECAY]
    )


@pytest.mark.anyio
async def test_every_cause_of_a_decision_keeps_its_full_share() -> None:
    # 2, 3 and 4 all cause the decision 1: none is a lesser sibling of the others
    edges = [(2, 1, EdgeType.CAUSAL, 0.9), (3, 1, EdgeType.CAUSAL, 0.8), (4, 1, EdgeType.CAUSAL, 0.7)]
    backend = await graph(4, edges)
    pool = await walk(backend, [seed(backend, 1)], Intent.WHY, hops=1)
    assert [pool[mid(n)].inherited for n in (2, 3, 4)] == pytest.approx([0.9, 0.8, 0.7])


@pytest.mark.anyio
async def test_a_chain_of_causes_fades_only_with_its_edge_weights() -> None:
    # 4 -> 3 -> 2 -> 1 (the hit): the root cause three hops up
    chain = [(4, 3, EdgeType.CAUSAL, 0.9), (3, 2, EdgeType.CAUSAL, 0.8), (2, 1, EdgeType.CAUSAL, 0.9)]
    backend = await graph(4, chain)
    pool = await walk(backend, [seed(backend, 1)], Intent.WHY, hops=3)
    root = pool[mid(4)]
    assert root.inherited == pytest.approx(0.9 * 0.8 * 0.9)
    assert [step.to_id for step in root.path] == [mid(2), mid(3), mid(4)]


@pytest.mark.anyio
async def test_a_replaced_hit_leads_a_why_walk_to_its_replacement_and_the_causes_of_that() -> None:
    # 1 (the old arrangement, the only hit) is replaced by 2, which 3 caused
    backend = await graph(3, [(2, 1, EdgeType.SUPERSEDES, 1.0), (3, 2, EdgeType.CAUSAL, 0.8)])
    old = seed(backend, 1)
    assert old.record.superseded_by == (mid(2),)
    pool = await walk(backend, [old], Intent.WHY)
    assert pool[mid(2)].inherited == pytest.approx(1.0)
    assert pool[mid(2)].path[0].edge_type is EdgeType.SUPERSEDES
    assert pool[mid(3)].inherited == pytest.approx(0.8)
    # Not followed by other intents (supersedes edges carry no relevance), nor from new to old.
    assert set(await walk(backend, [seed(backend, 1)], Intent.GENERAL)) == {mid(1)}
    assert mid(1) not in await walk(backend, [seed(backend, 2)], Intent.WHY)


@pytest.mark.anyio
async def test_a_replacement_written_after_now_is_not_reached() -> None:
    backend = await graph(2, [(2, 1, EdgeType.SUPERSEDES, 1.0)])
    before = backend.records[mid(2)].created_at - timedelta(days=1)
    pool, outcome = await expanded(backend, [seed(backend, 1)], Intent.WHY, hops=1, now=before)
    assert mid(2) not in pool
    assert any(memory_id == mid(2) for memory_id, _ in outcome.dropped)


@pytest.mark.anyio
async def test_an_unreadable_replacement_is_a_warning_and_the_walk_goes_on() -> None:
    backend = await graph(3, [(2, 1, EdgeType.SUPERSEDES, 1.0), (3, 1, EdgeType.CAUSAL, 0.8)])
    old = seed(backend, 1)
    old.record = replace(old.record, superseded_by=(mid(2),))

    async def broken(ids: object) -> list[object]:
        raise OSError("disk gone")

    backend.get = broken  # type: ignore[method-assign,assignment]
    pool, outcome = await expanded(backend, [old], Intent.WHY, hops=1)
    assert mid(3) in pool and mid(2) not in pool
    assert outcome.warnings == ["replacements at hop 1 could not be read (OSError)"]


@pytest.mark.anyio
async def test_the_expand_operation_walks_to_causes_by_the_requested_intent() -> None:
    # 2 causes 1, 1 causes 3; expanding from 1 ranks the cause first only for WHY
    backend = await graph(3, [(2, 1, EdgeType.CAUSAL, 0.8), (1, 3, EdgeType.CAUSAL, 0.8)])
    orchestrator = Orchestrator(backend, config=CONFIG, clock=FixedClock(NOW))
    why = await orchestrator.expand(ExpandRequest(seeds=(mid(1),), intent=Intent.WHY, hops=1))
    assert [item.memory_id for item in why.items] == [mid(2), mid(3)]
    assert why.items[0].signals["graph"] == pytest.approx(0.8)
    general = await orchestrator.expand(ExpandRequest(seeds=(mid(1),), intent=Intent.GENERAL, hops=1))
    assert max(item.signals["graph"] for item in general.items) == pytest.approx(0.8 * DECAY)


@pytest.mark.anyio
async def test_past_the_hop_budget_a_why_walk_follows_causes_only() -> None:
    # 5 -> 4 -> 3 -> 2 -> 1 (the hit: the last consequence); 6 is another consequence of 4
    # and 7 a temporal neighbour of 3
    chain = [(5, 4, EdgeType.CAUSAL, 0.9), (4, 3, EdgeType.CAUSAL, 0.9), (3, 2, EdgeType.CAUSAL, 0.9)]
    chain += [(2, 1, EdgeType.CAUSAL, 0.9), (4, 6, EdgeType.CAUSAL, 0.9), (3, 7, EdgeType.TEMPORAL, 1.0)]
    backend = await graph(7, chain)
    pool = await walk(backend, [seed(backend, 1)], Intent.WHY, hops=2)
    assert pool[mid(3)].inherited == pytest.approx(0.9**2)
    assert pool[mid(4)].inherited == pytest.approx(0.9**3)
    assert pool[mid(5)].inherited == pytest.approx(0.9**4)
    assert mid(6) not in pool and mid(7) not in pool
    # within the budget only, for other intents
    assert mid(4) not in await walk(backend, [seed(backend, 1)], Intent.GENERAL, hops=2)
