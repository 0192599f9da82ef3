"""The explained re-ranker (pure): a transparent weighted sum, a breakdown and reasons per item.

``score = w_relevance * max(relevance, graph) + w_graph * min(relevance, graph)
+ w_recency * recency + w_type * type_match + w_entity * entity + w_importance * importance
+ w_cross * cross_reference - w_noise * noise + w_time * time + sum(scorer.weight * scorer.score)``
(and ``- w_dup * duplication``, applied by the dedup stage), times ``superseded_factor`` for a
superseded memory.

``relevance`` is the fused direct-retrieval relevance; ``graph`` the share of a seed's relevance an
expanded memory inherits. An expanded memory therefore competes with the inherited share rather than
its own (often absent) lexical match, and a direct hit that is also a neighbour of another strong hit
is corroborated by ``w_graph`` times the smaller of the two. ``recency`` (half-life decay from
``now``) counts fully only for WHEN, episodic or time-windowed questions and at a fifth otherwise.
Ties break on score, then newer ``created_at``, then id, so the order is deterministic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.config import PipelineConfig
from memory_orchestrator.domain.entity_evidence import entity_share
from memory_orchestrator.ports import Intent, MemoryRecord, Scorer, ScoringContext, TimeRange
from memory_orchestrator.ports.text import has_causal_cue, tokenize

#: How well a memory category answers each intent (categories not listed score 0).
TYPE_MATCH: dict[Intent, dict[str, float]] = {
    Intent.WHY: {"decision": 1.0, "insight": 1.0, "fact": 0.3, "context": 0.3},
    Intent.WHEN: {"fact": 0.5, "context": 0.5, "decision": 0.5},
    Intent.ENTITY: {"fact": 1.0, "preference": 0.8, "insight": 0.5, "decision": 0.5},
    Intent.GENERAL: {},
}
#: Candidate pools smaller than this do not discount common entities (too few to judge).
MIN_SPECIFICITY_POOL = 10
#: Recency weight multiplier when time is not what the question is about.
WEAK_RECENCY = 0.2
#: Chat filler that does not count as content for the noise signal.
FILLER = frozenset(
    re.findall(
        r"\w+",
        """ok okay k thanks thank thx yes yeah yep no nope lol haha hi hey hello bye cool great nice
        sure wow awesome good see glad""",
    )
)


@dataclass(frozen=True, slots=True)
class RankingContext:
    """What the re-ranker knows about the request."""

    query: str
    intent: Intent
    entities: tuple[str, ...]
    now: datetime
    strategy: str = "expanded"
    time_window: TimeRange | None = None
    task: str = ""
    #: Number of retrieval lists that ran (for the cross-reference signal).
    total_lists: int = 1
    #: The question asks for several things (``list_questions``): the entity weighs more.
    several: bool = False
    #: Share of the entity boost the candidates back (``entity_evidence``); set by :func:`rank`.
    entity_share: float = 1.0


@dataclass(slots=True)
class RankedItem:
    """A candidate with its score, signal breakdown and reasons."""

    candidate: Candidate
    score: float
    signals: dict[str, float]
    #: Reasons added after scoring (dedup's merges, penalties and stale marks).
    notes: list[str] = field(default_factory=list)
    superseded: bool = False
    #: Ids that supersede this memory (explicit edges, or newer contradicting memories from dedup).
    superseded_by: list[str] = field(default_factory=list)
    #: Duplicates merged into this item by the dedup stage.
    absorbed_ids: list[str] = field(default_factory=list)
    absorbed_entities: list[str] = field(default_factory=list)
    #: The question's entities this memory carries (found while scoring).
    matched: list[str] = field(default_factory=list)
    #: The request it was scored for; reasons are written from it only when they are read.
    context: RankingContext | None = None

    @property
    def reasons(self) -> list[str]:
        """Short human-readable reasons for the item's place (written on demand: most candidates
        are dropped before anyone reads them)."""
        base = reasons_for(self, self.context) if self.context is not None else []
        return [*base, *self.notes]

    @property
    def record(self) -> MemoryRecord:
        """The memory."""
        return self.candidate.record


def rank(
    candidates: Sequence[Candidate],
    context: RankingContext,
    config: PipelineConfig,
    scorers: Sequence[Scorer] = (),
) -> tuple[list[RankedItem], list[str]]:
    """Score and order ``candidates``; returns the ranked items and warnings from failing scorers."""
    warnings: list[str] = []
    broken: set[str] = set()
    scoring = ScoringContext(
        query=context.query,
        intent=context.intent,
        entities=context.entities,
        now=context.now,
        time_window=context.time_window,
        task=context.task,
    )
    patterns = [name_pattern(name) for name in context.entities]
    matches = {c.memory_id: matched_entities(c.record, patterns) for c in candidates}
    specificity = entity_specificity(matches, [name for name, _ in patterns])
    contested = config.weights.contested_entity
    share = entity_share(context.query, context.entities, candidates, matches, contested)
    context = replace(context, entity_share=share)
    ranked = []
    weighted = _Weighted(context, config)
    for candidate in candidates:
        found = matches[candidate.memory_id]
        entity = share * sum(specificity[name] for name in found) / len(patterns) if patterns else 0.0
        item = weighted.score(candidate, entity, found)
        _apply_scorers(item, scorers, scoring, broken, warnings, config.weights.superseded_factor)
        ranked.append(item)
    ranked.sort(key=order_key)
    return ranked, warnings


class _Weighted:
    """The weighted sum of one request: what is the same for all its candidates, worked out once."""

    __slots__ = ("context", "entity", "half_life", "recency", "superseded_factor", "weights")

    def __init__(self, context: RankingContext, config: PipelineConfig) -> None:
        weights = config.weights
        self.context, self.weights, self.half_life = context, weights, config.recency_half_life_days
        self.recency = weights.recency * (1.0 if _time_matters(context) else WEAK_RECENCY)
        self.entity = weights.entity + (weights.list_entity if context.several else 0.0)
        self.superseded_factor = weights.superseded_factor

    def score(self, candidate: Candidate, entity: float, matched: list[str]) -> RankedItem:
        """The built-in signals and weighted score of ``candidate`` (plugin scorers not included):
        ``entity`` is its entity signal (``rank`` weighs the question's names it carries, ``matched``,
        by their specificity)."""
        weights, context, record = self.weights, self.context, candidate.record
        relevance, graph = candidate.relevance, candidate.inherited
        fresh = recency(record.created_at, context.now, self.half_life)
        fits = type_match(record, context.intent)
        importance = min(1.0, max(0.0, (record.importance - 1) / 4))
        cross = _cross_reference(candidate, context.total_lists)
        noisy = noise_of_words(candidate.words())
        timely = time_match(record.created_at, context.time_window)
        strong, weak = (relevance, graph) if relevance >= graph else (graph, relevance)
        # the same operations in the same order as ever, so the same doubles
        score = weights.relevance * strong + weights.graph * weak
        score += self.recency * fresh + weights.type_match * fits
        score += self.entity * entity + weights.importance * importance
        score += weights.cross_reference * cross - weights.noise * noisy
        score += weights.time * timely
        superseded = bool(record.superseded_by)
        if superseded:
            score *= self.superseded_factor
        signals = {
            "relevance": _rounded(relevance),
            "graph": _rounded(graph),
            "recency": _rounded(fresh),
            "type_match": _rounded(fits),
            "entity": _rounded(entity),
            "importance": _rounded(importance),
            "cross_reference": _rounded(cross),
            "noise": _rounded(noisy),
            "time": _rounded(timely),
        }
        return RankedItem(
            candidate,
            score,
            signals,
            superseded=superseded,
            superseded_by=list(record.superseded_by),
            matched=matched,
            context=context,
        )


def _rounded(value: float) -> float:
    # most signals are exactly 0 or 1, which rounding leaves as they are (and it is not free)
    return value if value == 0.0 or value == 1.0 else round(value, 6)


def order_key(item: RankedItem) -> tuple[float, float, str]:
    """Sort key: higher score, then newer, then id."""
    return (-round(item.score, 9), -item.record.created_at.timestamp(), item.record.id)


def recency(created_at: datetime, now: datetime, half_life_days: float) -> float:
    """``0.5 ** (age / half-life)``; 1.0 for a memory created at ``now`` (or later)."""
    age_days = max(0.0, (now - created_at).total_seconds() / 86400)
    return math.pow(0.5, age_days / half_life_days) if half_life_days > 0 else 0.0


def time_match(created_at: datetime, window: TimeRange | None) -> float:
    """1.0 inside the question's time window; 0.5 within one window's length after it (an event is
    often told afterwards: "last month we went to ..."); 0 otherwise or without a window."""
    if window is None:
        return 0.0
    if window.contains(created_at):
        return 1.0
    if window.start is not None and window.end is not None and created_at >= window.end:
        return 0.5 if created_at < window.end + (window.end - window.start) else 0.0
    return 0.0


def type_match(record: MemoryRecord, intent: Intent) -> float:
    """How well the memory's category (and, for WHY, a stated reason) fits the intent."""
    value = TYPE_MATCH.get(intent, {}).get(record.category, 0.0)
    if intent == Intent.WHY and _causal(record.content):
        value = 1.0
    return value


