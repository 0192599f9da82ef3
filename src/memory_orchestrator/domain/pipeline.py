"""The read pipeline: plan -> retrieve -> expand -> rank -> dedup, with a trace of every step.

Backend failures never escape from here: a failing channel or expansion becomes a warning in the
result and the trace, and whatever was found is still ranked and returned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from memory_orchestrator.domain.as_of import drop_future_superseders
from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.dedup import deduplicate
from memory_orchestrator.domain.list_questions import is_list_question
from memory_orchestrator.domain.planner import content_terms
from memory_orchestrator.domain.planner import plan as make_plan
from memory_orchestrator.domain.ranking import RankedItem, RankingContext, rank
from memory_orchestrator.domain.requests import PlanOverrides
from memory_orchestrator.domain.results import QueryPlan, ResultItem
from memory_orchestrator.domain.retrieval import RetrievalOutcome, retrieve, retrieve_recent, with_window
from memory_orchestrator.domain.trace import Trace
from memory_orchestrator.domain.traversal import expand, relative_edge_weights
from memory_orchestrator.domain.word_forms import with_base_forms
from memory_orchestrator.ports import Filters, MemoryBackend, RetrievalChannel, Scorer, TimeRange

#: How the plan's intent cues name a time phrase read from the question.
TIME_CUE = "time: "
#: A window read from a question with more content words than this is soft (see filtering_window):
#: "Atlas decisions last week" asks for last week only; a question with more to match on may be
#: answered by a memory written after the event.
SOFT_WINDOW_TERMS = 2
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
SUMMARY_CHARS = 160


@dataclass(frozen=True, slots=True)
class PipelineInput:
    """One read request as the pipeline sees it."""

    query: str
    now: datetime
    keep: int
    task: str = ""
    conversation: str = ""
    filters: Filters = Filters()
    expand: bool = True
    overrides: PlanOverrides = field(default_factory=PlanOverrides)


@dataclass(slots=True)
class PipelineRun:
    """The plan, the ranked items (best first, chronological for episodic) and the warnings."""

    plan: QueryPlan
    items: list[ResultItem]
    warnings: list[str] = field(default_factory=list)


async def run_pipeline(
    backend: MemoryBackend,
    request: PipelineInput,
    *,
    config: PipelineConfig,
    scorers: Sequence[Scorer],
    known_entities: Sequence[str],
    trace: Trace,
    channels: Sequence[RetrievalChannel] = (),
) -> PipelineRun:
    """Answer ``request`` over ``backend`` (see the module docstring)."""
    with trace.timed("plan"):
        plan = _plan(request, config, known_entities)
        trace.set_plan(plan)
    with trace.timed("retrieval"):
        found = await _retrieve(backend, plan, request, config, trace, channels)
    pool = {candidate.memory_id: candidate for candidate in found.candidates}
    if plan.strategy == "expanded" and plan.hops > 0 and pool:
        with trace.timed("expansion"):
            await _expand(backend, plan, found.candidates, pool, request, config, trace)
    with trace.timed("ranking"):
        warning = await drop_future_superseders(backend, pool.values(), request.now, config.stage_timeout_s)
        if warning:
            trace.warn(warning)
        ranked = _rank(list(pool.values()), plan, request, found, config, scorers, trace)
        if filtering_window(plan, request) is None:
            _note_outside_window(plan.time_window, ranked, trace)
    with trace.timed("dedup"):
        window = max(3 * request.keep, 30)
        outcome = deduplicate(ranked[:window], config)
        for memory_id, reason in outcome.drops:
            trace.drop(memory_id, reason, "dedup")
        trace.record("dedup", stale=outcome.stale, kept=len(outcome.kept))
        if len(outcome.drops) > len(outcome.kept):
            trace.warn(f"{len(outcome.drops)} duplicate memories merged; the store holds many repeats")
    kept = outcome.kept[: request.keep]
    for item in outcome.kept[request.keep :]:
        trace.drop(item.record.id, f"below top {request.keep}", "ranking")
    items = [result_item(item) for item in kept]
    if plan.strategy == "episodic":
        items.sort(key=lambda item: (item.created_at, item.memory_id))
    trace.result_ids = [item.memory_id for item in items]
    return PipelineRun(plan, items, list(trace.warnings))


def _note_outside_window(window: TimeRange | None, ranked: list[RankedItem], trace: Trace) -> None:
    # a soft window (see filtering_window) that nothing falls in: say so rather than silently
    if window is not None and ranked and not any(window.contains(item.record.created_at) for item in ranked):
        trace.warn("no memory in the time window read from the query matches; showing results from any time")


def _plan(request: PipelineInput, config: PipelineConfig, known_entities: Sequence[str]) -> QueryPlan:
    plan = make_plan(
        request.query,
        now=request.now,
        task=request.task,
        conversation=request.conversation,
        filters=request.filters,
        known_entities=known_entities,
        overrides=request.overrides,
        max_hops=config.expansion.hops,
    )
    if not request.expand and plan.strategy == "expanded" and request.overrides.strategy is None:
        plan = replace(plan, strategy="direct", hops=0)
    return plan


def filtering_window(plan: QueryPlan, request: PipelineInput) -> TimeRange | None:
    """The time window that filters memories: the caller's own, or one read from a question that has
    little else to match on ("what happened last week?", "what did we decide yesterday?").

    A window read from a question with several content words is a soft signal (ranking's ``time``
    signal), not a filter: "what did John attend with his colleagues in March?" is often answered by
    a memory written in April ("we went to a convention last month"), since the moment a memory is
    written is not the moment of the event it tells.
    """
    if _callers_window(request) or plan.strategy == "episodic" or window_led(plan, request):
        return plan.time_window
    return None


def _callers_window(request: PipelineInput) -> bool:
    return request.filters.time_range is not None or request.overrides.time_window is not None


def window_led(plan: QueryPlan, request: PipelineInput) -> bool:
    """True for a question that is mostly its time window ("what did we decide in February?"):
    read from the text, with at most ``SOFT_WINDOW_TERMS`` other content words."""
    return (
        not _callers_window(request)
        and plan.time_window is not None
        and plan.strategy != "episodic"
        and len(_words_beside_time(plan)) <= SOFT_WINDOW_TERMS
    )


def _words_beside_time(plan: QueryPlan) -> tuple[str, ...]:
    # the content words of the question once its time phrases ("the last two weeks") are taken out
    text = plan.canonical
    for cue in plan.intent_cues:
        if cue.startswith(TIME_CUE):
            text = text.replace(cue[len(TIME_CUE) :], " ")
    return content_terms(text)


async def _retrieve(
    backend: MemoryBackend,
    plan: QueryPlan,
    request: PipelineInput,
    config: PipelineConfig,
    trace: Trace,
    channels: Sequence[RetrievalChannel],
) -> RetrievalOutcome:
    filters = with_window(request.filters, filtering_window(plan, request))
    found = await _retrieve_once(backend, plan, filters, request, config, channels)
    if not found.candidates and found.channels_failed < found.channels_run:
        found = await _fallbacks(backend, plan, filters, request, config, trace, channels) or found
    for warning in found.warnings:
        trace.warn(warning)
    if found.channels_run and found.channels_failed == found.channels_run:
        trace.warn(f"backend {backend.name} unavailable: every retrieval channel failed")
    for memory_id, reason in found.filtered:
        trace.drop(memory_id, reason, "retrieval")
    trace.record(
        "retrieval",
        lists={key: [{"id": i, "score": round(s, 6)} for i, s in hits] for key, hits in found.lists.items()},
        fused=trace.listed(
            found.candidates, lambda c: {"id": c.memory_id, "relevance": round(c.relevance, 6)}
        ),
    )
    return found


async def _fallbacks(
    backend: MemoryBackend,
    plan: QueryPlan,
    filters: Filters,
    request: PipelineInput,
    config: PipelineConfig,
    trace: Trace,
    channels: Sequence[RetrievalChannel],
) -> RetrievalOutcome | None:
    """When nothing matched: the window's own memories, then any time (for an inferred window)."""
    windowed = filtering_window(plan, request) is not None
    if windowed and plan.strategy != "episodic":
        recent = await retrieve_recent(
            backend, filters=filters, now=request.now, limit=request.keep, config=config
        )
        if recent.candidates:
            trace.warn("no memory in the time window matches the query words; showing the window's memories")
            return recent
    if windowed and request.overrides.time_window is None:
        # The window was read from the text and may be wrong; an empty answer helps nobody.
        trace.warn("no memories in the time window read from the query; showing results from any time")
        found = await _retrieve_once(backend, plan, request.filters, request, config, channels)
        if found.candidates:
            return found
    return await _base_form_fallback(backend, plan, filters, request, config, trace, channels)


