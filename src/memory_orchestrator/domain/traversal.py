"""Graph expansion: an intent-weighted beam search over ``backend.neighbors()``.

Each hop makes ONE ``neighbors()`` call for the whole frontier. A neighbour inherits a decayed share
of its parent's relevance: ``parent share * relative intent weight of the edge type * edge weight *
hop_decay``, further divided among siblings (the j-th strongest neighbour of a node gets
``1 / (1 + sibling_decay * j)``). So expansion adds the neighbours of strong hits with a score below
their seed's, never a weak memory on its own lexical merit. A hub guard keeps at most ``max_fanout``
neighbours per node and records what was cut; hops, beam width and a visit cap bound the walk, and
the stage timeout stops it with what was found so far. A store that ranks hops (``RankedNeighbors``)
never returns neighbours too weak to pass for their parent at their rank (``_floors``): they cannot
change the walk, and their drops are not recorded.

A walk that seeks causes (a WHY question) reads causal edges by their direction: a step from an
effect to its cause (the edge's source) passes the parent's share times the edge's weight, with no hop
or sibling decay, because the causes of what the question matched are the answer, however many there
are and however far up the chain (edge weights still fade a long chain). Steps to consequences, and
every other edge type, decay as above. A replaced hit brings its replacement into the walk (the
change a "why did we change X?" question is about), and past the hop budget the walk follows causes
only, for as many hops again, so a question matching the last consequence reaches the first cause.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import ExpansionLimits, PipelineConfig
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.domain.results import PathStep
from memory_orchestrator.domain.retrieval import exclusion, native_filters
from memory_orchestrator.ports import (
    Edge,
    EdgeType,
    Filters,
    Intent,
    MemoryBackend,
    Neighbor,
    NeighborFloors,
    RankedNeighbors,
    edge_strength,
)

#: Intents whose answer lies upstream of a hit: the walk follows causal edges to causes undecayed.
CAUSE_SEEKING: frozenset[Intent] = frozenset({Intent.WHY})


@dataclass(slots=True)
class ExpansionOutcome:
    """What the walk reached, and every decision it took (for the trace)."""

    #: Candidates first reached by expansion (memories already in the pool are updated in place).
    added: list[Candidate] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    #: ``(memory id, reason)`` for neighbours left out (hub guard, filters, below threshold).
    dropped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    neighbor_calls: int = 0


@dataclass(slots=True)
class _State:
    # One way of reaching a memory: the walk's own path, not the candidate's best one so far.
    candidate: Candidate
    share: float
    proximity: float = 1.0
    seed_id: str = ""
    path: tuple[PathStep, ...] = ()
    #: Reached by a step from an effect to its cause (or a replaced memory to its replacement).
    to_cause: bool = False


def relative_edge_weights(
    edge_weights: Mapping[Intent, Mapping[EdgeType, float]],
    intent: Intent,
    allowed: Collection[EdgeType],
    requested: Collection[EdgeType] | None = None,
) -> dict[EdgeType, float]:
    """The intent's weight of each followed edge type divided by its strongest (0 types are dropped)."""
    row = edge_weights.get(intent, {})
    followed = {
        kind: weight
        for kind, weight in row.items()
        if weight > 0 and kind in allowed and (requested is None or kind in requested)
    }
    strongest = max(followed.values(), default=0.0)
    return {kind: weight / strongest for kind, weight in followed.items()} if strongest > 0 else {}


async def expand(
    backend: MemoryBackend,
    seeds: Sequence[Candidate],
    pool: dict[str, Candidate],
    *,
    weights: Mapping[EdgeType, float],
    hops: int,
    filters: Filters,
    now: datetime,
    config: PipelineConfig,
    intent: Intent = Intent.GENERAL,
) -> ExpansionOutcome:
    """Walk ``hops`` hops from ``seeds`` (best first); new memories are added to ``pool``.

    ``intent`` decides how causal edges are read (see the module docstring: WHY walks to causes).
    """
    outcome = ExpansionOutcome()
    limits = config.expansion
    bar = limits.min_seed_relevance * _current_share(seeds)
    beam = [
        _State(seed, seed.relevance, seed_id=seed.memory_id)
        for seed in seeds
        if seed.relevance >= bar and seed.relevance > 0
    ][: limits.beam_width]
    if not beam or hops <= 0 or not weights:
        return outcome
    # Only the walk's own nodes are visited: a direct hit reached over an edge (an explicit cause of a
    # strong match, say) is walked on from, so what lies behind it is reached too.
    visited = {state.candidate.memory_id for state in beam}
    deadline = time.monotonic() + config.stage_timeout_s
    native = native_filters(filters, backend.capabilities)
    step = _Step(weights, filters, now, config, intent in CAUSE_SEEKING)
    walk = _Walk(backend, pool, visited, native, deadline, outcome)
    beam = await walk.hops(beam, step, range(1, hops + 1))
    if step.to_causes:
        # Past the hop budget a chain of causes is followed on, over causal edges to causes only
        # (for as many hops again): "why was the insurance cancelled?" matches the last link of
        # cause -> decision -> sale -> cancellation. Shares fade with the edge weights.
        causes = [state for state in beam if state.to_cause]
        chain = replace(step, weights={EdgeType.CAUSAL: 1.0}, causes_only=True)
        await walk.hops(causes, chain, range(hops + 1, 2 * hops + 1))
    return outcome


