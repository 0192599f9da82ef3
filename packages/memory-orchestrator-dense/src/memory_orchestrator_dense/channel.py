"""The dense retrieval channel: cosine similarity of MiniLM vectors, kept in the backend.

On each search the channel first catches up: memories stored since its last look get vectors
(embedded here, stored through the backend's ``VectorStore`` methods, so every process and every
restart shares them), then vectors stored by anyone since its cursor join an in-process matrix. The
search itself is one matrix-vector product (brute force is fine up to about 100k memories). The
catch-up per search is bounded (``index_batch``); :meth:`DenseChannel.index` indexes everything at
once (after a bulk import, say) and reports the throughput.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from memory_orchestrator.ports import (
    Filters,
    Hit,
    InvalidRequest,
    MemoryBackend,
    VectorStore,
    stores_vectors,
)
from memory_orchestrator_dense.embedder import DIMENSIONS, MiniLmEmbedder

#: Vectors loaded from the backend per round trip.
PAGE = 5000
#: The temperature all-MiniLM-L6-v2 was trained with (sentence-transformers' contrastive loss scales
#: cosine similarity by 20). A hit's score is ``exp((cosine - best cosine) / TEMPERATURE)``: the
#: model's own odds of that memory against the best one. Raw cosines are compressed near the top
#: (0.62 vs 0.55), which the pipeline's fusion would read as "almost as strong as the best".
TEMPERATURE = 0.05


class Embedder(Protocol):
    """What the channel needs of a model."""

    space: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text."""
        ...


@dataclass(slots=True)
class _Index:
    """The vectors of one backend seen so far."""

    cursor: int = 0
    ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, DIMENSIONS), dtype=np.float32))
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def add(self, pairs: Sequence[tuple[str, bytes]], dimensions: int) -> None:
        fresh_ids: list[str] = []
        fresh: list[np.ndarray] = []
        for memory_id, blob in pairs:
            vector = np.frombuffer(blob, dtype=np.float32)
            if vector.shape != (dimensions,):
                continue  # a vector of another shape cannot be compared; it is skipped, not fatal
            row = self.rows.get(memory_id)
            if row is not None:
                self.matrix[row] = vector
                continue
            self.rows[memory_id] = len(self.ids) + len(fresh_ids)
            fresh_ids.append(memory_id)
            fresh.append(vector)
        if fresh:
            self.ids.extend(fresh_ids)
            self.matrix = np.vstack([self.matrix, np.stack(fresh)])


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What :meth:`DenseChannel.index` did."""

    embedded: int
    seconds: float

    @property
    def per_second(self) -> float:
        """Memories embedded and stored per second."""
        return self.embedded / self.seconds if self.seconds > 0 else 0.0


class DenseChannel:
    """A ``RetrievalChannel`` over MiniLM vectors (see the module docstring)."""

    def __init__(self, embedder: Embedder, *, name: str = "dense", index_batch: int = 256) -> None:
        self.name = name
        self.embedder = embedder
        self.index_batch = index_batch
        self._indexes: weakref.WeakKeyDictionary[object, _Index] = weakref.WeakKeyDictionary()

    def supports(self, backend: MemoryBackend) -> bool:
        """The backend must keep vectors (``Capabilities.vector_search`` and ``VectorStore``)."""
        return stores_vectors(backend)

    async def search(
        self, backend: MemoryBackend, text: str, *, limit: int, filters: Filters, now: datetime
    ) -> list[Hit]:
        """Memories most similar to ``text``; the domain re-applies ``filters`` and ``now``."""
        store = self._store(backend)
        index = self._indexes.setdefault(backend, _Index())
        async with index.lock:
            await self._embed_missing(store, rounds=1)
            await self._load(store, index)
        if not index.ids:
            return []
        query = await asyncio.to_thread(self.embedder.embed, [text])
        scores = index.matrix @ query[0]
        # Ask for more than the limit: forgotten memories and filtered ones drop out below.
        wanted = min(len(index.ids), limit * 2)
        top = np.argpartition(-scores, wanted - 1)[:wanted]
        ranked = sorted(top.tolist(), key=lambda row: (-float(scores[row]), index.ids[row]))
        records = {record.id: record for record in await backend.get([index.ids[row] for row in ranked])}
        hits: list[Hit] = []
        best = float(scores[ranked[0]]) if ranked else 0.0
        for row in ranked:
            record = records.get(index.ids[row])
            if record is None or record.created_at > now or not filters.admits(record):
                continue
            cosine = float(scores[row])
            score = round(float(np.exp((cosine - best) / TEMPERATURE)), 6)
            hits.append(Hit(record, score, via=self.name, signals={"cosine": round(cosine, 6)}))
            if len(hits) == limit:
                break
        return hits

    async def index(self, backend: MemoryBackend) -> IndexReport:
        """Embed every memory that has no vector yet; returns how many and how fast."""
        store = self._store(backend)
        started = time.perf_counter()
        index = self._indexes.setdefault(backend, _Index())
        async with index.lock:
            embedded = await self._embed_missing(store, rounds=None)
            await self._load(store, index)
        return IndexReport(embedded, time.perf_counter() - started)

    def _store(self, backend: MemoryBackend) -> VectorStore:
        if not stores_vectors(backend):
            raise InvalidRequest(f"backend {backend.name} does not store vectors")
        assert isinstance(backend, VectorStore)
        return backend

    async def _embed_missing(self, store: VectorStore, *, rounds: int | None) -> int:
        done = 0
        while rounds is None or rounds > 0:
            records = await store.without_vectors(self.embedder.space, limit=self.index_batch)
            if not records:
                break
            vectors = await asyncio.to_thread(self.embedder.embed, [record.content for record in records])
            pairs = [(record.id, vectors[row].tobytes()) for row, record in enumerate(records)]
            done += await store.put_vectors(self.embedder.space, pairs)
            if rounds is not None:
                rounds -= 1
        return done

    async def _load(self, store: VectorStore, index: _Index) -> None:
        while True:
            page = await store.vectors_after(self.embedder.space, index.cursor, limit=PAGE)
            if not page.rows:
                return
            index.add(page.rows, self.embedder.dimensions)
            index.cursor = page.cursor


def create_channel(options: Mapping[str, Any]) -> DenseChannel:
    """The registered factory: options ``index_batch`` (memories embedded per search, default 256)
    and ``threads`` (onnxruntime threads, 0 = its default)."""
    unknown = sorted(set(options) - {"index_batch", "threads"})
    if unknown:
        raise InvalidRequest(f"unknown option(s) for the dense channel: {', '.join(unknown)}")
    batch = options.get("index_batch", 256)
    threads = options.get("threads", 0)
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 10_000:
        raise InvalidRequest("channels.options.dense.index_batch must be an integer from 1 to 10000")
    if not isinstance(threads, int) or isinstance(threads, bool) or not 0 <= threads <= 64:
        raise InvalidRequest("channels.options.dense.threads must be an integer from 0 to 64")
    return DenseChannel(MiniLmEmbedder(threads=threads), index_batch=batch)
