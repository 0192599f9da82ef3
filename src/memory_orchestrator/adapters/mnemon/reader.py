"""Read-only access to a Mnemon store's database: a snapshot of its active memories, and graph hops.

Opened with a ``mode=ro`` URI and a busy timeout; nothing here ever writes. The schema version is checked
against the one this adapter was tested with. Mnemon stays the source of truth: the snapshot is rebuilt
whenever another connection committed (``PRAGMA data_version``) and the store's content changed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_orchestrator.adapters.mnemon.lexical import LexicalIndex
from memory_orchestrator.ports import (
    BackendRejected,
    BackendUnavailable,
    Change,
    ChangeKind,
    Edge,
    EdgeType,
    MemoryRecord,
    Neighbor,
    parse_timestamp,
)
from memory_orchestrator.ports.text import CONTEXT_WINDOW, content_hash

BACKEND = "mnemon"

#: ``PRAGMA user_version`` values this adapter was tested with (Mnemon v0.1.14).
TESTED_SCHEMA_VERSIONS = frozenset({1})
REQUIRED_COLUMNS = {
    "insights": {
        "id",
        "content",
        "category",
        "importance",
        "tags",
        "entities",
        "source",
        "created_at",
        "updated_at",
        "deleted_at",
    },
    "edges": {"source_id", "target_id", "edge_type", "weight", "metadata", "created_at"},
    "oplog": {"id", "operation", "insight_id", "detail", "created_at"},
}

#: How a supersession is recorded in Mnemon, which has no ``supersedes`` edge type at v0.1.14: a
#: weight-0 semantic link (so Mnemon's own traversal gains nothing from it) whose metadata names it.
SUPERSEDES_KEY = "orchestrator_relation"
SUPERSEDES_VALUE = "supersedes"
REPLACES_KEY = "replaces"

#: Operations that read: they never change what the snapshot holds.
_READ_OPERATIONS = ("recall", "recall:basic", "search", "show", "embed", "embed:backfill", "gc_keep")

_MEMORY_SQL = (
    "SELECT id, content, category, importance, tags, entities, source, created_at, updated_at "
    "FROM insights WHERE deleted_at IS NULL"
)


def _json_list(text: Any) -> tuple[str, ...]:
    try:
        value = json.loads(text or "[]")
    except (TypeError, ValueError):
        return ()
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _json_map(text: Any) -> dict[str, str]:
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def is_supersedes_marker(metadata: Mapping[str, str]) -> bool:
    """True for the semantic link that records a supersession."""
    return metadata.get(SUPERSEDES_KEY) == SUPERSEDES_VALUE and bool(metadata.get(REPLACES_KEY))


@dataclass
class Snapshot:
    """The active memories of a store at one moment, with what the adapter derives from them."""

    records: dict[str, MemoryRecord] = field(default_factory=dict)
    by_hash: dict[str, str] = field(default_factory=dict)
    entity_uses: Counter[str] = field(default_factory=Counter)
    spellings: dict[str, str] = field(default_factory=dict)
    index: LexicalIndex = field(default_factory=LexicalIndex)

    def newest_first(self) -> list[MemoryRecord]:
        """Active memories, newest first, ties by id."""
        return sorted(self.records.values(), key=lambda record: (record.created_at, record.id), reverse=True)


def _record(
    row: Sequence[Any], superseded_by: Mapping[str, list[str]], metadata: Mapping[str, Any]
) -> MemoryRecord:
    memory_id = str(row[0])
    return MemoryRecord(
        id=memory_id,
        content=str(row[1]),
        created_at=parse_timestamp(str(row[7])),
        updated_at=parse_timestamp(str(row[8])),
        category=str(row[2] or "general"),
        importance=int(row[3] or 3),
        tags=_json_list(row[4]),
        entities=_json_list(row[5]),
        source=str(row[6] or "user"),
        metadata=metadata.get(memory_id) or {},
        superseded_by=tuple(sorted(superseded_by.get(memory_id, ()))),
    )


class StoreReader:
    """One read-only connection to ``<data_dir>/data/<store>/mnemon.db``, shared under a lock."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 2000) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._data_version: int | None = None
        self._signature: tuple[Any, ...] | None = None
        self.schema_version: int | None = None

    def open(self) -> None:
        """Connect read-only and check the schema; ``BackendRejected`` on a schema we were not tested with."""
        if self._db is not None:
            return
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        try:
            db = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=self.busy_timeout_ms / 1000)
            db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms):d}")
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            columns = {
                table: {str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")}
                for table in REQUIRED_COLUMNS
            }
        except sqlite3.Error as exc:
            raise BackendUnavailable(
                f"cannot read the Mnemon database {self.path}: {exc}", backend=BACKEND
            ) from exc
        missing = {
            table: sorted(need - columns[table])
            for table, need in REQUIRED_COLUMNS.items()
            if need - columns[table]
        }
        if version not in TESTED_SCHEMA_VERSIONS or missing:
            db.close()
            raise BackendRejected(
                f"Mnemon database schema version {version} is not one this adapter was tested with "
                f"({', '.join(map(str, sorted(TESTED_SCHEMA_VERSIONS)))})"
                + (f"; missing columns {missing}" if missing else ""),
                backend=BACKEND,
            )
        self.schema_version = version
        self._db = db

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            db, self._db = self._db, None
            if db is not None:
                db.close()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self._db is None:
            raise BackendUnavailable("the Mnemon backend is not open", backend=BACKEND)
        try:
            with self._lock:
                return self._db.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"reading the Mnemon database: {exc}", backend=BACKEND) from exc

    # -- the snapshot -----------------------------------------------------------------------------

    def changed(self) -> bool:
        """True when the store's content may differ from the last snapshot (cheap: one pragma)."""
        version = int(self._rows("PRAGMA data_version")[0][0])
        if version == self._data_version:
            return False
        self._data_version = version
        marks = ",".join("?" * len(_READ_OPERATIONS))
        signature = tuple(
            self._rows(
                f"SELECT (SELECT max(id) FROM oplog WHERE operation NOT IN ({marks})), "
                "(SELECT count(*) FROM insights WHERE deleted_at IS NULL), "
                "(SELECT max(updated_at) FROM insights), (SELECT count(*) FROM edges)",
                _READ_OPERATIONS,
            )[0]
        )
        if signature == self._signature:
            return False
        self._signature = signature
        return True

    def snapshot(self, metadata: Mapping[str, Any]) -> Snapshot:
        """Read every active memory and the supersession marks; build the derived indexes."""
        superseded_by: dict[str, list[str]] = defaultdict(list)
        for source, target, meta in self._rows(
            "SELECT source_id, target_id, metadata FROM edges "
            "WHERE edge_type = 'semantic' AND metadata LIKE ?",
            (f'%"{SUPERSEDES_KEY}"%',),
        ):
            parsed = _json_map(meta)
            if is_supersedes_marker(parsed) and parsed[REPLACES_KEY] == target:
                superseded_by[str(target)].append(str(source))
        snap = Snapshot()
        for row in self._rows(_MEMORY_SQL):
            record = _record(row, superseded_by, metadata)
            snap.records[record.id] = record
            snap.by_hash.setdefault(content_hash(record.content), record.id)
            for name in dict.fromkeys(entity.casefold() for entity in record.entities):
                snap.entity_uses[name] += 1
            for entity in record.entities:
                snap.spellings.setdefault(entity.casefold(), entity)
        snap.index = LexicalIndex.build(_documents(list(snap.records.values())))
        return snap

    # -- graph ------------------------------------------------------------------------------------

    def hop(self, frontier: Sequence[str], kinds: Collection[EdgeType]) -> list[Edge]:
        """Every edge touching ``frontier`` of the given kinds, in one query (both stored directions)."""
        stored = sorted(
            {EdgeType.SEMANTIC.value if kind is EdgeType.SUPERSEDES else kind.value for kind in kinds}
        )
        ids = json.dumps(list(frontier))
        rows = self._rows(
            "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges "
            "WHERE edge_type IN (SELECT value FROM json_each(?)) AND ("
            "source_id IN (SELECT value FROM json_each(?)) OR target_id IN (SELECT value FROM json_each(?)))",
            (json.dumps(stored), ids, ids),
        )
        edges = []
        for source, target, kind, weight, meta, created in rows:
            parsed = _json_map(meta)
            if kind == EdgeType.SEMANTIC.value and is_supersedes_marker(parsed):
                if EdgeType.SUPERSEDES not in kinds or parsed[REPLACES_KEY] != target:
                    continue
                edge_type = EdgeType.SUPERSEDES
            elif EdgeType(kind) not in kinds:
                continue
            else:
                edge_type = EdgeType(kind)
            edges.append(
                Edge(
                    str(source), str(target), edge_type, float(weight), parsed, parse_timestamp(str(created))
                )
            )
        return edges

    def oplog(self, since: str, limit: int) -> list[tuple[int, str, str, str, str]]:
        """Oplog rows that change memories, at or after ``since`` (RFC 3339, second precision)."""
        rows = self._rows(
            "SELECT id, operation, insight_id, detail, created_at FROM oplog WHERE created_at >= ? "
            "AND operation IN ('remember', 'import', 'forget', 'link', 'diff-replace', 'import-replace', "
            "'prune') "
            "ORDER BY id LIMIT ?",
            (since, limit * 4),
        )
        return [(int(r[0]), str(r[1]), str(r[2] or ""), str(r[3] or ""), str(r[4])) for r in rows]

    def superseded_targets(self, source: str) -> list[str]:
        """Memories that ``source`` supersedes, as recorded by the marker links."""
        rows = self._rows(
            "SELECT target_id, metadata FROM edges "
            "WHERE source_id = ? AND edge_type = 'semantic' AND metadata LIKE ?",
            (source, f'%"{SUPERSEDES_KEY}"%'),
        )
        return [str(target) for target, meta in rows if _json_map(meta).get(REPLACES_KEY) == target]

    def edge_counts(self, ids: Sequence[str]) -> dict[str, Counter[str]]:
        """Per memory of ``ids`` (in write order), how many other memories each edge type joins it to
        (one query), leaving out the memories of ``ids`` written after it: those edges were made by
        the later write, and a batch reports each edge once, as one write at a time does."""
        order = {memory_id: position for position, memory_id in enumerate(ids)}
        rows = self._rows(
            "SELECT DISTINCT id, other, edge_type FROM ("
            "SELECT source_id AS id, target_id AS other, edge_type FROM edges "
            "WHERE source_id IN (SELECT value FROM json_each(?)) UNION ALL "
            "SELECT target_id, source_id, edge_type FROM edges "
            "WHERE target_id IN (SELECT value FROM json_each(?)))",
            (json.dumps(list(ids)), json.dumps(list(ids))),
        )
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for memory_id, other, kind in rows:
            if order.get(str(other), -1) < order[str(memory_id)]:
                counts[str(memory_id)][str(kind)] += 1
        return counts

    def memory_count(self) -> tuple[int, int]:
        """(active memories, edges)."""
        row = self._rows(
            "SELECT (SELECT count(*) FROM insights WHERE deleted_at IS NULL), (SELECT count(*) FROM edges)"
        )[0]
        return int(row[0]), int(row[1])


