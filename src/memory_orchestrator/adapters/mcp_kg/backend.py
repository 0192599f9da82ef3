"""The knowledge-graph backend: the MCP memory server holds the observations, a sidecar the rest.

Writes add observations to entities through the server (``create_entities`` / ``add_observations``,
``delete_observations`` on forget) and record in the sidecar what the server cannot hold (dates,
category, tags, source, metadata, the automatic and linked edges, supersession, the change log). Reads
come from a snapshot of the graph (``read_graph``) and the sidecar, rebuilt when either changed; the
native recall is the server's own ``search_nodes``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_orchestrator.adapters.mcp_kg import ledger
from memory_orchestrator.adapters.mcp_kg.batches import plan_batch
from memory_orchestrator.adapters.mcp_kg.graph import Entity, Graph, KnowledgeGraph
from memory_orchestrator.adapters.mcp_kg.recall import search_nodes_hits
from memory_orchestrator.adapters.mcp_kg.sidecar import Row, Sidecar, sidecar_paths, writer_lock
from memory_orchestrator.adapters.mcp_kg.snapshot import NOTES_TYPE, Snapshot, build
from memory_orchestrator.adapters.mcp_kg.transport import McpStdioTransport
from memory_orchestrator.ports import (
    AsyncLifecycle,
    BackendHealth,
    Capabilities,
    Change,
    ChangeKind,
    Clock,
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
    superseded_change,
)
from memory_orchestrator.ports.validation import (
    validate_edge,
    validate_hops,
    validate_limit,
    validate_new_memory,
)


class McpKgBackend(AsyncLifecycle):
    """A ``MemoryBackend`` over one memory file of the knowledge-graph MCP server."""

    name = "mcp_kg"

    def __init__(
        self,
        transport: McpStdioTransport,
        memory_file: Path,
        *,
        recall_mode: str = "terms",
        entity_type: str = "entity",
        lock_timeout_s: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self.transport = transport
        self.kg = KnowledgeGraph(transport)
        self.memory_file = memory_file
        self.recall_mode = recall_mode
        self.entity_type = entity_type
        self.lock_timeout_s = lock_timeout_s
        self.clock: Clock = clock or SystemClock()
        database, self.lock_path = sidecar_paths(memory_file)
        self.sidecar = Sidecar(database)
        self._snap = Snapshot()
        self._stamp: tuple[Any, ...] | None = None
        # The graph as last read and the memory file's stamp then: a sidecar-only change (a link,
        # a forget's bookkeeping) needs no new read_graph.
        self._graph: tuple[tuple[Any, ...], Graph] | None = None
        self._mutex = asyncio.Lock()
        self._opened = False

    @property
    def capabilities(self) -> Capabilities:
        """Native recall is ``search_nodes`` (not intent-aware); the rest is kept by the adapter."""
        return Capabilities(vector_search=False, intent_recall=False, bulk_writes=True)

    # -- life cycle -----------------------------------------------------------------------------

    async def open(self) -> None:
        """Start the server for this memory file, open the sidecar and read the graph."""
        if self._opened:
            return
        self.memory_file.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.sidecar.open)
        await self.transport.start()
        self._opened = True
        async with self._mutex:
            await self._refresh(locked=False)

    async def aclose(self) -> None:
        """Stop the server and close the sidecar. Idempotent."""
        self._opened = False
        self._stamp = self._graph = None
        await self.transport.aclose()
        self.sidecar.close()

    def _graph_stamp(self) -> tuple[Any, ...]:
        try:
            stat = self.memory_file.stat()
        except FileNotFoundError:
            return (None,)
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _file_stamp(self) -> tuple[Any, ...]:
        return (*self._graph_stamp(), *self.sidecar.version())

    async def _read_graph(self) -> Graph:
        stamp = self._graph_stamp()
        if self._graph is not None and self._graph[0] == stamp and stamp != (None,):
            return self._graph[1]
        graph = await self.kg.read_graph()
        self._graph = (stamp, graph)
        return graph

    async def _refresh(self, *, locked: bool) -> Snapshot:
        """The current snapshot; the graph is read again only when the file or the sidecar changed."""
        if self._stamp is not None and self._file_stamp() == self._stamp:
            return self._snap
        stamp = self._file_stamp()
        graph = await self._read_graph()
        rows = self.sidecar.rows()
        pending = ledger.reconcile(graph, rows, ensure_utc(self.clock.now()))
        if pending:
            if not locked:
                async with writer_lock(self.lock_path, self.lock_timeout_s):
                    return await self._reconciled()
            self._record(pending)
            rows = self.sidecar.rows()
            stamp = self._file_stamp()
        self._snap = build(graph, rows, self.sidecar.edges(), self._snap)
        self._stamp = stamp
        return self._snap

    async def _reconciled(self) -> Snapshot:
        # Under the writer lock: read again, another writer may have finished meanwhile.
        graph = await self._read_graph()
        pending = ledger.reconcile(graph, self.sidecar.rows(), ensure_utc(self.clock.now()))
        self._record(pending)
        self._stamp = self._file_stamp()
        self._snap = build(graph, self.sidecar.rows(), self.sidecar.edges(), self._snap)
        return self._snap

    def _record(self, pending: ledger.Reconciliation) -> None:
        self.sidecar.write(rows=pending.adopted, forgotten=pending.forgotten, changes=pending.changes)

    async def _current(self) -> Snapshot:
        if not self._opened:
            await self.open()
        async with self._mutex:
            return await self._refresh(locked=False)

    # -- writes ---------------------------------------------------------------------------------

    async def remember(self, memory: NewMemory) -> WriteResult:
        """Store ``memory`` as an observation of its first entity (see ``remember_many``)."""
        [result] = await self.remember_many([memory])
        return result

    async def remember_many(self, memories: Sequence[NewMemory]) -> list[WriteResult]:
        """Store a batch: sidecar rows and edges first, then one server call per kind of write.

        A memory without an entity name is held by the entity ``notes/<source>``. If the server
        refuses the batch, the sidecar rows are removed again and the error is raised.
        """
        for memory in memories:
            validate_new_memory(memory)
        if not self._opened:
            await self.open()
        async with self._mutex, writer_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._refresh(locked=True)
            now = ensure_utc(self.clock.now())
            batch = plan_batch(snap, memories, now)
            if batch.rows:
                added = [result for result in batch.results if result.action is WriteAction.ADDED]
                changes = [Change(ChangeKind.ADDED, result.id, now, result.record) for result in added]
                self.sidecar.write(rows=batch.rows, edges=batch.edges, changes=changes)
                try:
                    await self._store(snap, batch.rows)
                except BaseException:
                    self.sidecar.delete([row.id for row in batch.rows])
                    raise
                self._stamp = None
        return batch.results

    async def _store(self, snap: Snapshot, rows: Sequence[Row]) -> None:
        """Create the missing holder entities with their observations; add the rest to existing ones."""
        fresh: dict[str, tuple[str, list[str]]] = {}
        added: dict[str, list[str]] = {}
        for row in rows:
            if (row.entity, row.text) in snap.by_observation:
                continue  # a second copy of an observation the server already holds
            if row.entity in snap.entity_types:
                texts = added.setdefault(row.entity, [])
            else:
                kind = self.entity_type if row.entities else NOTES_TYPE
                texts = fresh.setdefault(row.entity, (kind, []))[1]
            if row.text not in texts:
                texts.append(row.text)
        if fresh:
            await self.kg.create_entities(
                [Entity(name, kind, tuple(texts)) for name, (kind, texts) in fresh.items()]
            )
        if added:
            await self.kg.add_observations(added)

    async def link(self, edge: Edge) -> Edge:
        """Store a typed, weighted edge between two active memories in the sidecar."""
        [stored] = await self.link_many([edge])
        return stored

    async def link_many(self, edges: Sequence[Edge]) -> list[Edge]:
        """``link`` each of ``edges`` in order, in one write of the sidecar, all or none: every edge
        is checked before any is stored."""
        for edge in edges:
            validate_edge(edge)
        if not edges:
            return []
        if not self._opened:
            await self.open()
        async with self._mutex, writer_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._refresh(locked=True)
            for edge in edges:
                for memory_id in (edge.source, edge.target):
                    if memory_id not in snap.records:
                        raise NotFound(f"memory {memory_id} not found")
            now = ensure_utc(self.clock.now())
            stored = [edge.stamped(now) for edge in edges]
            changes = [change for edge in stored if (change := superseded_change(edge, now)) is not None]
            self.sidecar.write(edges=stored, changes=changes)
        return stored

    async def forget(self, memory_id: str) -> None:
        """Delete the observation from the graph (unless another copy holds it); the id stays used."""
        if not self._opened:
            await self.open()
        async with self._mutex, writer_lock(self.lock_path, self.lock_timeout_s):
            snap = await self._refresh(locked=True)
            record = snap.records.get(memory_id)
            if record is None:
                raise NotFound(f"memory {memory_id} not found")
            entity = snap.holder[memory_id]
            if snap.by_observation[(entity, record.content)] == [memory_id]:
                await self.kg.delete_observations({entity: [record.content]})
            now = ensure_utc(self.clock.now())
            self.sidecar.write(
                forgotten=[(memory_id, now)], changes=[Change(ChangeKind.FORGOTTEN, memory_id, now)]
            )
            self._stamp = None

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
        """Newest visible memories first (dates from the sidecar)."""
        validate_limit(limit)
        snap = await self._current()
        admits = self._visible(filters, now)
        return [record for record in snap.newest if admits(record)][:limit]

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """BM25 over the observations, in process (``search_nodes`` is the native recall)."""
        validate_limit(limit)
        snap = await self._current()
        admits = self._visible(filters, now)
        scored = sorted(snap.lexicon.scores(text).items(), key=lambda item: (-item[1], item[0]))
        hits = []
        for memory_id, score in scored:
            record = snap.records[memory_id]
            if admits(record):
                hits.append(Hit(record, round(score, 6), via="keyword", signals={"keyword": round(score, 6)}))
                if len(hits) == limit:
                    break
        return hits

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """The server's ``search_nodes`` (per word, or the literal text; see ``recall.py``)."""
        validate_limit(query.limit)
        snap = await self._current()
        admits = self._visible(query.filters, query.now)
        hits = await search_nodes_hits(self.kg, snap, query.text, self.recall_mode, admits)
        return hits[: query.limit]

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Breadth-first over sidecar edges, the server's relations and shared entities."""
        validate_hops(hops)
        validate_limit(limit)
        snap = await self._current()
        kinds = set(EdgeType) if edge_types is None else {EdgeType(kind) for kind in edge_types}
        return snap.walk(list(ids), kinds, hops, limit, self._visible(filters, None))

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """The sidecar's change log since ``since``, oldest first."""
        validate_limit(limit)
        await self._current()
        return self.sidecar.changes(ensure_utc(since), limit)

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Entity names of active memories, most used first, ties alphabetical."""
        validate_limit(limit)
        snap = await self._current()
        ranked = sorted(snap.entity_uses.items(), key=lambda item: (-item[1], item[0]))
        return [snap.spellings[name] for name, _ in ranked[:limit]]

    async def health(self, *, probe: bool = False) -> BackendHealth:
        """The graph read through the server; ``probe`` creates and deletes a scratch entity."""
        snap = await self._current()
        if probe:
            async with self._mutex, writer_lock(self.lock_path, self.lock_timeout_s):
                probed = await self._probe()
        checks = [HealthCheck("graph", "ok", f"{len(snap.records)} observations in {self.memory_file.name}")]
        if probe:
            checks.append(probed)
        overall = "ok" if all(check.status == "ok" for check in checks) else "error"
        return BackendHealth(
            self.name,
            overall,
            tuple(checks),
            memory_count=len(snap.records),
            details={"memory_file": str(self.memory_file), "server_starts": str(self.transport.starts)},
        )

    async def _probe(self) -> HealthCheck:
        """A scratch entity created, found and deleted (under the writer lock: nobody adopts it)."""
        scratch = f"orchestrator-probe-{id(self):x}"
        await self.kg.create_entities([Entity(scratch, "probe", ("round trip",))])
        try:
            found = await self.kg.search_nodes(scratch)
        finally:
            await self.kg.delete_entities([scratch])
        status = "ok" if [entity.name for entity in found.entities] == [scratch] else "error"
        return HealthCheck("probe", status, "create_entities / search_nodes / delete_entities")
