"""The Mnemon backend: writes and Mnemon's own recall through its CLI, everything else read-only.

Mnemon is the source of truth and we never write its files. Writes go through ``mnemon remember`` (or an
``import`` draft when a memory is back-dated: the only way Mnemon takes a past ``created_at``), ``link``
and ``forget``, serialised per store across processes. Reads that the CLI lacks or makes slow (get,
neighbours, recent, changes, keyword search with stemming, known entities) come from a read-only
snapshot of its database, rebuilt whenever the store changed.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_orchestrator.adapters.mnemon import reader as store_reader
from memory_orchestrator.adapters.mnemon.binary import BinaryInfo
from memory_orchestrator.adapters.mnemon.cli import Transport
from memory_orchestrator.adapters.mnemon.reader import (
    REPLACES_KEY,
    SUPERSEDES_KEY,
    SUPERSEDES_VALUE,
    Snapshot,
    StoreReader,
)
from memory_orchestrator.adapters.mnemon.recall import recall_hits
from memory_orchestrator.adapters.mnemon.sidecar import MetadataFile, store_write_lock
from memory_orchestrator.adapters.mnemon.writes import (
    Stored,
    draft,
    imported,
    needs_draft,
    remember_args,
    remembered,
)
from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    Capabilities,
    Change,
    Edge,
    EdgeType,
    Filters,
    HealthCheck,
    Hit,
    MemoryRecord,
    Neighbor,
    NewMemory,
    NotFound,
    RecallQuery,
    SystemClock,
    WriteAction,
    WriteResult,
    ensure_utc,
)
from memory_orchestrator.ports.autolinks import link_candidates, sketch
from memory_orchestrator.ports.commit_counter import CommitCounter
from memory_orchestrator.ports.text import content_hash
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)

#: Mnemon's compiled store cap (active memories); above it every write prunes low-importance ones.
STORE_CAP = 1000
CAP_WARNING_SHARE = 0.9


class MnemonBackend(AsyncLifecycle):
    """A ``MemoryBackend`` over one Mnemon store."""

    name = "mnemon"

    def __init__(
        self,
        transport: Transport,
        binary: BinaryInfo,
        *,
        data_dir: Path,
        store: str,
        diff: bool = False,
        create: bool = False,
        lock_timeout_s: float = 30.0,
        native_search: bool = False,
    ) -> None:
        self.transport = transport
        self.binary = binary
        self.data_dir = data_dir
        self.store = store
        self.diff = diff
        self.create = create
        self.lock_timeout_s = lock_timeout_s
        self.native_search = native_search
        self.db_path = data_dir / "data" / store / "mnemon.db"
        sidecar = data_dir / ".orchestrator"
        self.lock_path = sidecar / f"{store}.lock"
        self.metadata = MetadataFile(sidecar / f"{store}.metadata.db")
        self.reader = StoreReader(self.db_path)
        #: Changes with every commit to Mnemon's file, by anyone (an agent's own ``mnemon remember``).
        self._commits = CommitCounter(self.db_path)
        self._snap = Snapshot()
        self._opened = False
        self.clock = SystemClock()

    @property
    def capabilities(self) -> Capabilities:
        """Intent-aware native recall; supersession kept by the adapter (a marked weight-0 link)."""
        return Capabilities(vector_search=False, intent_recall=True, bulk_writes=True)

    # -- life cycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Check the store exists (a typo is an error, never a new store), then read it."""
        if self._opened:
            return
        if not self.db_path.is_file():
            if not self.create:
                raise NotFound(
                    f"unknown Mnemon store {self.store!r} in {self.data_dir} (create it with "
                    f"`mnemon --data-dir {self.data_dir} store create {self.store}`)"
                )
            async with store_write_lock(self.lock_path, self.lock_timeout_s):
                if not self.db_path.is_file():
                    await self.transport.call(["store", "create", self.store])
        await asyncio.to_thread(self.reader.open)
        await asyncio.to_thread(self._commits.open)
        self._opened = True
        await self._refresh()

    async def aclose(self) -> None:
        """Close the read-only connections. Idempotent."""
        self._opened = False
        self.reader.close()
        self._commits.close()

    def store_version(self) -> int | None:
        """Mnemon's file's commit counter: it changes with every write by anyone, Mnemon's own CLI
        included (``ports.VersionedStore``); the adapter re-reads its snapshot on the same signal."""
        return self._commits.read()

    async def _refresh(self) -> Snapshot:
        if self.reader.changed():
            metadata = self.metadata.all()
            self._snap = await asyncio.to_thread(self.reader.snapshot, metadata)
        return self._snap

    async def _current(self) -> Snapshot:
        if not self._opened:
            await self.open()
        return await self._refresh()

    # -- writes ---------------------------------------------------------------------------------

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store through ``mnemon remember`` (or an ``import`` draft when back-dated)."""
        [result] = await self.remember_many([memory])
        return result

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store several memories under one lock; back-dated ones go in one ``import`` draft."""
        for memory in memories:
            validate_new_memory(memory)
        async with store_write_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._current()
            existing: dict[int, str] = {}
            repeats: dict[int, int] = {}
            first_of: dict[str, int] = {}
            pending: list[tuple[int, NewMemory]] = []
            for position, memory in enumerate(memories):
                digest = content_hash(memory.content)
                if memory.dedup and digest in snap.by_hash:
                    existing[position] = snap.by_hash[digest]
                elif memory.dedup and digest in first_of:
                    repeats[position] = first_of[digest]
                else:
                    first_of.setdefault(digest, position)
                    pending.append((position, self._normalised(memory, snap)))
            written = await self._write(pending)
            self.metadata.put((written[position][0], memory.metadata) for position, memory in pending)
            snap = await self._refresh()
            stored = [written[position][0] for position, _ in pending]
            edges = await asyncio.to_thread(self.reader.edge_counts, stored) if stored else {}
        results: dict[int, WriteResult] = {
            p: self._skipped(snap, memory_id) for p, memory_id in existing.items()
        }
        for position, memory in pending:
            results[position] = self._result(snap, written[position], memory, edges)
        for position, first in repeats.items():
            results[position] = self._skipped(snap, results[first].id)
        return [results[position] for position in range(len(memories))]

    def _normalised(self, memory: NewMemory, snap: Snapshot) -> NewMemory:
        # Mnemon matches entity names case-sensitively: reuse the store's spelling of a known name.
        entities = tuple(snap.spellings.get(name.casefold(), name) for name in memory.entities)
        return NewMemory(
            memory.content,
            memory.category,
            memory.importance,
            memory.tags,
            entities,
            memory.source,
            memory.created_at,
            memory.metadata,
            memory.dedup,
        )

    async def _write(self, pending: list[tuple[int, NewMemory]]) -> dict[int, Stored]:
        """Position -> what was stored: ``remember`` one by one, back-dated ones in one import draft."""
        done: dict[int, Stored] = {}
        drafted = [(position, memory) for position, memory in pending if needs_draft(memory)]
        for position, memory in pending:
            if not needs_draft(memory):
                done[position] = remembered(await self.transport.call(remember_args(memory, diff=self.diff)))
        if drafted:
            with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="orchestrator-draft-") as file:
                json.dump(draft([memory for _, memory in drafted]), file)
                file.flush()
                args = ["import", *([] if self.diff else ["--no-diff"]), file.name]
                answer = await self.transport.call(args)
            done.update(
                zip((position for position, _ in drafted), imported(answer, len(drafted)), strict=True)
            )
        return done

    def _skipped(self, snap: Snapshot, existing: str) -> WriteResult:
        return WriteResult(
            existing, WriteAction.SKIPPED, duplicate_of=existing, record=snap.records.get(existing)
        )

    def _result(
        self,
        snap: Snapshot,
        written: Stored,
        memory: NewMemory,
        edges: Mapping[str, Counter[str]],
    ) -> WriteResult:
        memory_id, action, _ = written
        record = snap.records.get(memory_id)
        if action == "skipped":
            return self._skipped(snap, memory_id)
        others = [sketch(item) for item in self._similar(snap, memory.content, exclude=memory_id)]
        candidates = link_candidates(sketch(record), others) if record is not None else ()
        # Counted in the store (an import answer has no edge counts; a remember answer has them too).
        created = Counter(edges.get(memory_id, Counter()))
        kind = WriteAction.UPDATED if action == "updated" else WriteAction.ADDED
        return WriteResult(memory_id, kind, candidates=candidates, edges_created=created, record=record)

    def _similar(self, snap: Snapshot, text: str, *, exclude: str, limit: int = 20) -> list[MemoryRecord]:
        scores = snap.index.scores(text)
        best = sorted(
            (item for item in scores.items() if item[0] != exclude), key=lambda item: (-item[1], item[0])
        )
        return [snap.records[memory_id] for memory_id, _ in best[:limit]]

    async def link(self, edge: Edge) -> Edge:
        """``mnemon link``; a supersession is a weight-0 semantic link marked in its metadata."""
        validate_edge(edge)
        async with store_write_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._current()
            for memory_id in (edge.source, edge.target):
                if memory_id not in snap.records:
                    raise NotFound(f"memory {memory_id} not found")
            metadata = dict(edge.metadata)
            kind, weight = EdgeType(edge.type), edge.weight
            if kind is EdgeType.SUPERSEDES:
                metadata.update({SUPERSEDES_KEY: SUPERSEDES_VALUE, REPLACES_KEY: edge.target})
                stored_kind, weight = EdgeType.SEMANTIC, 0.0
            else:
                stored_kind = kind
            args = [
                "link",
                edge.source,
                edge.target,
                "--type",
                stored_kind.value,
                "--weight",
                f"{weight:.6f}",
            ]
            if metadata:
                args += ["--meta", json.dumps(metadata, sort_keys=True)]
            await self.transport.call(args)
            await self._refresh()
        return Edge(
            edge.source, edge.target, kind, edge.weight, edge.metadata, edge.created_at or self.clock.now()
        )

    async def forget(self, memory_id: str) -> None:
        """``mnemon forget`` (a soft delete that also drops the memory's edges)."""
        async with store_write_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._current()
            if memory_id not in snap.records:
                raise NotFound(f"memory {memory_id} not found")
            await self.transport.call(["forget", memory_id])
            await self._refresh()

    # -- reads ----------------------------------------------------------------------------------

    def _visible(self, filters: Filters, now: datetime | None) -> Any:
        moment = ensure_utc(now) if now is not None else None

        def admits(record: MemoryRecord) -> bool:
            return (moment is None or record.created_at <= moment) and filters.admits(record)

        return admits

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Active memories by id, in the order asked."""
        snap = await self._current()
        return [snap.records[memory_id] for memory_id in dict.fromkeys(ids) if memory_id in snap.records]

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Newest visible memories first."""
        validate_limit(limit)
        snap = await self._current()
        admits = self._visible(filters, now)
        return [record for record in snap.newest_first() if admits(record)][:limit]

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """BM25 with light stemming over the store (in process; Mnemon's ``search`` does not stem).

        With ``native_search`` it is Mnemon's own ``search`` (share of query words present), for
        comparison.
        """
        validate_limit(limit)
        snap = await self._current()
        admits = self._visible(filters, now)
        if self.native_search:
            answer = await self.transport.call(["search", "--limit", str(min(100, limit * 3)), "--", text])
            scored = [(float(item.get("score", 0.0)), str(item.get("id"))) for item in answer or []]
            scored = [(score, memory_id) for score, memory_id in scored if memory_id in snap.records]
        else:
            scored = [(score, memory_id) for memory_id, score in snap.index.scores(text).items()]
        scored.sort(key=lambda item: (-item[0], item[1]))
        hits = []
        for score, memory_id in scored:
            record = snap.records[memory_id]
            if admits(record):
                hits.append(Hit(record, round(score, 6), via="keyword", signals={"keyword": round(score, 6)}))
                if len(hits) == limit:
                    break
        return hits

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Mnemon's own ``recall --verbose``: padding dropped, ties ordered by id, filters applied."""
        validate_limit(query.limit)
        snap = await self._current()
        fetch = min(100, query.limit * (3 if query.filters.is_empty() and query.now is None else 6))
        args = ["recall", "--verbose", "--limit", str(fetch)]
        if query.intent is not None:
            args += ["--intent", query.intent.value]
        answer = await self.transport.call([*args, "--", query.text])
        admits = self._visible(query.filters, query.now)
        return recall_hits(answer, snap, admits)[: query.limit]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Breadth-first over Mnemon's edges, one read-only query per hop."""
        validate_hops(hops)
        validate_limit(limit)
        snap = await self._current()
        kinds = set(EdgeType) if edge_types is None else {EdgeType(kind) for kind in edge_types}
        admits = self._visible(filters, None)
        return await asyncio.to_thread(
            store_reader.walk, self.reader, snap, list(ids), kinds, hops, limit, admits
        )

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Mnemon's oplog (the last 5,000 operations it keeps) as changes, oldest first."""
        validate_limit(limit)
        snap = await self._current()
        return await asyncio.to_thread(store_reader.changes_from, self.reader, snap, ensure_utc(since), limit)

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names of active memories, most used first, ties alphabetical."""
        validate_limit(limit)
        snap = await self._current()
        ranked = sorted(snap.entity_uses.items(), key=lambda item: (-item[1], item[0]))
        return [snap.spellings[name] for name, _ in ranked[:limit]]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """Readable store, tested schema, size against the 1,000-memory cap; ``probe`` runs ``status``."""
        checks = []
        snap = await self._current()
        count = len(snap.records)
        share = count / STORE_CAP
        status = "degraded" if share >= CAP_WARNING_SHARE else "ok"
        detail = f"{count} of {STORE_CAP} memories"
        if status != "ok":
            detail += "; Mnemon prunes low-importance memories beyond the cap"
        checks.append(HealthCheck("capacity", status, detail))
        checks.append(HealthCheck("schema", "ok", f"user_version {self.reader.schema_version}"))
        if probe:
            answer = await self.transport.call(["status"])
            total = int((answer or {}).get("total_insights", -1))
            checks.append(
                HealthCheck("cli", "ok" if total == count else "degraded", f"status: {total} memories")
            )
        overall = "degraded" if any(check.status != "ok" for check in checks) else "ok"
        return BackendHealth(
            self.name,
            overall,
            tuple(checks),
            version=self.binary.version,
            memory_count=count,
            details={"store": self.store},
        )
