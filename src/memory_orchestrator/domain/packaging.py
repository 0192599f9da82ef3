"""Budgeted context packing (pure): fit items into max_items / max_chars / max_tokens.

Tokens are estimated as ``ceil(chars / chars_per_token)`` (``PipelineConfig.chars_per_token``, 4 by
default, the usual English average); a token budget is turned into a character budget with the same
ratio, so the estimate never exceeds it. Items are taken in rank order; one that does not fit is
trimmed to the room left when that is worthwhile, otherwise cut (its id goes to ``cut``). A memory
longer than ``max_item_chars`` is trimmed around the query terms with an ellipsis (``truncated``;
the full text stays available from the backend by id). The block keeps every memory id:
``[mem-000012] 2026-03-14 source: text``, grouped by entity, day or task, chronological for
episodic and WHEN questions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from memory_orchestrator.domain.requests import Budget
from memory_orchestrator.domain.results import QueryPlan, ResultItem
from memory_orchestrator.ports import Intent
from memory_orchestrator.ports.text import tokenize

GROUPINGS = ("entity", "time", "task")
ELLIPSIS = "…"
TASK_GROUP = "Related to the task"
#: Below this many characters of room, trimming an item to fit is not worth it: it is cut instead.
MIN_TRIMMED_CHARS = 80
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True, slots=True)
class Packed:
    """The packed context: the items kept (in block order), the block and its size."""

    items: tuple[ResultItem, ...]
    context_block: str
    chars: int
    est_tokens: int
    cut: tuple[str, ...]
    grouping: str


def estimate_tokens(chars: int, chars_per_token: float) -> int:
    """Token estimate of a text of ``chars`` characters."""
    return math.ceil(chars / chars_per_token) if chars > 0 else 0


def char_limit(budget: Budget, chars_per_token: float) -> int | None:
    """The tighter of the character budget and the token budget expressed in characters."""
    limits = []
    if budget.max_chars is not None:
        limits.append(budget.max_chars)
    if budget.max_tokens is not None:
        limits.append(int(budget.max_tokens * chars_per_token))
    return min(limits) if limits else None


def choose_grouping(plan: QueryPlan, group_by: str | None, task: str) -> str:
    """The caller's grouping, or: time for episodic / WHEN, entity when entities were named, else flat."""
    if group_by is not None:
        return group_by
    if plan.strategy == "episodic" or plan.intent == Intent.WHEN:
        return "time"
    if plan.entities:
        return "entity"
    return "task" if task else "flat"


def pack(
    items: Sequence[ResultItem],
    plan: QueryPlan,
    budget: Budget,
    *,
    chars_per_token: float,
    max_item_chars: int,
    group_by: str | None = None,
    task: str = "",
) -> Packed:
    """Fit ``items`` (best first) into ``budget`` and render the context block."""
    grouping = choose_grouping(plan, group_by, task)
    terms = tokenize(plan.canonical)
    limit = char_limit(budget, chars_per_token)
    chosen: list[ResultItem] = []
    cut: list[str] = []
    for item in items:
        if len(chosen) >= budget.max_items:
            cut.append(item.memory_id)
            continue
        item = trim(item, max_item_chars, terms)
        fitted = _fit(chosen, item, plan, grouping, task, limit, terms)
        if fitted is None:
            cut.append(item.memory_id)
        else:
            chosen.append(fitted)
    ordered = _block_order(chosen, plan, grouping, task)
    block = render(ordered, plan, grouping, task)
    return Packed(
        tuple(ordered), block, len(block), estimate_tokens(len(block), chars_per_token), tuple(cut), grouping
    )


def _fit(
    chosen: list[ResultItem],
    item: ResultItem,
    plan: QueryPlan,
    grouping: str,
    task: str,
    limit: int | None,
    terms: Sequence[str],
) -> ResultItem | None:
    if limit is None:
        return item
    size = len(render(_block_order([*chosen, item], plan, grouping, task), plan, grouping, task))
    if size <= limit:
        return item
    room = len(item.content) - (size - limit)
    if room < MIN_TRIMMED_CHARS:
        return None
    trimmed = trim(item, room, terms)
    size = len(render(_block_order([*chosen, trimmed], plan, grouping, task), plan, grouping, task))
    return trimmed if size <= limit else None


