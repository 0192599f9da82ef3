"""Readable rendering of a trace document (``explain``, ``trace show``); JSON output shows it all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.text import Text

from memory_orchestrator.domain.trace import omitted_count
from memory_orchestrator.entrypoints.cli import output as out

#: Signals shown in the breakdown table, in formula order; others are appended as found.
SIGNAL_ORDER = (
    "relevance",
    "graph",
    "entity",
    "recency",
    "type_match",
    "importance",
    "cross_reference",
    "noise",
)
#: Short column headers so the breakdown fits a terminal.
SIGNAL_LABELS = {
    "relevance": "rel",
    "graph": "graph",
    "entity": "ent",
    "recency": "rec",
    "type_match": "type",
    "importance": "imp",
    "cross_reference": "xref",
    "noise": "noise",
    "duplication": "dup",
}


def show_trace(document: Mapping[str, Any]) -> None:
    """Plan, per-stage sizes and timings, score breakdown of the results, drops and warnings."""
    operation = document.get("operation", "")
    out.console.print(Text(f"trace {document.get('trace_id', '?')} {operation}".rstrip()))
    plan = document.get("plan")
    if isinstance(plan, Mapping):
        out.console.print(Text(plan_line(plan)))
    show_stages(document)
    ranking = _stage(document, "ranking")
    items = ranking.get("items") if isinstance(ranking.get("items"), list) else []
    if items:
        show_breakdown(items[:10])
    show_drops(document.get("drops") or [])
    for warning in document.get("warnings") or ():
        out.console.print(Text(f"warning: {warning}"))


def plan_line(plan: Mapping[str, Any]) -> str:
    """One line saying how the planner understood the query."""
    cues = ", ".join(plan.get("intent_cues") or ()) or "no cue"
    window = plan.get("time_window")
    when = (
        f"{window.get('start') or '…'} to {window.get('end') or '…'}"
        if isinstance(window, Mapping)
        else "any"
    )
    entities = ", ".join(plan.get("entities") or ()) or "-"
    return (
        f"plan: intent {plan.get('intent')} ({cues}); entities {entities}; "
        f"time {when}; strategy {plan.get('strategy')}, {plan.get('hops')} hops; "
        f"confidence {plan.get('confidence')}"
    )


def _stage(document: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    stages = document.get("stages")
    stage = stages.get(name) if isinstance(stages, Mapping) else None
    return stage if isinstance(stage, Mapping) else {}


def show_stages(document: Mapping[str, Any]) -> None:
    """One row per stage: what it produced and how long it took."""
    timings = _mapping(document.get("timings_ms"))
    stages = _mapping(document.get("stages"))
    names = [name for name in [*timings, *stages] if name != "request"]
    rows = [
        (name, stage_summary(name, _stage(document, name)), timings.get(name, ""))
        for name in dict.fromkeys(names)
    ]
    if rows:
        out.console.print(out.table("stages", ("stage", "what happened", "ms"), rows))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def stage_summary(name: str, stage: Mapping[str, Any]) -> str:
    """A short description of one stage's record."""
    if name == "retrieval" and isinstance(stage.get("lists"), Mapping):
        lists = stage["lists"]
        return ", ".join(f"{channel}: {len(hits)}" for channel, hits in lists.items()) or "no lists"
    if name == "expansion":
        decisions = stage.get("decisions") or []
        reached = sum(int(d.get("reached", 0)) for d in decisions if isinstance(d, Mapping))
        return f"{len(decisions)} hop(s), {reached} reached, {len(stage.get('added') or [])} added"
    if name == "ranking":
        return f"{len(stage.get('items') or [])} ranked, {len(stage.get('superseded') or [])} superseded"
    if name == "dedup":
        merged, stale = len(stage.get("merged") or []), len(stage.get("stale") or [])
        return f"{stage.get('kept', '?')} kept, {merged} merged, {stale} stale"
    keys = ", ".join(sorted(stage)) if stage else ""
    return keys[:80]


def show_breakdown(items: Sequence[Any]) -> None:
    """Score and per-signal values of the top ranked items."""
    signals = [name for name in SIGNAL_ORDER if any(name in _signals(item) for item in items)]
    extra = sorted({name for item in items for name in _signals(item)} - set(signals))
    columns = [*signals, *extra]
    rows = [
        (
            rank,
            item.get("id", "?"),
            f"{float(item.get('score', 0)):.3f}",
            *(_fmt(_signals(item).get(c)) for c in columns),
        )
        for rank, item in enumerate(items, start=1)
        if isinstance(item, Mapping)
    ]
    headers = [SIGNAL_LABELS.get(name, name) for name in columns]
    out.console.print(out.table("score breakdown", ("#", "id", "score", *headers), rows))


def _signals(item: Any) -> Mapping[str, Any]:
    signals = item.get("signals") if isinstance(item, Mapping) else None
    return signals if isinstance(signals, Mapping) else {}


def _fmt(value: Any) -> str:
    return "" if value is None else f"{float(value):.2f}"


def show_drops(drops: Sequence[Any]) -> None:
    """Dropped candidates counted by stage and reason (the reason's words before any number)."""
    counts: Counter[tuple[str, str]] = Counter()
    for drop in drops:
        if omitted_count(drop):
            # a basic trace keeps the first drops only and says how many it left out
            counts[("...", "more, not listed in a basic trace")] += omitted_count(drop)
        elif isinstance(drop, Mapping):
            reason = str(drop.get("reason", "")).split(":")[0]
            counts[(str(drop.get("stage", "?")), reason)] += 1
    if counts:
        rows = [(stage, reason, count) for (stage, reason), count in counts.most_common()]
        out.console.print(out.table("dropped candidates", ("stage", "reason", "count"), rows))