#: Whether a memory's content states a cause; cached, as the same memories come back query after
#: query (a WHY question asks it of every candidate). A bool per text: nothing for the collector.
_causal = lru_cache(maxsize=16384)(has_causal_cue)


def entity_specificity(matches: Mapping[str, list[str]], names: Sequence[str]) -> dict[str, float]:
    """How much naming each entity singles memories out: 1.0 unless it matches over half the pool.

    In a conversation every turn of a speaker "matches" that speaker; boosting them all would only
    reorder half the pool. Specificity falls linearly from 1 (half the candidates) to 0 (all).
    Pools smaller than ``MIN_SPECIFICITY_POOL`` are too small to judge and keep 1.0.
    """
    total = len(matches)
    result: dict[str, float] = {}
    for name in names:
        if total < MIN_SPECIFICITY_POOL:
            result[name] = 1.0
            continue
        coverage = sum(1 for found in matches.values() if name in found) / total
        result[name] = max(0.0, min(1.0, 2.0 * (1.0 - coverage)))
    return result


def matched_entities(record: MemoryRecord, patterns: Sequence[tuple[str, re.Pattern[str]]]) -> list[str]:
    """The question's entities found in the memory (source, or named in its text or entities).

    A name only used to address someone ("Wow, Caroline!", "Hey Mel,") says who was spoken to, not
    what the memory is about: it does not count, even when an extractor listed it as an entity.
    """
    if not patterns:
        return []
    source = record.source.casefold()
    carried: set[str] | None = None  # the memory's entities, casefolded: read when needed
    content = record.content
    # ASCII text cannot match a case-insensitive ASCII name it does not contain, lower-cased
    lowered = content.lower() if content.isascii() else None
    found = []
    for name, pattern in patterns:
        absent = lowered is not None and name.isascii() and name.lower() not in lowered
        mentions = [] if absent else list(pattern.finditer(content))
        folded = name.casefold()
        if folded == source or any(not addressed(content, match) for match in mentions):
            found.append(name)
        elif not mentions and record.entities:
            if carried is None:
                carried = {entity.casefold() for entity in record.entities}
            if folded in carried:
                found.append(name)
    return found