def trim(item: ResultItem, max_chars: int, terms: Sequence[str]) -> ResultItem:
    """``item`` with its content cut to ``max_chars`` around the first query term found."""
    content = item.content
    if len(content) <= max_chars:
        return item
    return replace(item, content=excerpt(content, max_chars, terms), truncated=True)


def excerpt(text: str, max_chars: int, terms: Sequence[str]) -> str:
    """At most ``max_chars`` characters of ``text`` centred on the first query term, with ellipses."""
    lowered = text.casefold()
    positions = [lowered.find(term) for term in terms if term and lowered.find(term) >= 0]
    focus = min(positions) if positions else 0
    room = max(1, max_chars - 2 * len(ELLIPSIS))
    start = max(0, min(focus - room // 3, len(text) - room))
    end = min(len(text), start + room)
    if start > 0:
        space = text.find(" ", start, start + 20)
        start = space + 1 if space >= 0 else start
    if end < len(text):
        space = text.rfind(" ", max(start, end - 20), end)
        end = space if space > start else end
    body = text[start:end].strip()
    return f"{ELLIPSIS if start > 0 else ''}{body}{ELLIPSIS if end < len(text) else ''}"


def render(items: Sequence[ResultItem], plan: QueryPlan, grouping: str, task: str) -> str:
    """The context block for ``items`` (already in block order)."""
    if not items:
        return ""
    header = f"Memories for: {plan.canonical or '(recent activity)'}"
    lines = [header]
    current: str | None = None
    for item in items:
        group = _group_of(item, plan, grouping, task)
        if group is not None and group != current:
            lines.append(f"## {group}")
            current = group
        lines.append(line_for(item))
    return "\n".join(lines)


def line_for(item: ResultItem) -> str:
    """``[id] date source: text`` with a superseded marker when it applies."""
    text = " ".join(item.content.split())
    marker = f" (superseded by {', '.join(item.superseded_by)})" if item.superseded else ""
    return f"[{item.memory_id}] {item.created_at.date().isoformat()} {item.source}: {text}{marker}"


def summarise(items: Sequence[ResultItem], plan: QueryPlan, *, max_chars: int = 300) -> str:
    """Extractive summary: how many memories, about what, over which dates, and the best one's gist."""
    if not items:
        return "No memories matched."
    names = list(dict.fromkeys(name for item in items for name in item.entities))
    focus = [name for name in plan.entities if name.casefold() in {n.casefold() for n in names}]
    about = f" about {', '.join((focus or names)[:3])}" if (focus or names) else ""
    days = sorted(item.created_at.date().isoformat() for item in items)
    span = days[0] if days[0] == days[-1] else f"{days[0]} to {days[-1]}"
    gist = _SENTENCE_END.split(" ".join(items[0].content.split()), maxsplit=1)[0]
    text = f"{len(items)} memor{'y' if len(items) == 1 else 'ies'}{about} ({span}). Top: {gist}"
    return text if len(text) <= max_chars else text[: max_chars - 1].rstrip() + ELLIPSIS


def _block_order(items: list[ResultItem], plan: QueryPlan, grouping: str, task: str) -> list[ResultItem]:
    # Sorting is stable, so items keep their rank order inside a group.
    if grouping == "time":
        return sorted(items, key=lambda item: (item.created_at, item.memory_id))
    if grouping == "task":
        return sorted(items, key=lambda item: _group_of(item, plan, grouping, task) != TASK_GROUP)
    if grouping == "entity":
        first_seen: dict[str | None, int] = {}
        for index, item in enumerate(items):
            first_seen.setdefault(_group_of(item, plan, grouping, task), index)
        return sorted(items, key=lambda item: first_seen[_group_of(item, plan, grouping, task)])
    return list(items)


def _group_of(item: ResultItem, plan: QueryPlan, grouping: str, task: str) -> str | None:
    if grouping == "time":
        return item.created_at.date().isoformat()
    if grouping == "entity":
        return _entity_group(item, plan)
    if grouping == "task":
        wanted = set(tokenize(task))
        return TASK_GROUP if wanted & set(tokenize(item.content)) else "Other"
    return None


def _entity_group(item: ResultItem, plan: QueryPlan) -> str:
    text = item.content.casefold()
    carried = {name.casefold() for name in item.entities} | {item.source.casefold()}
    for name in plan.entities:
        key = name.casefold()
        if key in carried or re.search(rf"(?<!\w){re.escape(key)}(?!\w)", text):
            return name
    return item.entities[0] if item.entities else "Other"
