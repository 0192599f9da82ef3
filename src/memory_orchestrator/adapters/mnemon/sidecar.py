"""What Mnemon cannot hold, kept by the adapter in files of its own beside (never inside) the store.

* A writer lock per store, across processes: Mnemon sets no busy timeout, so a second concurrent writer
  fails at once with ``database is locked``. Our writers queue on an ``flock`` instead.
* Memory metadata (Mnemon insights have no metadata field): a small SQLite file keyed by memory id.

Both live in ``<data_dir>/.orchestrator/``, a folder Mnemon does not use.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from memory_orchestrator.ports import BackendUnavailable
from memory_orchestrator.ports.file_lock import exclusive_file_lock

BACKEND = "mnemon"


def sidecar_dir(data_dir: Path) -> Path:
    """The adapter's own folder under Mnemon's data directory."""
    return data_dir / ".orchestrator"


def store_write_lock(path: Path, timeout_s: float) -> contextlib.AbstractAsyncContextManager[None]:
    """Hold an exclusive ``flock`` on ``path``; ``BackendUnavailable`` after ``timeout_s``."""
    return exclusive_file_lock(path, timeout_s, held="the Mnemon store", backend=BACKEND)


class MetadataFile:
    """``id -> metadata`` for one store, in ``<sidecar>/<store>.metadata.db``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: dict[str, dict[str, str]] | None = None
        self._stamp: float | None = None

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=5)
        db.execute("CREATE TABLE IF NOT EXISTS metadata (id TEXT PRIMARY KEY, value TEXT NOT NULL)")
        return db

    def all(self) -> Mapping[str, dict[str, str]]:
        """Every stored mapping (cached until the file changes)."""
        try:
            stamp = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return {}
        if self._cache is None or stamp != self._stamp:
            try:
                with contextlib.closing(self._connect()) as db:
                    rows = db.execute("SELECT id, value FROM metadata").fetchall()
            except sqlite3.Error as exc:
                raise BackendUnavailable(f"reading {self.path.name}: {exc}", backend=BACKEND) from exc
            self._cache = {str(key): json.loads(value) for key, value in rows}
            self._stamp = stamp
        return self._cache

    def put(self, items: Iterable[tuple[str, Mapping[str, str]]]) -> None:
        """Store metadata for new memories (empty mappings are not stored)."""
        rows = [(memory_id, json.dumps(dict(meta), sort_keys=True)) for memory_id, meta in items if meta]
        if not rows:
            return
        try:
            with contextlib.closing(self._connect()) as db, db:
                db.executemany("INSERT OR REPLACE INTO metadata (id, value) VALUES (?, ?)", rows)
        except sqlite3.Error as exc:
            raise BackendUnavailable(f"writing {self.path.name}: {exc}", backend=BACKEND) from exc