async def _base_form_fallback(
    backend: MemoryBackend,
    plan: QueryPlan,
    filters: Filters,
    request: PipelineInput,
    config: PipelineConfig,
    trace: Trace,
    channels: Sequence[RetrievalChannel],
) -> RetrievalOutcome | None:
    """The question's words with their base forms ("babysitters": "babysit"), see ``word_forms``."""
    relaxed = with_base_forms(plan.canonical)
    if plan.strategy == "episodic" or relaxed == plan.canonical:
        return None
    found = await _retrieve_once(
        backend, replace(plan, subqueries=(relaxed,)), filters, request, config, channels
    )
    if not found.candidates:
        return None
    trace.warn(f"no memory matches the question's words; searched their base forms too: {relaxed!r}")
    return found


async def _retrieve_once(
    backend: MemoryBackend,
    plan: QueryPlan,
    filters: Filters,
    request: PipelineInput,
    config: PipelineConfig,
    channels: Sequence[RetrievalChannel],
) -> RetrievalOutcome:
    if plan.strategy == "episodic":
        return await retrieve_recent(
            backend, filters=filters, now=request.now, limit=request.keep, config=config
        )
    subqueries = plan.subqueries or (plan.canonical,)
    return await retrieve(
        backend,
        subqueries,
        intent=plan.intent,
        filters=filters,
        now=request.now,
        config=config,
        extra=channels,
        window_list=filters.time_range is not None and window_led(plan, request),
    )


