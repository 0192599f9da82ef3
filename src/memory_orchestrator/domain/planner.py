"""The query planner (pure): what a question is after and how the pipeline should answer it.

``plan()`` normalises the query, detects the intent and the cues that decided it, extracts entities
(shared regexes plus names the backend already knows), reads a time window relative to ``now``,
splits conjunctions into parallel subqueries, and picks a strategy (``direct`` / ``expanded`` /
``episodic``), a hop budget and a confidence. Every decision can be overridden by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memory_orchestrator.domain.list_questions import SEVERAL_CUE, several_cue
from memory_orchestrator.domain.requests import PlanOverrides
from memory_orchestrator.domain.results import QueryPlan
from memory_orchestrator.domain.time_expressions import infer_time_window
from memory_orchestrator.ports import Filters, Intent, InvalidRequest, TimeRange
from memory_orchestrator.ports.text import extract_entities, tokenize

STRATEGIES = ("direct", "expanded", "episodic")
NO_OVERRIDES = PlanOverrides()


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Hop budget per intent before the configured cap; causes are often two steps away.
DEFAULT_HOPS = {Intent.WHY: 2, Intent.WHEN: 1, Intent.ENTITY: 1, Intent.GENERAL: 1}

# (pattern, weight) per intent. A cue that opens the question counts double: "why ... after X" is
# a WHY question even though "after" is a WHEN cue.
_CUES: dict[Intent, tuple[tuple[str, float], ...]] = {
    Intent.WHY: (
        (r"why", 1.0),
        (r"how come", 1.0),
        (r"what (?:was|were|is|are) the (?:reason|cause|motivation|rationale)s?", 1.0),
        (r"reasons?", 0.7),
        (r"because", 0.6),
        (r"causes?|caused", 0.7),
        (r"what made", 0.8),
        (r"what led to|led to|lead to", 0.8),
        (r"motivation|rationale|justification", 0.7),
        (r"due to", 0.5),
    ),
    Intent.WHEN: (
        (r"when", 1.0),
        (r"what (?:year|month|day|date|time)", 1.0),
        (r"which (?:year|month|day|date)", 1.0),
        (r"how long(?: ago)?", 0.9),
        (r"timeline|chronology|history of", 0.8),
        (r"dates?", 0.5),
        (r"before|after|since|until", 0.3),
    ),
    Intent.ENTITY: (
        (r"who (?:is|was|are|were)", 1.0),
        (r"what (?:is|was|are|were)(?= [A-Z@\"])", 0.6),
        (r"tell me about|what do (?:we|you|i) know about", 1.0),
        (r"profile of|overview of|everything about|information on", 0.9),
        (r"who", 0.6),
        (r"about", 0.3),
    ),
}
_COMPILED = {
    intent: tuple((re.compile(rf"\b(?:{pattern})\b", re.IGNORECASE), weight) for pattern, weight in cues)
    for intent, cues in _CUES.items()
}
# Words that are question scaffolding, not content: a query made only of these asks "what happened".
_CONTENT_FREE = _words(
    """happened happen happening going new recent recently latest lately anything something
    everything stuff things thing remember tell show give list summary summarise summarize update
    updates status memories memory day week month year today yesterday ago last past since ok please
    going on know known get got"""
)
_CONJUNCTION = re.compile(
    r"\s*(?:;|,?\s+\band\b\s+|,?\s+\bas well as\b\s+|\s+\bvs\.?\s+|\s+\bversus\b\s+)\s*"
)
_QUESTION_WORDS = _words("what who why when where which how whose whom did does do is are was were")
_MAX_SUBQUERIES = 4


def plan(
    query: str,
    *,
    now: datetime,
    task: str = "",
    conversation: str = "",
    filters: Filters = Filters(),
    known_entities: Sequence[str] = (),
    overrides: PlanOverrides = NO_OVERRIDES,
    max_hops: int = 3,
) -> QueryPlan:
    """Plan ``query`` asked at ``now``; caller ``overrides`` win over every inferred decision.

    ``task`` and ``conversation`` only contribute entities (the query stays the question asked);
    ``filters`` are the caller's hard restrictions: a filter time range is the plan's window and no
    other window is read from the text.
    """
    canonical = canonicalise(query)
    intent, cues = detect_intent(canonical)
    entities = _entities(canonical, task, conversation, known_entities)
    reading = infer_time_window(canonical, now)
    window = reading.window if filters.time_range is None else filters.time_range
    phrases = reading.phrases if filters.time_range is None else ("filters",)
    content = content_terms(canonical)
    episodic = not content and not entities
    strategy = "episodic" if episodic else _strategy(canonical, intent)
    inferred = QueryPlan(
        query=query,
        canonical=canonical,
        subqueries=() if episodic else decompose(canonical),
        intent=intent,
        intent_cues=cues + tuple(f"time: {phrase}" for phrase in phrases) + several_cue(canonical),
        entities=entities,
        time_window=window,
        strategy=strategy,
        hops=0 if strategy != "expanded" else min(DEFAULT_HOPS[intent], max_hops),
        confidence=_confidence(cues, entities, content, window, episodic),
    )
    return apply_overrides(inferred, overrides)


def apply_overrides(inferred: QueryPlan, overrides: PlanOverrides) -> QueryPlan:
    """``inferred`` with every decision the caller made instead."""
    changes: dict[str, object] = {}
    if overrides.intent is not None:
        changes["intent"] = overrides.intent
        # the list cue is not about the intent: it survives the override
        several = tuple(cue for cue in inferred.intent_cues if cue.startswith(SEVERAL_CUE))
        changes["intent_cues"] = ("override", *several)
    if overrides.entities is not None:
        changes["entities"] = tuple(overrides.entities)
    if overrides.time_window is not None:
        changes["time_window"] = overrides.time_window
    if overrides.strategy is not None:
        changes["strategy"] = _checked_strategy(overrides.strategy)
    if overrides.hops is not None:
        changes["hops"] = overrides.hops
    if overrides.subqueries is not None:
        changes["subqueries"] = tuple(overrides.subqueries)
    return replace(inferred, **changes)  # type: ignore[arg-type]


def canonicalise(query: str) -> str:
    """Whitespace-collapsed query without trailing question marks or full stops."""
    return " ".join(query.split()).rstrip("?.! ").strip()


def detect_intent(text: str) -> tuple[Intent, tuple[str, ...]]:
    """The intent of ``text`` and the cue phrases that decided it (``GENERAL`` with no cues)."""
    best, best_score = Intent.GENERAL, 0.0
    best_cues: tuple[str, ...] = ()
    for intent, cues in _COMPILED.items():
        score, found = 0.0, []
        for pattern, weight in cues:
            for match in pattern.finditer(text):
                opening = match.start() == 0
                score += weight * (2.0 if opening else 1.0)
                found.append(match.group().lower())
        if score > best_score:
            best, best_score, best_cues = intent, score, tuple(dict.fromkeys(found))
    return best, best_cues


def content_terms(text: str) -> tuple[str, ...]:
    """Tokens of ``text`` that carry meaning (stop words, question words and filler removed)."""
    return tuple(
        token
        for token in tokenize(text)
        if token not in _CONTENT_FREE and token not in _QUESTION_WORDS and not token.isdigit()
    )


def decompose(canonical: str) -> tuple[str, ...]:
    """Parallel subqueries: the whole query first, then each conjunct that stands on its own.

    "Vendor X delays and their impact on Atlas" gives the whole question, "Vendor X delays" and
    "their impact on Atlas". A conjunct needs two content words of its own, so "What did
    Caroline and Melanie do" is not split into fragments.
    """
    parts = [part.strip() for part in _CONJUNCTION.split(canonical) if part.strip()]
    if len(parts) < 2:
        return (canonical,)
    kept = [part for part in parts if len(content_terms(part)) >= 2]
    if len(kept) < 2:
        return (canonical,)
    return tuple(dict.fromkeys([canonical, *kept]))[:_MAX_SUBQUERIES]


def _entities(canonical: str, task: str, conversation: str, known_entities: Sequence[str]) -> tuple[str, ...]:
    found = list(extract_entities(canonical, known_entities))
    found.extend(_capitalised_names(canonical, found))
    for extra in (task, conversation[-2000:]):
        if extra:
            found.extend(name for name in extract_entities(extra, known_entities) if len(name) > 1)
    unique: dict[str, str] = {}
    for name in found:
        unique.setdefault(name.casefold(), name)
    return tuple(unique.values())


_CAPITALISED = re.compile(r"(?<![\w'])([A-Z][a-z][\w-]*)(?:'s)?")
_NOT_NAMES = _words(
    """i what who why when where which how whose did does do is are was were tell show give list
    the a an and or but if in on at of for to from with about after before since until during last
    this next january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow please can could
    would should will has have had any all some my our your their his her its we you they he she it
    there here then also q1 q2 q3 q4 find get remind summarise summarize explain"""
)


def _capitalised_names(canonical: str, found: Sequence[str]) -> list[str]:
    # Single capitalised words inside a question ("When did Caroline ...") are usually names; the
    # shared extractor only takes multi-word names, so the planner adds the single ones here unless
    # they are part of a name already found ("Vendor" of "Vendor X").
    taken = {word for name in found for word in name.casefold().split()}
    names: list[str] = []
    for match in _CAPITALISED.finditer(canonical):
        word = match.group(1)
        if word.casefold() in _NOT_NAMES or word.casefold() in taken:
            continue
        names.append(word)
    return names


def _strategy(canonical: str, intent: Intent) -> str:
    # An exact lookup (a URL, a path, a quoted title and little else) is answered best without a walk.
    stripped = re.sub(r"\"[^\"]+\"|https?://\S+|\S+/\S+", "", canonical)
    if intent == Intent.GENERAL and stripped != canonical and len(content_terms(stripped)) <= 1:
        return "direct"
    return "expanded"


def _checked_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise InvalidRequest(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}")
    return strategy


def _confidence(
    cues: tuple[str, ...],
    entities: tuple[str, ...],
    content: tuple[str, ...],
    window: TimeRange | None,
    episodic: bool,
) -> float:
    # A plan is trustworthy when the question says what it wants (cues), names something concrete
    # (entities, a time) and has enough words to match on.
    if episodic:
        return 0.9 if window is not None else 0.6
    score = 0.35 + 0.2 * bool(cues) + 0.15 * min(len(entities), 2) / 2 + 0.1 * (window is not None)
    score += 0.2 * min(len(content), 4) / 4
    return round(min(score, 1.0), 3)