def walk(
    reader: StoreReader,
    snap: Snapshot,
    ids: Sequence[str],
    kinds: Collection[EdgeType],
    hops: int,
    limit: int,
    admits: Any,
) -> list[Neighbor]:
    """Breadth-first expansion from ``ids``: one query per hop for the whole frontier.

    Mnemon stores symmetric edges twice (once each way); a reached memory appears once per edge type,
    with its strongest edge, shown oldest end first.
    """
    frontier = [memory_id for memory_id in dict.fromkeys(ids) if memory_id in snap.records]
    visited = set(ids)
    found: list[Neighbor] = []
    for hop in range(1, hops + 1):
        if not frontier:
            break
        best: dict[tuple[str, EdgeType], tuple[Edge, str]] = {}
        members = set(frontier)
        for edge in reader.hop(frontier, kinds):
            for origin, other in ((edge.source, edge.target), (edge.target, edge.source)):
                if origin not in members or other in visited or other not in snap.records:
                    continue
                if not admits(snap.records[other]):
                    continue
                key = (other, edge.type)
                shown = _oriented(edge, snap)
                current = best.get(key)
                if current is None or (shown.weight, current[1]) > (current[0].weight, origin):
                    best[key] = (shown, origin)
        ranked = sorted(best.items(), key=lambda item: (-item[1][0].weight, item[0][0], item[0][1].value))[
            :limit
        ]
        reached = [Neighbor(snap.records[other], edge, origin, hop) for (other, _), (edge, origin) in ranked]
        found.extend(reached)
        frontier = list(dict.fromkeys(item.record.id for item in reached))
        visited.update(frontier)
    found.sort(key=lambda item: (-item.edge.weight, item.hops, item.record.id, item.edge.type.value))
    return found[:limit]


