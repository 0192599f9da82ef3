"""Session logic behind the agent tools ``changes`` and ``session_summary``.

- :func:`collect_changes`: what was added, superseded or forgotten since a moment, on every backend:
  the backend's change log when it keeps one, otherwise reconstructed from creation times and
  ``supersedes`` edges, saying what that reconstruction cannot see.
- :func:`summarise_session`: stores a session's decisions and key points as deduplicated memories,
  chained in order by temporal edges and tagged with a session entity.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from memory_orchestrator.domain.requests import SearchRequest, WriteRequest
from memory_orchestrator.domain.results import SearchResult, WriteOutcome
from memory_orchestrator.domain.time_expressions import infer_time_window
from memory_orchestrator.ports import (
    BackendError,
    Change,
    ChangeKind,
    Edge,
    EdgeType,
    Filters,
    InvalidRequest,
    MemoryBackend,
    MemoryRecord,
    NewMemory,
    TimeRange,
    TimestampOutOfRange,
    WriteAction,
    ensure_utc,
    format_timestamp,
    parse_timestamp,
)
from memory_orchestrator.ports.text import normalise_content

#: ``source`` of the memories written by :func:`summarise_session` ("last session" looks for them).
SESSION_SOURCE = "session-summary"
#: Characters of a memory shown in change and provenance listings.
SNIPPET_CHARS = 160

_UNITS = {
    "m": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "minute": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "hour": timedelta(hours=1),
    "d": timedelta(days=1),
    "day": timedelta(days=1),
    "w": timedelta(weeks=1),
    "week": timedelta(weeks=1),
    "month": timedelta(days=30),
}
_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_DURATION = re.compile(
    r"^(?:(?:last|past)\s+)?(?P<count>\d+|a|an|one|two|three|four|five|six|seven)?\s*"
    r"(?P<unit>m|min|minute|h|hour|d|day|w|week|month)s?(?:\s+ago)?$"
)


class SearchesAndWrites(Protocol):
    """What the session logic needs from the Orchestrator."""

    async def search(self, request: SearchRequest) -> SearchResult:
        """Ranked, explained retrieval."""
        ...

    async def write(self, request: WriteRequest) -> WriteOutcome:
        """The write path (dedup, supersession, links)."""
        ...


def snippet(text: str) -> str:
    """``text`` on one line, cut to :data:`SNIPPET_CHARS`."""
    line = " ".join(text.split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def parse_since(text: str, now: datetime, *, last_session: datetime | None = None) -> datetime:
    """Read ``since`` as a timestamp or relative phrase; raises ``InvalidRequest`` when unreadable.

    Understands RFC 3339 / ISO dates, ``2 days``, ``3 hours ago``, ``last week``, ``yesterday`` and
    the other phrases of the planner's time reader; ``last session`` needs ``last_session``.
    """
    now = ensure_utc(now)
    phrase = " ".join(text.strip().lower().split())
    if phrase in {"last session", "previous session", "since last session"}:
        if last_session is None:
            raise InvalidRequest("no earlier session summary is stored; give a time such as '1 day'")
        return ensure_utc(last_session)
    moment = _read_moment(text.strip(), phrase, now)
    if moment is None:
        raise InvalidRequest(
            f"cannot read {text!r} as a time: use an RFC 3339 timestamp, '2 days', 'yesterday' "
            "or 'last session'"
        )
    if moment > now:
        raise InvalidRequest(f"since ({format_timestamp(moment)}) lies in the future")
    return moment


def _read_moment(raw: str, phrase: str, now: datetime) -> datetime | None:
    try:
        return parse_timestamp(raw)
    except TimestampOutOfRange:
        raise
    except ValueError:
        pass
    duration = _DURATION.match(phrase)
    if duration:
        count_text = duration.group("count") or "1"
        count = int(count_text) if count_text.isdigit() else _WORDS[count_text]
        try:
            return ensure_utc(now - count * _UNITS[duration.group("unit")])
        except OverflowError as exc:
            raise TimestampOutOfRange(f"{raw!r} is out of range (it reaches back before year 1)") from exc
    window = infer_time_window(phrase, now).window
    return window.start if window is not None else None


async def last_session_time(backend: MemoryBackend, now: datetime) -> datetime | None:
    """Just after the newest session summary was written (``None`` when there is none).

    A microsecond later, so "changes since last session" leaves out that session's own points.
    """
    records = await backend.recent(limit=1, filters=Filters(sources=(SESSION_SOURCE,)), now=now)
    return records[0].created_at + timedelta(microseconds=1) if records else None


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One change in a :class:`ChangeReport`."""

    kind: ChangeKind
    memory_id: str
    at: datetime
    summary: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "kind": self.kind.value,
            "memory_id": self.memory_id,
            "at": format_timestamp(self.at),
            "summary": self.summary,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class ChangeReport:
    """Changes since ``since`` (oldest first) and what could not be seen."""

    since: datetime
    until: datetime
    method: str
    events: tuple[ChangeEvent, ...]
    not_visible: tuple[str, ...] = ()

    def ids(self, kind: ChangeKind) -> list[str]:
        """Ids of the events of one kind, oldest first, each once."""
        return list(dict.fromkeys(event.memory_id for event in self.events if event.kind is kind))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "since": format_timestamp(self.since),
            "until": format_timestamp(self.until),
            "method": self.method,
            "added": self.ids(ChangeKind.ADDED),
            "updated": self.ids(ChangeKind.UPDATED),
            "superseded": self.ids(ChangeKind.SUPERSEDED),
            "forgotten": self.ids(ChangeKind.FORGOTTEN),
            "events": [event.to_dict() for event in self.events],
            "not_visible": list(self.not_visible),
        }