_ADDRESS_BEFORE = re.compile(
    r"(?:(?:^|\b)(?:hey|hi|hiya|hello|thanks|thank you|wow|woah|whoa|yeah|yes|yay|oh|aw+|congrats|"
    r"congratulations|sorry|ok|okay|dear|bye|cheers|haha|lol|omg|morning|night)\W{0,3}|,\s*|^|:\s*)$",
    re.IGNORECASE,
)
#: Matched at the end of the name (``match(text, pos)``, so no ``^``: it would only match at 0).
_ADDRESS_AFTER = re.compile(r"\s*(?:[!,.?]|$)")


def addressed(text: str, match: re.Match[str]) -> bool:
    """True when the name at ``match`` is a form of address: after a greeting or a comma (or opening
    the text), and followed by punctuation."""
    # The punctuation after the name first: it is one anchored match, and most mentions fail it,
    # which spares them the greeting search (tried at each of up to 20 positions before the name).
    if _ADDRESS_AFTER.match(text, match.end()) is None:
        return False
    return _ADDRESS_BEFORE.search(text[max(0, match.start() - 20) : match.start()]) is not None


def noise(content: str) -> float:
    """1.0 for a memory with no content words, falling to 0 at three distinct content words."""
    return noise_of_words(frozenset(tokenize(content)))


