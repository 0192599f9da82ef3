"""What the knowledge-graph server cannot hold, kept in a small SQLite file beside its memory file.

The server stores entities, their observations (plain strings) and named relations, nothing else. The
sidecar ``<memory file stem>.orchestrator.db`` keeps per memory id: which observation it is (entity
and text), ``created_at`` / ``updated_at``, category, importance, tags, entities, source, metadata
and ``forgotten_at``; the memory-to-memory edges (automatic edges, ``link`` with its weight and
metadata, supersession); and the change log. A writer lock (``flock`` on ``<stem>.orchestrator.lock``)
serialises writers across processes.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from memory_orchestrator.ports import BackendUnavailable, Change, ChangeKind, Edge, EdgeType
from memory_orchestrator.ports.file_lock import exclusive_file_lock

BACKEND = "mcp_kg"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY, entity TEXT NOT NULL, text TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, category TEXT NOT NULL,
    importance INTEGER NOT NULL, tags TEXT NOT NULL, entities TEXT NOT NULL, source TEXT NOT NULL,
    metadata TEXT NOT NULL, adopted INTEGER NOT NULL, forgotten_at TEXT);
CREATE INDEX IF NOT EXISTS memories_observation ON memories (entity, text);
CREATE TABLE IF NOT EXISTS edges (
    source TEXT NOT NULL, target TEXT NOT NULL, type TEXT NOT NULL, weight REAL NOT NULL,
    metadata TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (source, target, type));
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, memory_id TEXT NOT NULL,
    at TEXT NOT NULL, detail TEXT NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Row:
    """One memory as the sidecar holds it (``adopted``: first seen in the graph, not written by us)."""

    id: str
    entity: str
    text: str
    created_at: datetime
    updated_at: datetime
    category: str = "general"
    importance: int = 3
    tags: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    source: str = "user"
    metadata: dict[str, str] = field(default_factory=dict)
    adopted: bool = False
    forgotten_at: datetime | None = None


def sidecar_paths(memory_file: Path) -> tuple[Path, Path]:
    """``(database, lock file)`` beside ``memory_file``."""
    stem = memory_file.with_suffix("")
    return stem.with_name(f"{stem.name}.orchestrator.db"), stem.with_name(f"{stem.name}.orchestrator.lock")


def writer_lock(path: Path, timeout_s: float) -> contextlib.AbstractAsyncContextManager[None]:
    """Hold an exclusive ``flock`` on ``path``; ``BackendUnavailable`` after ``timeout_s``."""
    return exclusive_file_lock(path, timeout_s, held="the knowledge graph", backend=BACKEND)


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _row(values: tuple[object, ...]) -> Row:
    (memory_id, entity, text, created, updated, category, importance, tags, entities, source, meta) = values[
        :11
    ]
    adopted, forgotten = values[11], values[12]
    return Row(
        str(memory_id),
        str(entity),
        str(text),
        datetime.fromisoformat(str(created)),
        datetime.fromisoformat(str(updated)),
        str(category),
        int(str(importance)),
        tuple(json.loads(str(tags))),
        tuple(json.loads(str(entities))),
        str(source),
        dict(json.loads(str(meta))),
        bool(adopted),
        _when(str(forgotten) if forgotten else None),
    )


def _row_values(row: Row) -> tuple[object, ...]:
    return (
        row.id,
        row.entity,
        row.text,
        row.created_at.isoformat(),
        row.updated_at.isoformat(),
        row.category,
        row.importance,
        json.dumps(list(row.tags)),
        json.dumps(list(row.entities)),
        row.source,
        json.dumps(row.metadata, sort_keys=True),
        int(row.adopted),
        row.forgotten_at.isoformat() if row.forgotten_at else None,
    )


class Sidecar:
    """The sidecar database of one memory file (one connection, opened by :meth:`open`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self.writes = 0
        # Rows and edges as last read, kept in step with our own writes; read again only when
        # another connection committed (``data_version`` moved), so a write does not re-read the file.
        self._rows: dict[str, Row] | None = None
        self._edges: dict[tuple[str, str, str], Edge] | None = None
        self._loaded_version = -1

    def open(self) -> None:
        """Create the file and its tables if missing."""
        if self._db is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
            db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"opening {self.path.name}: {exc}", backend=BACKEND) from exc
        self._db = db

    def close(self) -> None:
        """Close the connection. Idempotent."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._rows = self._edges = None

    @property
    def db(self) -> sqlite3.Connection:
        """The open connection."""
        if self._db is None:
            self.open()
        assert self._db is not None
        return self._db

    def version(self) -> tuple[int, int]:
        """Changes by other connections (``data_version``) and by this one: equal means unchanged."""
        return int(self.db.execute("PRAGMA data_version").fetchone()[0]), self.writes

    def _load(self) -> None:
        version = int(self.db.execute("PRAGMA data_version").fetchone()[0])
        if self._rows is not None and self._edges is not None and version == self._loaded_version:
            return
        rows = [_row(values) for values in self.db.execute("SELECT * FROM memories ORDER BY rowid")]
        self._rows = {row.id: row for row in rows}
        self._edges = {}
        for source, target, kind, weight, meta, created in self.db.execute("SELECT * FROM edges"):
            edge = Edge(source, target, EdgeType(kind), float(weight), json.loads(meta), _when(created))
            self._edges[(source, target, kind)] = edge
        self._loaded_version = version

    def rows(self) -> list[Row]:
        """Every memory ever recorded, forgotten ones included, oldest record first."""
        self._load()
        assert self._rows is not None
        return list(self._rows.values())

    def edges(self) -> list[Edge]:
        """Every stored memory-to-memory edge."""
        self._load()
        assert self._edges is not None
        return list(self._edges.values())

    def _remember(
        self, rows: Sequence[Row], edges: Sequence[Edge], forgotten: Sequence[tuple[str, datetime]]
    ) -> None:
        """Apply a committed write to the cached rows and edges (as the SQL did)."""
        if self._rows is None or self._edges is None:
            return
        for row in rows:
            self._rows[row.id] = row
        for edge in edges:
            if edge.type is not EdgeType.SUPERSEDES:
                self._edges.pop((edge.target, edge.source, edge.type.value), None)
            self._edges[(edge.source, edge.target, edge.type.value)] = edge
        for memory_id, at in forgotten:
            if memory_id in self._rows:
                self._rows[memory_id] = replace(self._rows[memory_id], forgotten_at=at)

    def changes(self, since: datetime, limit: int) -> list[Change]:
        """Logged changes at or after ``since``, oldest first."""
        rows = self.db.execute("SELECT kind, memory_id, at, detail FROM changes ORDER BY seq").fetchall()
        found = [
            Change(ChangeKind(kind), memory_id, datetime.fromisoformat(at), detail=detail)
            for kind, memory_id, at, detail in rows
        ]
        return [change for change in found if change.at >= since][:limit]

    def write(
        self,
        *,
        rows: Sequence[Row] = (),
        edges: Iterable[Edge] = (),
        changes: Iterable[Change] = (),
        forgotten: Iterable[tuple[str, datetime]] = (),
    ) -> None:
        """Insert or replace rows and edges, mark memories forgotten and log changes, in one transaction.

        A non-``supersedes`` edge replaces the same pair stored the other way round (edges are
        symmetric for traversal), an earlier edge of the same write included.
        """
        edges, forgotten = list(edges), list(forgotten)
        edge_rows = [
            (e.source, e.target, e.type.value, e.weight, json.dumps(dict(e.metadata), sort_keys=True),
             (e.created_at.isoformat() if e.created_at else ""))
            for e in edges
        ]  # fmt: skip
        try:
            with self.db:
                self.db.executemany(
                    "INSERT OR REPLACE INTO memories VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    [_row_values(row) for row in rows],
                )
                # in order, as the cache applies them (_remember): a later edge replaces an earlier
                # one of the same pair stored the other way round
                for edge_row in edge_rows:
                    source, target, kind = edge_row[:3]
                    if kind != EdgeType.SUPERSEDES.value:
                        self.db.execute(
                            "DELETE FROM edges WHERE source=? AND target=? AND type=?", (target, source, kind)
                        )
                    self.db.execute("INSERT OR REPLACE INTO edges VALUES (?,?,?,?,?,?)", edge_row)
                self.db.executemany(
                    "UPDATE memories SET forgotten_at=? WHERE id=?",
                    [(at.isoformat(), memory_id) for memory_id, at in forgotten],
                )
                self.db.executemany(
                    "INSERT INTO changes (kind, memory_id, at, detail) VALUES (?,?,?,?)",
                    [(c.kind.value, c.memory_id, c.at.isoformat(), c.detail) for c in changes],
                )
        except sqlite3.Error as exc:
            self._rows = self._edges = None
            raise BackendUnavailable(f"writing {self.path.name}: {exc}", backend=BACKEND) from exc
        finally:
            self.writes += 1
        self._remember(rows, edges, forgotten)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove rows, their edges and their changes (undoes a write the server then refused)."""
        marks = ",".join("?" * len(ids))
        with self.db:
            self.db.execute(f"DELETE FROM memories WHERE id IN ({marks})", list(ids))
            self.db.execute(
                f"DELETE FROM edges WHERE source IN ({marks}) OR target IN ({marks})",
                [*ids, *ids],
            )
            self.db.execute(f"DELETE FROM changes WHERE memory_id IN ({marks})", list(ids))
        self.writes += 1
        self._rows = self._edges = None