@dataclass(slots=True)
class _Walk:
    # The state one walk keeps across its hops.
    backend: MemoryBackend
    pool: dict[str, Candidate]
    visited: set[str]
    native: Filters
    deadline: float
    outcome: ExpansionOutcome

    async def hops(self, beam: list[_State], step: _Step, numbers: range) -> list[_State]:
        """Walk the hops ``numbers`` from ``beam``; the beam left (empty when the walk stopped)."""
        limits = step.config.expansion
        for hop in numbers:
            if not beam or len(self.visited) >= limits.max_visited:
                return []
            replacements: dict[str, list[str]] = {}
            if step.to_causes and not step.causes_only:
                when = (self.deadline, hop)
                beam += await _replacements(
                    self.backend, beam, self.pool, step, self.visited, self.outcome, when, replacements
                )
            # each parent's share as _extend reads it (a memory twice in the beam: its last state)
            shares = {state.candidate.memory_id: state.share for state in beam}
            walk = (self.native, self.deadline, self.outcome)
            neighbours = await _one_hop(self.backend, shares, step, *walk, hop)
            if neighbours is None:
                return []
            reached = _extend(beam, neighbours, self.pool, step, self.outcome, hop)
            if replacements:
                self.outcome.decisions[-1]["replaced_by"] = replacements
            beam = sorted(reached, key=lambda state: (-state.share, state.candidate.memory_id))
            beam = [state for state in beam if state.candidate.memory_id not in self.visited][
                : limits.beam_width
            ]
            self.visited.update(state.candidate.memory_id for state in reached)
        return beam


def _current_share(seeds: Sequence[Candidate]) -> float:
    # The seed bar scales with the best hit that is still current: a superseded memory that happens
    # to match best (stemming makes that likelier) must not keep the current decision from seeding.
    best = max((seed.relevance for seed in seeds), default=0.0)
    current = max((seed.relevance for seed in seeds if not seed.record.superseded_by), default=best)
    return current / best if best > 0 else 1.0


async def _one_hop(
    backend: MemoryBackend,
    shares: Mapping[str, float],
    step: _Step,
    native: Filters,
    deadline: float,
    outcome: ExpansionOutcome,
    hop: int,
) -> list[Neighbor] | None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        outcome.warnings.append(f"expansion stopped before hop {hop}: stage time limit reached")
        return None
    weights, limits = step.weights, step.config.expansion
    frontier = list(shares)
    limit = min(limits.max_visited, max(1, len(frontier) * limits.max_fanout * len(weights)))
    outcome.neighbor_calls += 1
    # A walk to causes ranks a step to a cause above its edge strength (no hop decay), which neither
    # the store's ranking by strength nor a hop cut at the strongest ``limit`` edges knows: such a walk
    # reads up to its whole visiting budget of neighbours and ranks them here.
    ranked = backend.capabilities.ranked_neighbors and not step.to_causes
    if step.to_causes:
        limit = limits.max_visited
    if ranked and isinstance(backend, RankedNeighbors):
        # The store ranks, caps and floors the hop: per origin the hub guard's share plus the few
        # memories of the walk's own path (skipped below, so they must not take a slot), and no
        # edge too weak for even a full-share parent to pass the path-score floor; where it can, no
        # edge too weak for its own parent at its rank either (_floors).
        floors = _floors(shares, limits, hop) if backend.capabilities.neighbor_floors else None
        call = backend.strongest_neighbors(
            frontier,
            weights=weights,
            per_source=limits.max_fanout + hop,
            min_strength=limits.min_path_score / limits.hop_decay if limits.hop_decay > 0 else 0.0,
            limit=limit,
            filters=native,
            **({} if floors is None else {"floors": floors}),
        )
    else:
        call = backend.neighbors(frontier, edge_types=tuple(weights), hops=1, limit=limit, filters=native)
    try:
        return await within(call, remaining)
    except Exception as exc:  # expansion failure degrades to the direct results
        kind = "timed out" if isinstance(exc, TimeoutError) else f"failed ({type(exc).__name__})"
        outcome.warnings.append(f"expansion hop {hop} {kind}; results without further expansion")
        return None


