"""Traces: everything a request went through, kept so it can be explained and replayed by id.

A :class:`Trace` collects the request, the plan, the candidates of every stage with their scores,
the expansion decisions, the ranking breakdowns, every drop with its reason (duplicate, budget,
superseded, filtered, below threshold), timings per stage and warnings. ``to_dict()`` is JSON-safe.
:class:`InProcessTraceStore` is the bounded store used when no ``TraceStore`` port is given.
"""

from __future__ import annotations

import json
import marshal
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from memory_orchestrator.domain.results import QueryPlan
from memory_orchestrator.ports import format_timestamp

#: Entries kept per stage list at ``basic`` verbosity (``full`` keeps everything).
BASIC_LIST_LIMIT = 50

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Listed:
    # A stage list already cut as ``Trace.record`` keeps it (``Trace.listed``).
    entries: list[Any]


def new_trace_id() -> str:
    """A fresh, unguessable trace id (``tr-`` + 16 hex digits)."""
    # 8 random bytes as hex: what the first 16 digits of a uuid4 were, without building the UUID
    # (one per served request; uuid4() was ~1% of a served search's CPU).
    return f"tr-{secrets.token_hex(8)}"


class _Reserved:
    """A trace id set aside for the first trace of a request; a holder, so that tasks started by the
    request (which copy the context) share it and it is never handed out twice."""

    __slots__ = ("trace_id",)

    def __init__(self, trace_id: str) -> None:
        self.trace_id: str | None = trace_id


_reserved: ContextVar[_Reserved | None] = ContextVar("memory_orchestrator_trace_id", default=None)


@contextmanager
def reserved_trace_id(trace_id: str) -> Iterator[None]:
    """Within this block, the first trace created takes ``trace_id`` (a request id that is also the
    id of the request's trace); later traces get fresh ids."""
    token = _reserved.set(_Reserved(trace_id))
    try:
        yield
    finally:
        _reserved.reset(token)


def _claim_trace_id() -> str:
    reserved = _reserved.get()
    if reserved is not None and reserved.trace_id is not None:
        trace_id, reserved.trace_id = reserved.trace_id, None
        return trace_id
    return new_trace_id()


class Trace:
    """The record of one request (see the module docstring)."""

    def __init__(
        self,
        operation: str,
        request: Mapping[str, Any],
        *,
        created_at: datetime,
        verbosity: str = "basic",
        trace_id: str | None = None,
    ) -> None:
        self.trace_id = trace_id or _claim_trace_id()
        self.operation = operation
        self.request = dict(request)
        self.created_at = created_at
        self.verbosity = verbosity
        self.plan: dict[str, Any] | None = None
        self.stages: dict[str, dict[str, Any]] = {}
        self.timings_ms: dict[str, float] = {}
        self.drops: list[dict[str, str]] = []
        self.warnings: list[str] = []
        self.result_ids: list[str] = []

    def set_plan(self, plan: QueryPlan) -> None:
        """Record the plan (with its rewrites: canonical query and subqueries)."""
        self.plan = plan.to_dict()

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Measure the wall time of ``stage`` (accumulated when entered twice)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            self.timings_ms[stage] = round(self.timings_ms.get(stage, 0.0) + elapsed, 3)

    def record(self, stage: str, **details: Any) -> None:
        """Attach details (candidates, decisions, counts) to ``stage``; lists are capped when basic."""
        entry = self.stages.setdefault(stage, {})
        for key, value in details.items():
            entry[key] = self._capped(value)

    def listed(self, values: Sequence[T], form: Callable[[T], Any]) -> Any:
        """``[form(value) for value in values]`` for ``record``, formatting only the entries it keeps
        (at ``basic`` verbosity the first ``BASIC_LIST_LIMIT``, and the count of the rest)."""
        if not self._cuts(len(values)):
            return [form(value) for value in values]
        return _Listed(_cut([form(value) for value in values[:BASIC_LIST_LIMIT]], len(values)))

    def drop(self, memory_id: str, reason: str, stage: str) -> None:
        """Record that ``memory_id`` left the pipeline at ``stage`` and why."""
        self.drops.append({"memory_id": memory_id, "reason": reason, "stage": stage})

    def warn(self, message: str) -> None:
        """Record a warning (each distinct message once)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-safe trace document."""
        return {
            "trace_id": self.trace_id,
            "operation": self.operation,
            "created_at": format_timestamp(self.created_at),
            "request": self.request,
            "plan": self.plan,
            "stages": self.stages,
            "drops": self._capped(self.drops),
            "timings_ms": dict(self.timings_ms),
            "warnings": list(self.warnings),
            "result_ids": list(self.result_ids),
        }

    def _capped(self, value: Any) -> Any:
        if isinstance(value, _Listed):
            return value.entries
        if isinstance(value, list) and self._cuts(len(value)):
            return _cut(value[:BASIC_LIST_LIMIT], len(value))
        return value

    def _cuts(self, size: int) -> bool:
        """Whether a stage list of ``size`` entries is cut (``basic`` verbosity keeps the first
        ``BASIC_LIST_LIMIT``)."""
        return self.verbosity != "full" and size > BASIC_LIST_LIMIT


