"""Eval-format datasets: loading ``memories.jsonl`` / ``queries.jsonl`` / ``links.jsonl`` and ingesting them.

The format is described in ``/work/shared/eval/README.md`` (and the README's "Evaluation" section). A
*store* is one corpus with its queries; a dataset folder holds either one store (the files directly) or
several stores (one sub-folder each, as the LoCoMo conversion writes them).

Backends assign their own ids, so :func:`ingest` returns the mapping dataset id -> backend id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from memory_orchestrator.ports import (
    CATEGORIES,
    BulkLinker,
    Edge,
    EdgeType,
    InvalidRequest,
    MemoryBackend,
    NewMemory,
    OrchestratorError,
    WriteResult,
    bulk_session,
    parse_timestamp,
    remember_all,
)

MEMORIES_FILE = "memories.jsonl"
QUERIES_FILE = "queries.jsonl"
LINKS_FILE = "links.jsonl"

#: Query keys that label a query for per-slice reporting (besides ``kind`` and ``intent``).
SLICE_KEYS = ("kind", "intent", "category", "conversation")

_EMPTY: Mapping[str, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DatasetMemory:
    """One memory line of ``memories.jsonl``."""

    id: str
    content: str
    category: str = "general"
    importance: int = 3
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: str = "user"
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class DatasetLink:
    """An explicit edge between two dataset memories, written after every memory."""

    source: str
    target: str
    type: EdgeType
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class DatasetQuery:
    """One line of ``queries.jsonl``: a question, its gold memories and its slice labels."""

    id: str
    query: str
    gold: tuple[str, ...]
    now: datetime | None = None
    must_not: tuple[str, ...] = ()
    intent: str = ""
    kind: str = ""
    #: gold id -> ids that say the same thing (finding any of them counts as finding the gold).
    gold_dups: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: _EMPTY, compare=False)
    #: Slice labels (kind, intent, category, conversation) present on the line, as strings.
    slices: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)


@dataclass(frozen=True, slots=True)
class Dataset:
    """One store: its corpus, explicit links and queries."""

    name: str
    memories: tuple[DatasetMemory, ...]
    links: tuple[DatasetLink, ...] = ()
    queries: tuple[DatasetQuery, ...] = ()


@dataclass(slots=True)
class IngestReport:
    """What :func:`ingest` did. ``ids`` maps every dataset memory id to its backend id."""

    ids: dict[str, str]
    written: int = 0
    skipped: int = 0
    links: int = 0
    backdated: bool = True
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


# --------------------------------------------------------------------------------------------- loading


def load_dataset(path: str | Path, *, corpus: str | Path | None = None) -> list[Dataset]:
    """Load every store found at ``path``.

    ``path`` may be a ``queries.jsonl`` (its corpus is ``corpus`` or the ``memories.jsonl`` beside it),
    a ``memories.jsonl`` (no queries), a folder holding the files, or a folder of store folders.
    Malformed input raises :class:`InvalidRequest` naming the file and line.
    """
    root = Path(path)
    if not root.exists():
        raise InvalidRequest(f"dataset not found: {root}")
    if root.is_file():
        return [_load_from_file(root, Path(corpus) if corpus else None)]
    if (root / MEMORIES_FILE).is_file():
        return [load_store(root, corpus=Path(corpus) if corpus else None)]
    stores = sorted(child for child in root.iterdir() if (child / MEMORIES_FILE).is_file())
    if not stores:
        raise InvalidRequest(f"{root} holds no {MEMORIES_FILE} (nor sub-folders that do)")
    return [load_store(child) for child in stores]


def _load_from_file(file: Path, corpus: Path | None) -> Dataset:
    if file.name == MEMORIES_FILE and corpus is None:
        return load_store(file.parent, queries=False)
    memories_path = corpus or file.with_name(MEMORIES_FILE)
    if not memories_path.is_file():
        raise InvalidRequest(f"no corpus for {file}: pass --corpus or put {MEMORIES_FILE} beside it")
    return _build_store(file.parent.name or "dataset", memories_path, file, memories_path.parent)


def load_store(folder: Path, *, corpus: Path | None = None, queries: bool = True) -> Dataset:
    """Load one store folder (``memories.jsonl`` + optional ``queries.jsonl`` / ``links.jsonl``)."""
    query_path = folder / QUERIES_FILE if queries else None
    return _build_store(folder.name, corpus or folder / MEMORIES_FILE, query_path, folder)


def _build_store(name: str, memories_path: Path, queries_path: Path | None, folder: Path) -> Dataset:
    memories: list[DatasetMemory] = []
    links: list[DatasetLink] = []
    for where, row in _read_jsonl(memories_path):
        if "link" in row:
            links.append(_parse_link(row["link"], where))
        else:
            memories.append(_parse_memory(row, where))
    links_path = folder / LINKS_FILE
    if links_path.is_file():
        links.extend(_parse_link(row, where) for where, row in _read_jsonl(links_path))
    _check_unique([m.id for m in memories], memories_path)
    parsed_queries: list[DatasetQuery] = []
    if queries_path is not None and queries_path.is_file():
        parsed_queries = [_parse_query(row, where) for where, row in _read_jsonl(queries_path)]
        _check_unique([q.id for q in parsed_queries], queries_path)
    return Dataset(name, tuple(memories), tuple(links), tuple(parsed_queries))


def _read_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidRequest(f"{where}: not valid JSON ({exc.msg})") from exc
            if not isinstance(row, dict):
                raise InvalidRequest(f"{where}: expected a JSON object")
            yield where, row


def _check_unique(ids: list[str], path: Path) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise InvalidRequest(f"{path}: duplicate id {item!r}")
        seen.add(item)


def _text(row: Mapping[str, Any], key: str, where: str, *, required: bool = False, default: str = "") -> str:
    value = row.get(key)
    if value is None:
        if required:
            raise InvalidRequest(f"{where}: missing {key!r}")
        return default
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise InvalidRequest(f"{where}: {key!r} must be a string")
    text = str(value)
    if required and not text.strip():
        raise InvalidRequest(f"{where}: {key!r} is empty")
    return text


def _strings(row: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = row.get(key) or []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidRequest(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def _time(row: Mapping[str, Any], key: str, where: str) -> datetime | None:
    value = row.get(key)
    if value is None:
        return None
    try:
        return parse_timestamp(str(value))
    except ValueError as exc:
        raise InvalidRequest(f"{where}: {key!r} is not an ISO 8601 timestamp: {value!r}") from exc


def _parse_memory(row: Mapping[str, Any], where: str) -> DatasetMemory:
    category = _text(row, "category", where, default="general")
    if category not in CATEGORIES:
        raise InvalidRequest(f"{where}: category {category!r} is not one of {', '.join(CATEGORIES)}")
    importance = row.get("importance", 3)
    if not isinstance(importance, int) or isinstance(importance, bool) or not 1 <= importance <= 5:
        raise InvalidRequest(f"{where}: importance must be an integer 1-5, got {importance!r}")
    return DatasetMemory(
        id=_text(row, "id", where, required=True),
        content=_text(row, "content", where, required=True),
        category=category,
        importance=importance,
        entities=_strings(row, "entities", where),
        tags=_strings(row, "tags", where),
        source=_text(row, "source", where, default="user") or "user",
        created_at=_time(row, "created_at", where),
    )


def _parse_link(row: Any, where: str) -> DatasetLink:
    if not isinstance(row, dict):
        raise InvalidRequest(f"{where}: a link must be an object with source, target, type")
    kind = _text(row, "type", where, required=True)
    try:
        edge_type = EdgeType(kind)
    except ValueError as exc:
        allowed = ", ".join(t.value for t in EdgeType)
        raise InvalidRequest(f"{where}: link type {kind!r} is not one of {allowed}") from exc
    weight = row.get("weight", 1.0)
    if not isinstance(weight, int | float) or isinstance(weight, bool) or not 0.0 <= weight <= 1.0:
        raise InvalidRequest(f"{where}: link weight must be a number in [0, 1], got {weight!r}")
    source = _text(row, "source", where, required=True)
    return DatasetLink(source, _text(row, "target", where, required=True), edge_type, float(weight))


def _parse_query(row: Mapping[str, Any], where: str) -> DatasetQuery:
    dups = row.get("gold_dups") or {}
    if not isinstance(dups, dict):
        raise InvalidRequest(f"{where}: 'gold_dups' must map a gold id to a list of ids")
    gold_dups = {str(key): _strings(dups, key, where) for key in dups}
    slices = {key: str(row[key]) for key in SLICE_KEYS if row.get(key) not in (None, "")}
    return DatasetQuery(
        id=_text(row, "id", where, required=True),
        query=_text(row, "query", where, required=True),
        gold=_strings(row, "gold", where),
        now=_time(row, "now", where),
        must_not=_strings(row, "must_not", where),
        intent=_text(row, "intent", where),
        kind=_text(row, "kind", where),
        gold_dups=MappingProxyType(gold_dups),
        slices=MappingProxyType(slices),
    )


# --------------------------------------------------------------------------------------------- ingesting


def chronological(memories: tuple[DatasetMemory, ...]) -> list[DatasetMemory]:
    """Memories oldest first; undated ones last, in file order (the sort is stable)."""
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(memories, key=lambda m: (m.created_at is None, m.created_at or epoch))


def to_new_memory(memory: DatasetMemory, *, backdated: bool) -> NewMemory:
    """The write request for one dataset memory.

    ``dedup`` is off: the dataset is the ground truth, and two identical lines are two memories.
    """
    return NewMemory(
        content=memory.content,
        category=memory.category,
        importance=memory.importance,
        tags=memory.tags,
        entities=memory.entities,
        source=memory.source,
        created_at=memory.created_at if backdated else None,
        metadata={"dataset_id": memory.id},
        dedup=False,
    )


ProgressCallback = Callable[[int, int], None]


async def ingest(
    backend: MemoryBackend, dataset: Dataset, *, on_progress: ProgressCallback | None = None
) -> IngestReport:
    """Write ``dataset`` into the opened ``backend``; returns the id mapping and what happened.

    Memories go in chronological order (so automatic temporal edges follow time), with their
    ``created_at`` when the backend can back-date writes; otherwise they are stamped at write time and
    the report says so. Explicit links follow. A memory or link the backend refuses is skipped with a
    warning rather than aborting the whole import.
    """
    started = datetime.now(UTC)
    backdated = backend.capabilities.backdated_writes
    report = IngestReport(ids={}, backdated=backdated)
    if not backdated:
        report.warnings.append(
            f"backend {backend.name!r} cannot back-date writes: memories were written oldest first and "
            "stamped with the time of writing, so 'as of now' filtering and recency reflect ingestion order"
        )
    ordered = chronological(dataset.memories)
    size = max(1, backend.capabilities.bulk_batch)
    async with bulk_session(backend):  # the backend may tidy up once, after the last batch
        for start in range(0, len(ordered), size):
            batch = ordered[start : start + size]
            await _write_batch(backend, batch, report, backdated=backdated)
            if on_progress is not None:
                for done in range(start + 1, start + len(batch) + 1):
                    on_progress(done, len(ordered))
    await _write_links(backend, dataset.links, report)
    report.seconds = (datetime.now(UTC) - started).total_seconds()
    return report


async def _write_batch(
    backend: MemoryBackend, batch: list[DatasetMemory], report: IngestReport, *, backdated: bool
) -> None:
    if not backend.capabilities.bulk_writes:
        for memory in batch:
            await _write_memory(backend, memory, report, backdated=backdated)
        return
    try:
        results = await remember_all(
            backend, [to_new_memory(memory, backdated=backdated) for memory in batch]
        )
    except OrchestratorError:
        # one refused memory fails the whole bulk call: write them one by one to keep the others
        for memory in batch:
            await _write_memory(backend, memory, report, backdated=backdated)
        return
    for memory, result in zip(batch, results, strict=True):
        _count(report, memory, result)


def _count(report: IngestReport, memory: DatasetMemory, result: WriteResult) -> None:
    report.ids[memory.id] = result.id
    if result.duplicate_of is not None:
        report.skipped += 1
    else:
        report.written += 1


async def _write_memory(
    backend: MemoryBackend, memory: DatasetMemory, report: IngestReport, *, backdated: bool
) -> None:
    try:
        result = await backend.remember(to_new_memory(memory, backdated=backdated))
    except OrchestratorError as exc:
        report.warnings.append(f"memory {memory.id} not written: {exc}")
        return
    _count(report, memory, result)


async def _write_links(backend: MemoryBackend, links: Sequence[DatasetLink], report: IngestReport) -> None:
    """The dataset's links between the memories written: in one write when the backend has a bulk
    path, else (or when it refuses one of them) one by one, each refused link a warning."""
    edges = []
    for link in links:
        source, target = report.ids.get(link.source), report.ids.get(link.target)
        if source is None or target is None:
            missing = link.source if source is None else link.target
            report.warnings.append(f"link {link.source} -> {link.target} skipped: unknown memory {missing}")
        else:
            edges.append((link, Edge(source, target, link.type, link.weight)))
    if edges and isinstance(backend, BulkLinker):
        try:
            await backend.link_many([edge for _, edge in edges])
        except OrchestratorError:
            pass  # one refused link fails them all: write them one by one to keep the others
        else:
            report.links += len(edges)
            return
    for link, edge in edges:
        try:
            await backend.link(edge)
        except OrchestratorError as exc:
            report.warnings.append(f"link {link.source} -> {link.target} not written: {exc}")
        else:
            report.links += 1


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write ``rows`` as JSON lines (UTF-8, keys in insertion order, one object per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
