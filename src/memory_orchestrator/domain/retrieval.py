"""Multi-channel retrieval: every subquery on every channel in use, fused by RRF.

Channels follow the backend's capabilities and ``PipelineConfig.channel_weights``: ``keyword`` and
``recall`` (the backend's own ranking, with the planned intent when it takes one), plus any plugin
channel the configuration enables (a dense channel, say) on backends it supports. They run
concurrently, each under the stage timeout; a channel that fails or overruns becomes a warning and
the others still count. Filters go to the backend when it can apply them and are always re-applied
here, as is the "as of now" rule: a memory created after the question was asked is invisible.

Relevance mixes two views of the lists: reciprocal-rank fusion (agreement across lists, a share of
``RRF_SHARE``) and the best score a list gave relative to its own top hit (how strong the match is).
Pure RRF is flat at the top (1/61 vs 1/70), which would let weak matches tie strong ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.deadlines import within
from memory_orchestrator.ports import (
    Capabilities,
    Filters,
    Hit,
    Intent,
    MemoryBackend,
    MemoryRecord,
    RecallQuery,
    RetrievalChannel,
    TimeRange,
)

#: Fusion weight of a decomposed subquery relative to the whole question.
SUBQUERY_WEIGHT = 0.6
#: Fusion weight of the time window's own memories beside the query's lists (see ``retrieve``).
WINDOW_LIST_WEIGHT = 0.5
#: Share of reciprocal-rank fusion in relevance; the rest is the best list-relative channel score.
RRF_SHARE = 0.2


@dataclass(slots=True)
class RetrievalOutcome:
    """Fused candidates (best first) and everything the trace shows about how they were found."""

    candidates: list[Candidate] = field(default_factory=list)
    #: Each list as ``key -> [(memory id, channel score), ...]`` in channel order.
    lists: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    #: Memories a channel returned that the request's filters or "as of" moment exclude.
    filtered: list[tuple[str, str]] = field(default_factory=list)
    channels_failed: int = 0
    channels_run: int = 0


@dataclass(frozen=True, slots=True)
class _ListSpec:
    key: str
    channel: str
    subquery: int
    weight: float
    call: Callable[[], Awaitable[list[Hit]]]


async def retrieve(
    backend: MemoryBackend,
    subqueries: Sequence[str],
    *,
    intent: Intent,
    filters: Filters,
    now: datetime,
    config: PipelineConfig,
    extra: Sequence[RetrievalChannel] = (),
    window_list: bool = False,
) -> RetrievalOutcome:
    """Run every subquery on every channel concurrently and fuse the lists (see module docstring).

    ``window_list``: the question is mostly its time window ("what decisions were made in May?"),
    so the window's newest memories join as one more list (weight ``WINDOW_LIST_WEIGHT``): a
    decision that does not say "decision" is still an answer.
    """
    native = native_filters(filters, backend.capabilities)
    channels = channel_weights(backend.capabilities, config)
    specs = _list_specs(backend, subqueries, channels, intent, native, now, config)
    if window_list and channels:
        call = _recent_call(backend, config.candidates_per_channel, native, now)
        specs.append(_ListSpec("window#0", "window", 0, WINDOW_LIST_WEIGHT, call))
    skipped: list[str] = []
    specs.extend(_extra_specs(backend, subqueries, extra, native, now, config, skipped))
    outcome = RetrievalOutcome(channels_run=len(specs))
    outcome.warnings.extend(skipped)
    if not specs:
        outcome.warnings.append(f"backend {backend.name} offers no retrieval channel")
        return outcome
    results = await asyncio.gather(*(_run_list(spec, config.stage_timeout_s) for spec in specs))
    spare = spare_channels(backend.capabilities, channels)
    if spare and all(warning is not None for _, warning in results):
        # Every channel in use failed: the ones held back are better than nothing.
        outcome.warnings.extend(warning for _, warning in results if warning is not None)
        outcome.warnings.append(f"falling back to the {', '.join(spare)} channel")
        outcome.channels_failed = len(specs)
        specs = _list_specs(backend, subqueries, spare, intent, native, now, config)
        outcome.channels_run += len(specs)
        results = await asyncio.gather(*(_run_list(spec, config.stage_timeout_s) for spec in specs))
    kept: list[tuple[_ListSpec, list[Hit]]] = []
    for spec, (hits, warning) in zip(specs, results, strict=True):
        if warning is not None:
            outcome.warnings.append(warning)
            outcome.channels_failed += 1
            continue
        visible = _visible_hits(hits, filters, now, outcome)
        outcome.lists[spec.key] = [(hit.record.id, hit.score) for hit in visible]
        kept.append((spec, visible))
    outcome.candidates = fuse(kept, config.rrf_k)
    return outcome


async def retrieve_recent(
    backend: MemoryBackend, *, filters: Filters, now: datetime, limit: int, config: PipelineConfig
) -> RetrievalOutcome:
    """The episodic channel: the newest memories within the filters, as of ``now``."""
    outcome = RetrievalOutcome(channels_run=1)
    native = native_filters(filters, backend.capabilities)
    try:
        records = await within(backend.recent(limit=limit, filters=native, now=now), config.stage_timeout_s)
    except Exception as exc:  # any backend failure degrades to a warning on the read path
        outcome.warnings.append(_failure("recent", exc))
        outcome.channels_failed = 1
        return outcome
    visible = _visible_hits(_recency_hits(records), filters, now, outcome)
    outcome.lists["recent#0"] = [(hit.record.id, hit.score) for hit in visible]
    spec = _ListSpec("recent#0", "recent", 0, 1.0, _no_call)
    outcome.candidates = fuse([(spec, visible)], config.rrf_k)
    return outcome


def native_filters(filters: Filters, capabilities: Capabilities) -> Filters:
    """The part of ``filters`` the backend can apply itself (the domain re-applies all of it)."""
    return Filters(
        categories=filters.categories if capabilities.category_filters else (),
        sources=filters.sources if capabilities.source_filters else (),
        entities=filters.entities if capabilities.entity_filters else (),
        time_range=filters.time_range if capabilities.time_filters else None,
    )


def with_window(filters: Filters, window: TimeRange | None) -> Filters:
    """``filters`` restricted further to ``window`` (the intersection with any existing range)."""
    if window is None:
        return filters
    current = filters.time_range
    if current is None:
        return replace(filters, time_range=window)
    starts = [moment for moment in (current.start, window.start) if moment is not None]
    ends = [moment for moment in (current.end, window.end) if moment is not None]
    return replace(
        filters, time_range=TimeRange(max(starts) if starts else None, min(ends) if ends else None)
    )


def fuse(lists: Sequence[tuple[_ListSpec, list[Hit]]], rrf_k: int) -> list[Candidate]:
    """Weighted reciprocal-rank fusion plus relative channel strength; candidates best first."""
    pool: dict[str, Candidate] = {}
    strength: dict[str, float] = {}
    for spec, hits in lists:
        top = max((hit.score for hit in hits), default=0.0)
        for rank, hit in enumerate(hits, start=1):
            candidate = pool.get(hit.record.id)
            if candidate is None:
                candidate = pool[hit.record.id] = Candidate(hit.record)
            candidate.rrf += spec.weight / (rrf_k + rank)
            candidate.ranks.setdefault(spec.key, rank)
            candidate.channels.add(spec.channel)
            candidate.subqueries.add(spec.subquery)
            relative = hit.score / top if top > 0 else 1.0 / rank
            strength[hit.record.id] = max(strength.get(hit.record.id, 0.0), spec.weight * relative)
    best_rrf = max((candidate.rrf for candidate in pool.values()), default=0.0)
    best_strength = max(strength.values(), default=0.0)
    for memory_id, candidate in pool.items():
        share_rrf = candidate.rrf / best_rrf if best_rrf > 0 else 0.0
        share_strength = strength[memory_id] / best_strength if best_strength > 0 else 0.0
        candidate.relevance = RRF_SHARE * share_rrf + (1.0 - RRF_SHARE) * share_strength
    # The best candidate gets 1.0, so "relevance" reads the same whatever the lists were.
    best = max((candidate.relevance for candidate in pool.values()), default=0.0)
    for candidate in pool.values():
        candidate.relevance = candidate.relevance / best if best > 0 else 0.0
    return sorted(pool.values(), key=_fused_order)


def _fused_order(candidate: Candidate) -> tuple[float, str]:
    return (-candidate.relevance, candidate.memory_id)


def channel_weights(capabilities: Capabilities, config: PipelineConfig) -> dict[str, float]:
    """The channels to run and their fusion weights (see ``PipelineConfig.channel_weights``).

    A channel weighted 0 is skipped unless it is the only one the backend offers.
    """
    offered = {"keyword": capabilities.keyword_search, "recall": capabilities.native_recall}
    weights = {
        name: config.channel_weights.get(name, 0.0) for name, available in offered.items() if available
    }
    positive = {name: weight for name, weight in weights.items() if weight > 0}
    if positive:
        return positive
    return dict.fromkeys(weights, 1.0)


def spare_channels(capabilities: Capabilities, in_use: Mapping[str, float]) -> dict[str, float]:
    """Channels the backend offers that are not in use (the fallback when every channel fails)."""
    offered = {"keyword": capabilities.keyword_search, "recall": capabilities.native_recall}
    return {name: 1.0 for name, available in offered.items() if available and name not in in_use}


def _list_specs(
    backend: MemoryBackend,
    subqueries: Sequence[str],
    channels: Mapping[str, float],
    intent: Intent,
    native: Filters,
    now: datetime,
    config: PipelineConfig,
) -> list[_ListSpec]:
    capabilities = backend.capabilities
    limit = config.candidates_per_channel
    specs: list[_ListSpec] = []
    for index, text in enumerate(subqueries):
        weight = 1.0 if index == 0 else SUBQUERY_WEIGHT
        if "keyword" in channels:
            call = _keyword_call(backend, text, limit, native, now)
            weight_keyword = weight * channels["keyword"]
            specs.append(_ListSpec(f"keyword#{index}", "keyword", index, weight_keyword, call))
        if "recall" in channels:
            query = RecallQuery(
                text=text,
                limit=limit,
                intent=intent if capabilities.intent_recall else None,
                filters=native,
                now=now,
            )
            weight_recall = weight * channels["recall"]
            specs.append(
                _ListSpec(f"recall#{index}", "recall", index, weight_recall, _recall_call(backend, query))
            )
    return specs


def _extra_specs(
    backend: MemoryBackend,
    subqueries: Sequence[str],
    extra: Sequence[RetrievalChannel],
    native: Filters,
    now: datetime,
    config: PipelineConfig,
    skipped: list[str],
) -> list[_ListSpec]:
    """Lists of the plugin channels that run on ``backend`` (a channel weighted 0 is off)."""
    specs: list[_ListSpec] = []
    limit = config.candidates_per_channel
    for channel in extra:
        weight = config.channel_weights.get(channel.name, 1.0)
        if weight <= 0:
            continue
        if not channel.supports(backend):
            skipped.append(f"channel {channel.name} does not run on backend {backend.name}; not used")
            continue
        for index, text in enumerate(subqueries):
            share = weight if index == 0 else weight * SUBQUERY_WEIGHT
            call = _channel_call(channel, backend, text, limit, native, now)
            specs.append(_ListSpec(f"{channel.name}#{index}", channel.name, index, share, call))
    return specs


def _channel_call(
    channel: RetrievalChannel, backend: MemoryBackend, text: str, limit: int, native: Filters, now: datetime
) -> Callable[[], Awaitable[list[Hit]]]:
    return lambda: channel.search(backend, text, limit=limit, filters=native, now=now)


def _keyword_call(
    backend: MemoryBackend, text: str, limit: int, native: Filters, now: datetime
) -> Callable[[], Awaitable[list[Hit]]]:
    return lambda: backend.search(text, limit=limit, filters=native, now=now)


def _recent_call(
    backend: MemoryBackend, limit: int, native: Filters, now: datetime
) -> Callable[[], Awaitable[list[Hit]]]:
    async def call() -> list[Hit]:
        return _recency_hits(await backend.recent(limit=limit, filters=native, now=now))

    return call


def _recency_hits(records: Sequence[MemoryRecord]) -> list[Hit]:
    # newest first, scored by rank: the recency lists carry no score of their own
    return [Hit(record, 1.0 / (rank + 1), via="recency") for rank, record in enumerate(records)]


def _recall_call(backend: MemoryBackend, query: RecallQuery) -> Callable[[], Awaitable[list[Hit]]]:
    return lambda: backend.recall(query)


async def _no_call() -> list[Hit]:
    return []


async def _run_list(spec: _ListSpec, limit_s: float) -> tuple[list[Hit], str | None]:
    try:
        return await within(spec.call(), limit_s), None
    except Exception as exc:  # any backend failure degrades to a warning on the read path
        return [], _failure(spec.key, exc)


def _failure(key: str, exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"channel {key} timed out; results without it"
    # The exception text may carry backend details (paths, hosts): only its kind is reported.
    return f"channel {key} failed ({type(exc).__name__}); results without it"


def _visible_hits(hits: list[Hit], filters: Filters, now: datetime, outcome: RetrievalOutcome) -> list[Hit]:
    visible: list[Hit] = []
    for hit in hits:
        reason = exclusion(hit.record, filters, now)
        if reason is None:
            visible.append(hit)
        else:
            outcome.filtered.append((hit.record.id, reason))
    return visible


def exclusion(record: MemoryRecord, filters: Filters, now: datetime) -> str | None:
    """Why ``record`` may not be shown for this request (``None`` when it may)."""
    if record.created_at > now:
        return "filtered: created after the request's now"
    if not filters.admits(record):
        return "filtered: outside the request filters"
    return None