async def collect_changes(
    backend: MemoryBackend, since: datetime, now: datetime, *, entity: str | None = None, limit: int = 100
) -> ChangeReport:
    """What changed in ``[since, now]``, optionally only for memories naming ``entity``."""
    since, now = ensure_utc(since), ensure_utc(now)
    try:
        if backend.capabilities.change_log:
            events, notes = await _from_change_log(backend, since, now, entity, limit)
            method = "change_log"
        else:
            events, notes = await _reconstructed(backend, since, now, entity, limit)
            method = "reconstructed"
    except BackendError as exc:
        return ChangeReport(
            since,
            now,
            "unavailable",
            (),
            (f"the backend failed ({type(exc).__name__}); nothing could be listed",),
        )
    ordered = tuple(sorted(events, key=lambda event: (event.at, event.memory_id)))
    return ChangeReport(since, now, method, ordered, tuple(notes))


async def _from_change_log(
    backend: MemoryBackend, since: datetime, now: datetime, entity: str | None, limit: int
) -> tuple[list[ChangeEvent], list[str]]:
    changes = [change for change in await backend.changes(since, limit=limit) if change.at <= now]
    notes: list[str] = []
    if len(changes) >= limit:
        notes.append(f"only the first {limit} changes are listed; ask again with a later 'since'")
    if entity is None:
        return [_event(change) for change in changes], notes
    wanted = entity.casefold()
    kept = [c for c in changes if c.record and wanted in {name.casefold() for name in c.record.entities}]
    blind = sum(1 for change in changes if change.record is None)
    if blind:
        notes.append(
            f"{blind} change(s) carry no memory (e.g. forgotten ones) and could not be matched to {entity!r}"
        )
    return [_event(change) for change in kept], notes


def _event(change: Change) -> ChangeEvent:
    text = snippet(change.record.content) if change.record else ""
    return ChangeEvent(change.kind, change.memory_id, ensure_utc(change.at), text, change.detail)


async def _reconstructed(
    backend: MemoryBackend, since: datetime, now: datetime, entity: str | None, limit: int
) -> tuple[list[ChangeEvent], list[str]]:
    filters = Filters(entities=(entity,) if entity else (), time_range=TimeRange(start=since))
    added = await backend.recent(limit=limit, filters=filters, now=now)
    notes = [
        "this backend keeps no change log: forgotten memories and in-place updates are not visible",
    ]
    if len(added) >= limit:
        notes.append(f"more than {limit} memories were added; only the newest {limit} are listed")
    events = [
        ChangeEvent(ChangeKind.ADDED, record.id, record.created_at, snippet(record.content))
        for record in added
    ]
    if added and backend.capabilities.neighbors and backend.capabilities.supersedes:
        events.extend(await _supersessions(backend, added))
    elif added:
        notes.append("this backend cannot list supersedes edges: replaced memories are not visible")
    return events, notes