def _cut(kept: list[Any], size: int) -> list[Any]:
    """The first ``BASIC_LIST_LIMIT`` entries of a list of ``size``, and the marker counting the rest
    (read back by ``omitted_count``)."""
    return [*kept, {"omitted": size - BASIC_LIST_LIMIT}]


def omitted_count(entry: Any) -> int:
    """How many entries a ``basic`` trace left out where ``entry`` is its ``{"omitted": n}`` marker;
    0 for any other entry."""
    return int(entry["omitted"]) if isinstance(entry, dict) and "omitted" in entry else 0


def full_length(entries: Any) -> int:
    """Length of a trace list, counting the entries a ``basic`` trace left out (0 for a non-list)."""
    if not isinstance(entries, list):
        return 0
    omitted = sum(omitted_count(entry) for entry in entries)
    return len(entries) + omitted - (1 if omitted else 0)


class InProcessTraceStore:
    """A bounded in-memory ``TraceStore``: the oldest traces go past ``retention``.

    Documents are kept serialised (``marshal``, ~0.1 ms for a 40 KB trace, 5x faster than JSON): a
    thousand traces kept as dicts and lists were ~50,000 objects that every full collection of the
    cycle collector walked, the largest part of its pause in a process serving reads; bytes are not
    walked, take a fraction of the memory, and each ``load`` returns a fresh copy."""

    def __init__(self, retention: int = 1000) -> None:
        self.retention = max(1, retention)
        self._documents: OrderedDict[str, tuple[datetime, bytes]] = OrderedDict()

    async def open(self) -> None:
        """Nothing to open."""

    async def aclose(self) -> None:
        """Nothing to release."""

    async def save(self, trace_id: str, created_at: datetime, document: Mapping[str, Any]) -> None:
        """Keep ``document``; prune the oldest beyond the retention."""
        self._documents.pop(trace_id, None)
        self._documents[trace_id] = (created_at, _packed(document))
        while len(self._documents) > self.retention:
            self._documents.popitem(last=False)

    async def load(self, trace_id: str) -> Mapping[str, Any] | None:
        """The document, or ``None`` when unknown or pruned."""
        entry = self._documents.get(trace_id)
        if entry is None:
            return None
        document: Mapping[str, Any] = marshal.loads(entry[1])
        return document

    async def recent(self, *, limit: int = 20) -> list[tuple[str, datetime]]:
        """Newest first."""
        newest = list(reversed(self._documents.items()))[:limit]
        return [(trace_id, created_at) for trace_id, (created_at, _) in newest]


def _packed(document: Mapping[str, Any]) -> bytes:
    try:
        return marshal.dumps(dict(document))
    except ValueError:  # a value marshal cannot write: stored as the trace files store it (JSON, str())
        return marshal.dumps(json.loads(json.dumps(dict(document), default=str)))