def _floors(shares: Mapping[str, float], limits: ExpansionLimits, hop: int) -> NeighborFloors | None:
    """What a ranked hop's neighbours need for ``_reach`` to keep them: a neighbour of parent ``p``
    at rank ``r`` among its siblings passes only if ``share(p) * strength * hop_decay / (1 +
    sibling_decay * r) >= min_path_score``. Its rank is at least its position among ``p``'s
    neighbours in the same order less the ``hop`` (slack) memories of ``p``'s own path that
    ``_extend`` skips, so the floor ``min_path_score / (hop_decay * share(p))`` grows with the
    position past the slack (lowered by a billionth: rounding never leaves out one that passes).
    What it leaves out sorts after every sibling that passes, so no rank and nothing the walk reaches
    changes (nor the order it meets the parents in: ``NeighborFloors`` keeps each origin's first
    entries); only the drops it would record for them."""
    if limits.hop_decay <= 0 or limits.sibling_decay < 0:
        return None
    need = limits.min_path_score * (1.0 - 1e-9) / limits.hop_decay
    base = {parent: need / share for parent, share in shares.items() if share > 0}
    return NeighborFloors(base, growth=limits.sibling_decay, slack=hop, scale=limits.hop_decay)


@dataclass(frozen=True, slots=True)
class _Step:
    # What every step of one walk is scored by.
    weights: Mapping[EdgeType, float]
    filters: Filters
    now: datetime
    config: PipelineConfig
    #: Steps from an effect to its cause keep the parent's share (times the edge weight): a WHY walk.
    to_causes: bool = False
    #: Only steps to causes are taken (a chain followed past the hop budget).
    causes_only: bool = False

    def strength(self, neighbour: Neighbor) -> float:
        """Intent weight of the edge type times the edge's own weight (a replacement: its weight)."""
        edge = neighbour.edge
        weight = self.weights.get(edge.type, 0.0)
        if edge.type is EdgeType.SUPERSEDES and self.upstream(neighbour):
            weight = 1.0  # the replacement stands for the replaced hit
        return edge_strength(weight, edge.weight)

    def upstream(self, neighbour: Neighbor) -> bool:
        """True, when the walk seeks causes, for a step from an effect to its cause or from a replaced
        memory to its replacement (both edges point at the memory the step starts from)."""
        edge = neighbour.edge
        followed = edge.type is EdgeType.CAUSAL or edge.type is EdgeType.SUPERSEDES
        return self.to_causes and followed and edge.source == neighbour.record.id

    def factor(self, strength: float, upstream: bool, rank: int) -> float:
        """Share of the parent's share a neighbour inherits: its ``strength``, undecayed for a step
        ``upstream`` (see ``upstream``), else decayed by the hop and its ``rank`` among its siblings."""
        if upstream:
            return strength
        limits = self.config.expansion
        return strength * limits.hop_decay / (1.0 + limits.sibling_decay * rank)


async def _replacements(
    backend: MemoryBackend,
    beam: list[_State],
    pool: dict[str, Candidate],
    step: _Step,
    visited: set[str],
    outcome: ExpansionOutcome,
    when: tuple[float, int],
    found: dict[str, list[str]],
) -> list[_State]:
    # A hit that was replaced stands for what replaced it: "why did we change X?" matches the old X,
    # and the change and its causes are the answer. The replacement joins this hop's frontier, so
    # its causes are reached in the same call. Read from the records (every backend reports
    # ``superseded_by``): one ``get``, only when the beam holds a replaced memory.
    deadline, hop = when
    replaced = {state.candidate.memory_id: state for state in beam if state.candidate.record.superseded_by}
    wanted = [
        new
        for state in replaced.values()
        for new in state.candidate.record.superseded_by
        if new not in visited and new not in replaced
    ]
    remaining = deadline - time.monotonic()
    if not wanted or remaining <= 0:
        return []
    try:
        records = await within(backend.get(list(dict.fromkeys(wanted))), remaining)
    except Exception as exc:  # the walk goes on without them
        outcome.warnings.append(f"replacements at hop {hop} could not be read ({type(exc).__name__})")
        return []
    states: dict[str, _State] = {}
    for record in records:
        for old, parent in replaced.items():
            if record.id not in parent.candidate.record.superseded_by:
                continue
            neighbour = Neighbor(record, Edge(record.id, old, EdgeType.SUPERSEDES, 1.0), old, hop)
            upstream = step.upstream(neighbour)
            factor = step.factor(step.strength(neighbour), upstream, 0)
            state = _reach(parent, neighbour, factor, upstream, pool, step, outcome)
            if state is not None and (record.id not in states or state.share > states[record.id].share):
                states[record.id] = state
                found.setdefault(old, []).append(record.id)
    visited.update(states)
    return list(states.values())