async def _supersessions(backend: MemoryBackend, added: Sequence[MemoryRecord]) -> list[ChangeEvent]:
    by_id = {record.id: record for record in added}
    neighbours = await backend.neighbors(list(by_id), edge_types=(EdgeType.SUPERSEDES,), hops=1, limit=500)
    events = []
    for neighbour in neighbours:
        edge = neighbour.edge
        replacer = by_id.get(edge.source)
        if replacer is None or edge.target != neighbour.record.id:
            continue
        at = edge.created_at or replacer.created_at
        detail = f"superseded by {replacer.id}"
        events.append(
            ChangeEvent(
                ChangeKind.SUPERSEDED,
                neighbour.record.id,
                ensure_utc(at),
                snippet(neighbour.record.content),
                detail,
            )
        )
    return events


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What an agent hands over at the end of a session."""

    session_id: str
    decisions: tuple[str, ...] = ()
    key_points: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WrittenPoint:
    """One session point as the write path handled it."""

    id: str
    category: str
    action: WriteAction
    duplicate_of: str | None
    content: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "id": self.id,
            "category": self.category,
            "action": self.action.value,
            "duplicate_of": self.duplicate_of,
            "content": self.content,
        }


@dataclass(frozen=True, slots=True)
class SessionReport:
    """The outcome of :func:`summarise_session`."""

    session_id: str
    session_entity: str
    written: tuple[WrittenPoint, ...]
    links_created: int
    dropped_duplicates: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form."""
        return {
            "session_id": self.session_id,
            "session_entity": self.session_entity,
            "written": [point.to_dict() for point in self.written],
            "links_created": self.links_created,
            "dropped_duplicates": list(self.dropped_duplicates),
            "warnings": list(self.warnings),
        }


def session_entity(session_id: str) -> str:
    """The entity name every memory of a session carries."""
    return f"session {session_id}"


def ordered_points(summary: SessionSummary) -> tuple[list[tuple[str, str]], list[str]]:
    """The points to store as ``(category, text)`` in narrative order (context, facts, decisions),
    without repeats, and the repeats dropped."""
    points: list[tuple[str, str]] = []
    seen: set[str] = set()
    dropped: list[str] = []
    groups = (("context", summary.context), ("fact", summary.key_points), ("decision", summary.decisions))
    for category, texts in groups:
        for text in texts:
            key = normalise_content(text)
            if not key:
                continue
            if key in seen:
                dropped.append(text)
                continue
            seen.add(key)
            points.append((category, text.strip()))
    return points, dropped


async def summarise_session(
    orchestrator: SearchesAndWrites, backend: MemoryBackend, summary: SessionSummary
) -> SessionReport:
    """Write the session's points through the write path and chain them in order with temporal edges."""
    entity = session_entity(summary.session_id)
    points, dropped = ordered_points(summary)
    entities = tuple(dict.fromkeys((entity, *summary.entities)))
    written: list[WrittenPoint] = []
    warnings: list[str] = []
    failure: BackendError | None = None
    for category, text in points:
        memory = NewMemory(
            content=text,
            category=category,
            importance=4 if category == "decision" else 3,
            tags=("session", summary.session_id),
            entities=entities,
            source=SESSION_SOURCE,
        )
        try:
            outcome = await orchestrator.write(WriteRequest(memory=memory))
        except BackendError as exc:
            warnings.append(f"not stored ({type(exc).__name__}): {snippet(text)}")
            failure = exc
            continue
        warnings.extend(outcome.warnings)
        written.append(WrittenPoint(outcome.id, category, outcome.action, outcome.duplicate_of, text))
    if failure is not None and not written:
        raise failure  # nothing was stored: that is a failure, not an empty success
    links, link_warnings = await _chain(backend, summary.session_id, [point.id for point in written])
    return SessionReport(
        summary.session_id, entity, tuple(written), links, tuple(dropped), (*warnings, *link_warnings)
    )


async def _chain(backend: MemoryBackend, session_id: str, ids: Sequence[str]) -> tuple[int, list[str]]:
    created = 0
    warnings: list[str] = []
    ordered = list(dict.fromkeys(ids))
    for position, (earlier, later) in enumerate(itertools.pairwise(ordered)):
        edge = Edge(
            earlier,
            later,
            EdgeType.TEMPORAL,
            1.0,
            metadata={"session": session_id, "order": str(position + 1)},
        )
        try:
            await backend.link(edge)
        except BackendError as exc:
            warnings.append(f"could not link {earlier} -> {later} ({type(exc).__name__})")
            continue
        created += 1
    return created, warnings