async def _expand(
    backend: MemoryBackend,
    plan: QueryPlan,
    seeds: list[Candidate],
    pool: dict[str, Candidate],
    request: PipelineInput,
    config: PipelineConfig,
    trace: Trace,
) -> None:
    if not backend.capabilities.neighbors:
        trace.warn(f"backend {backend.name} cannot list neighbours; no graph expansion")
        return
    weights = relative_edge_weights(config.edge_weights, plan.intent, config.allowed_edge_types)
    filters = with_window(request.filters, filtering_window(plan, request))
    outcome = await expand(
        backend,
        seeds,
        pool,
        weights=weights,
        hops=plan.hops,
        filters=filters,
        now=request.now,
        config=config,
        intent=plan.intent,
    )
    for warning in outcome.warnings:
        trace.warn(warning)
    for memory_id, reason in outcome.dropped:
        trace.drop(memory_id, reason, "expansion")
    trace.record(
        "expansion",
        edge_weights={kind.value: round(weight, 4) for kind, weight in weights.items()},
        neighbor_calls=outcome.neighbor_calls,
        decisions=outcome.decisions,
        added=trace.listed(outcome.added, _added_entry),
    )


def _added_entry(candidate: Candidate) -> dict[str, Any]:
    return {
        "id": candidate.memory_id,
        "inherited": round(candidate.inherited, 6),
        "seed": candidate.seed_id,
        "path": [step.to_dict() for step in candidate.path],
    }


def _rank(
    candidates: list[Candidate],
    plan: QueryPlan,
    request: PipelineInput,
    found: RetrievalOutcome,
    config: PipelineConfig,
    scorers: Sequence[Scorer],
    trace: Trace,
) -> list[RankedItem]:
    context = RankingContext(
        query=plan.canonical,
        intent=plan.intent,
        entities=plan.entities,
        now=request.now,
        strategy=plan.strategy,
        time_window=plan.time_window,
        task=request.task,
        total_lists=max(1, len(found.lists)),
        several=is_list_question(plan.intent_cues),
    )
    ranked, warnings = rank(candidates, context, config, scorers)
    for warning in warnings:
        trace.warn(warning)
    kept = [item for item in ranked if item.score >= config.min_score]
    for item in ranked:
        if item.score < config.min_score:
            trace.drop(item.record.id, f"below threshold: score {item.score:.3f}", "ranking")
    trace.record(
        "ranking",
        superseded=[item.record.id for item in kept if item.superseded],
        items=trace.listed(
            kept,
            lambda item: {"id": item.record.id, "score": round(item.score, 6), "signals": dict(item.signals)},
        ),
    )
    return kept


def result_item(item: RankedItem) -> ResultItem:
    """The public form of a ranked item."""
    record, candidate = item.record, item.candidate
    channels = sorted(candidate.channels) + (["graph"] if candidate.path else [])
    entities = list(dict.fromkeys([*record.entities, *item.absorbed_entities]))
    return ResultItem(
        memory_id=record.id,
        content=record.content,
        summary=first_sentence(record.content),
        score=round(item.score, 6),
        signals=item.signals,
        reasons=tuple(item.reasons),
        entities=tuple(entities),
        category=record.category,
        source=record.source,
        created_at=record.created_at,
        channels=tuple(channels),
        path=candidate.path,
        absorbed_ids=tuple(item.absorbed_ids),
        superseded=item.superseded,
        superseded_by=tuple(dict.fromkeys(item.superseded_by)),
    )


def first_sentence(text: str) -> str:
    """The first sentence of ``text``, at most ``SUMMARY_CHARS`` characters."""
    sentence = _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
    return sentence if len(sentence) <= SUMMARY_CHARS else sentence[: SUMMARY_CHARS - 1].rstrip() + "…"