def _extend(
    beam: list[_State],
    neighbours: list[Neighbor],
    pool: dict[str, Candidate],
    step: _Step,
    outcome: ExpansionOutcome,
    hop: int,
) -> list[_State]:
    limits = step.config.expansion
    parents = {state.candidate.memory_id: state for state in beam}
    # per parent, per memory: (its factor at rank 0, the neighbour, its strength, whether upstream),
    # each worked out once per neighbour
    by_parent: dict[str, dict[str, tuple[float, Neighbor, float, bool]]] = {}
    behind = {
        parent_id: {state.seed_id, *(item.from_id for item in state.path)}
        for parent_id, state in parents.items()
    }
    for neighbour in neighbours:
        # Walking back along the path that led here is not a discovery.
        if neighbour.from_id not in parents or neighbour.record.id in behind[neighbour.from_id]:
            continue
        upstream = step.upstream(neighbour)
        if step.causes_only and not upstream:
            continue
        group = by_parent.setdefault(neighbour.from_id, {})
        current = group.get(neighbour.record.id)
        # A memory linked by several edge types counts once, over its strongest one.
        strength = step.strength(neighbour)
        first = step.factor(strength, upstream, 0)
        if current is None or first > current[0]:
            group[neighbour.record.id] = (first, neighbour, strength, upstream)
    reached: dict[str, _State] = {}
    decision: dict[str, Any] = {"hop": hop, "frontier": list(parents), "reached": 0, "cut": {}}
    for parent_id, group in by_parent.items():
        # strongest first, ties by id
        ordered = sorted(group.values(), key=lambda entry: (-entry[0], entry[1].record.id))
        if len(ordered) > limits.max_fanout:
            cut = [entry[1].record.id for entry in ordered[limits.max_fanout :]]
            decision["cut"][parent_id] = cut
            outcome.dropped.extend(
                (memory_id, f"hub guard: fan-out of {parent_id} capped at {limits.max_fanout}")
                for memory_id in cut
            )
        siblings = 0
        for _, neighbour, strength, upstream in ordered[: limits.max_fanout]:
            # Causes do not count as siblings: every cause of an effect is part of the answer.
            rank = 0 if upstream else siblings
            siblings += 0 if upstream else 1
            factor = step.factor(strength, upstream, rank)
            state = _reach(parents[parent_id], neighbour, factor, upstream, pool, step, outcome)
            if state is None:
                continue
            previous = reached.get(neighbour.record.id)
            if previous is None or state.share > previous.share:
                reached[neighbour.record.id] = state
    decision["reached"] = len(reached)
    outcome.decisions.append(decision)
    return list(reached.values())


def _reach(
    parent: _State,
    neighbour: Neighbor,
    factor: float,
    upstream: bool,
    pool: dict[str, Candidate],
    step: _Step,
    outcome: ExpansionOutcome,
) -> _State | None:
    # ``factor``: of the parent's share (``_Step.factor``); ``upstream``: ``_Step.upstream``
    record = neighbour.record
    reason = exclusion(record, step.filters, step.now)
    if reason is not None:
        outcome.dropped.append((record.id, reason))
        return None
    share = parent.share * factor
    if share < step.config.expansion.min_path_score:
        outcome.dropped.append((record.id, f"below threshold: path score {share:.3f}"))
        return None
    path_step = PathStep(parent.candidate.memory_id, record.id, neighbour.edge.type, neighbour.edge.weight)
    state = _State(pool.get(record.id) or Candidate(record), share, parent.proximity * factor)
    state.seed_id, state.path = parent.seed_id, (*parent.path, path_step)
    state.to_cause = upstream
    candidate = state.candidate
    if record.id not in pool:
        pool[record.id] = candidate
        outcome.added.append(candidate)
    if share > candidate.inherited:
        candidate.inherited, candidate.proximity = share, state.proximity
        candidate.seed_id, candidate.path = state.seed_id, state.path
    return state