def noise_of_words(words: frozenset[str]) -> float:
    """:func:`noise` from the memory's tokens."""
    distinct = len(words - FILLER)
    return max(0.0, (3 - distinct) / 3)


def reasons_for(item: RankedItem, context: RankingContext) -> list[str]:
    """Short human-readable reasons for the item's place (before dedup's notes)."""
    candidate, signals, reasons = item.candidate, item.signals, []
    if candidate.ranks:
        found = ", ".join(f"{key.split('#')[0]} #{rank}" for key, rank in sorted(candidate.ranks.items()))
        reasons.append(f"matched the query ({found})")
    if candidate.path:
        reasons.append(path_reason(candidate))
    if item.matched:
        withheld = (
            " (boost withheld: other memories say the question better)" if context.entity_share < 1 else ""
        )
        reasons.append("entity match: " + ", ".join(item.matched) + withheld)
    if _time_matters(context) and signals["recency"] >= 0.5:
        reasons.append("recent")
    if signals["type_match"] >= 0.5:
        reasons.append(f"type match: {item.record.category} for {context.intent.value}")
    if signals.get("time", 0.0) >= 1.0:
        reasons.append("inside the question's time window")
    if signals["cross_reference"] > 0:
        reasons.append(f"confirmed by {len(candidate.ranks)} retrieval lists")
    if signals["noise"] >= 0.5:
        reasons.append("little content")
    if item.superseded:
        reasons.append("superseded by " + ", ".join(item.record.superseded_by))
    return reasons


def path_reason(candidate: Candidate) -> str:
    """``"2 hops from mem-000012 via causal, temporal"`` (or a causal chain phrase)."""
    kinds = list(dict.fromkeys(step.edge_type.value for step in candidate.path))
    hops = len(candidate.path)
    if kinds == ["causal"]:
        return f"causal chain from {candidate.seed_id} ({hops} hop{'s' if hops > 1 else ''})"
    return f"{hops} hop{'s' if hops > 1 else ''} from {candidate.seed_id} via {', '.join(kinds)}"


def _apply_scorers(
    item: RankedItem,
    scorers: Sequence[Scorer],
    context: ScoringContext,
    broken: set[str],
    warnings: list[str],
    superseded_factor: float,
) -> None:
    for scorer in scorers:
        if scorer.name in broken:
            continue
        try:
            value = min(1.0, max(0.0, float(scorer.score(context, item.record, dict(item.signals)))))
        except Exception as exc:  # a faulty plugin must not break a query
            broken.add(scorer.name)
            warnings.append(f"scorer {scorer.name} failed ({type(exc).__name__}); ignored")
            continue
        item.signals[scorer.name] = round(value, 6)
        item.score += scorer.weight * value * (superseded_factor if item.superseded else 1.0)


def _cross_reference(candidate: Candidate, total_lists: int) -> float:
    if total_lists <= 1 or len(candidate.ranks) <= 1:
        return 0.0
    return min(1.0, (len(candidate.ranks) - 1) / (total_lists - 1))


def _time_matters(context: RankingContext) -> bool:
    return context.intent == Intent.WHEN or context.strategy == "episodic" or context.time_window is not None


def name_pattern(name: str) -> tuple[str, re.Pattern[str]]:
    """``(name, a case-insensitive whole-word pattern of it)``."""
    return name, re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