def _oriented(edge: Edge, snap: Snapshot) -> Edge:
    """Symmetric edges are stored both ways by Mnemon: show them older memory first (causal and
    supersedes keep their stored direction)."""
    if edge.type in (EdgeType.CAUSAL, EdgeType.SUPERSEDES):
        return edge
    source, target = snap.records.get(edge.source), snap.records.get(edge.target)
    if source is None or target is None:
        return edge
    if (target.created_at, target.id) < (source.created_at, source.id):
        return Edge(edge.target, edge.source, edge.type, edge.weight, edge.metadata, edge.created_at)
    return edge


def changes_from(reader: StoreReader, snap: Snapshot, since: datetime, limit: int) -> list[Change]:
    """Mnemon's oplog as port changes, oldest first."""
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    found: list[Change] = []
    for _, operation, memory_id, detail, at in reader.oplog(stamp, limit):
        moment = parse_timestamp(at)
        if moment < since.replace(microsecond=0):
            continue
        if operation in ("remember", "import"):
            found.append(Change(ChangeKind.ADDED, memory_id, moment, snap.records.get(memory_id)))
        elif operation in ("forget", "prune"):
            found.append(Change(ChangeKind.FORGOTTEN, memory_id, moment, None, detail))
        elif operation in ("diff-replace", "import-replace"):
            found.append(Change(ChangeKind.UPDATED, memory_id, moment, snap.records.get(memory_id), detail))
        elif operation == "link":
            found.extend(_supersessions(reader, snap, memory_id, detail, moment))
    return found[:limit]


def _supersessions(
    reader: StoreReader, snap: Snapshot, source: str, detail: str, moment: datetime
) -> Iterable[Change]:
    # The link row names "<source 8>→<target 8> type=semantic ..."; a marker link is a supersession.
    if "type=semantic" not in detail or "→" not in detail:
        return []
    prefix = detail.split("→", 1)[1].split(" ", 1)[0]
    return [
        Change(ChangeKind.SUPERSEDED, target, moment, snap.records.get(target), f"superseded by {source}")
        for target in reader.superseded_targets(source)
        if target.startswith(prefix)
    ]


def _documents(records: list[MemoryRecord]) -> Iterable[tuple[str, str, str]]:
    """``(id, text, context)`` per memory; the context is the memories just before and after it in
    time that another source wrote within ``CONTEXT_WINDOW`` (the turns around a conversation turn)."""
    records.sort(key=lambda record: (record.created_at, record.id))
    for index, record in enumerate(records):
        around = [records[i] for i in (index - 1, index + 1) if 0 <= i < len(records)]
        context = " ".join(
            other.content
            for other in around
            if other.source != record.source and abs(other.created_at - record.created_at) <= CONTEXT_WINDOW
        )
        yield record.id, " ".join((record.content, *record.tags, *record.entities)), context
