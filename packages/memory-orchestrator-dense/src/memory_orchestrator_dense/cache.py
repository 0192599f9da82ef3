"""An embedding cache: vectors of texts embedded before, keyed by a hash of the model and the text.

Embedding is the channel's whole indexing cost (a context document is three turns long). The same
texts are embedded again whenever a store is rebuilt from the same data: an evaluation ingests every
conversation into a fresh backend, each run. A vector depends only on the model and the text, so a
content-hash keyed file answers those repeats without the model. It is opt-in (``cache_dir``
option or ``ORCHESTRATOR_DENSE_CACHE``): a serving process keeps its vectors in the backend anyway.

The file is SQLite (one table, ``key -> vector bytes``); concurrent processes may share it. A
vector of the wrong length (another model under the same space name) is ignored and embedded anew.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

#: The cache file inside the cache directory.
FILE_NAME = "embeddings.sqlite"
#: Keys per ``SELECT ... IN (...)`` (SQLite's default variable limit is 32766; stay well below).
LOOKUP_CHUNK = 500


class TextEmbedder(Protocol):
    """What the cache wraps: a model that turns texts into unit vectors."""

    space: str
    dimensions: int
    query_prefix: str
    passage_prefix: str
    temperature: float

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text."""
        ...


class CachedEmbedder:
    """``embedder`` with a content-hash keyed vector file in front of it (see the module docstring)."""

    def __init__(self, embedder: TextEmbedder, directory: Path) -> None:
        self.embedder = embedder
        self.space = embedder.space
        self.dimensions = embedder.dimensions
        self.query_prefix = embedder.query_prefix
        self.passage_prefix = embedder.passage_prefix
        self.temperature = embedder.temperature
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / FILE_NAME
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._connection:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)"
            )
        #: Texts answered from the file / embedded by the model, since this object was made.
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text: from the file where it has one, else from the model (stored)."""
        keys = [self._key(text) for text in texts]
        found = self._lookup(keys)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        missing: list[int] = []
        for row, key in enumerate(keys):
            vector = found.get(key)
            if vector is None:
                missing.append(row)
            else:
                out[row] = vector
        if missing:
            fresh = self.embedder.embed([texts[row] for row in missing])
            out[missing] = fresh
            self._store([(keys[row], fresh[i]) for i, row in enumerate(missing)])
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return out

    def close(self) -> None:
        """Close the file (the object is unusable afterwards)."""
        with self._lock:
            self._connection.close()

    def _key(self, text: str) -> bytes:
        # the space names the model (and how its vectors are made); the text is the rest
        return hashlib.sha256(f"{self.space}\x00{text}".encode()).digest()

    def _lookup(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), LOOKUP_CHUNK):
                chunk = unique[start : start + LOOKUP_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._connection.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk
                ).fetchall()
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self.dimensions,):
                        found[key] = vector
        return found

    def _store(self, pairs: Sequence[tuple[bytes, np.ndarray]]) -> None:
        rows = [(key, np.asarray(vector, dtype=np.float32).tobytes()) for key, vector in pairs]
        with self._lock, self._connection:
            self._connection.executemany("INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)", rows)
