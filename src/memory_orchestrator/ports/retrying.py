"""The ``[retry]`` policy: a backend decorator retrying reads that failed with ``BackendUnavailable``.

Only reads are retried: a write that timed out may have been applied, and repeating it is the
caller's decision. Other errors (``BackendRejected``, ``NotFound``, ``InvalidRequest``) are never
retried, since the same call would fail the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from memory_orchestrator.ports import (
    BackendUnavailable,
    Change,
    EdgeType,
    Filters,
    Hit,
    MemoryBackend,
    MemoryRecord,
    Neighbor,
    RecallQuery,
)
from memory_orchestrator.ports.delegating import DelegatingBackend

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a read is retried."""

    attempts: int = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 2.0

    def delay(self, failures: int) -> float:
        """Exponential backoff after ``failures`` failed attempts, capped."""
        return float(min(self.max_backoff_s, self.backoff_s * (2 ** (failures - 1))))


class RetryingBackend(DelegatingBackend):
    """Wraps a backend; reads are retried per the policy, everything else is passed through."""

    def __init__(
        self,
        inner: MemoryBackend,
        policy: RetryPolicy,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__(inner)
        self.policy = policy
        self._sleep = sleep

    async def _retry(self, call: Callable[[], Awaitable[T]]) -> T:
        failures = 0
        while True:
            try:
                return await call()
            except BackendUnavailable:
                failures += 1
                if failures >= self.policy.attempts:
                    raise
                await self._sleep(self.policy.delay(failures))

    async def open(self) -> None:
        """Open the wrapped backend (retried: opening has no side effect worth guarding)."""
        await self._retry(self.inner.open)

    # Writes are not retried (a timed-out write may have happened) and health must report the
    # failure it sees: both pass through as DelegatingBackend has them.

    async def recall(self, query: RecallQuery) -> list[Hit]:
        """Retried read."""
        return await self._retry(lambda: self.inner.recall(query))

    async def search(
        self, text: str, *, limit: int = 10, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[Hit]:
        """Retried read."""
        return await self._retry(lambda: self.inner.search(text, limit=limit, filters=filters, now=now))

    async def neighbors(
        self,
        ids: Sequence[str],
        *,
        edge_types: Collection[EdgeType] | None = None,
        hops: int = 1,
        limit: int = 100,
        filters: Filters = Filters(),
    ) -> list[Neighbor]:
        """Retried read."""
        return await self._retry(
            lambda: self.inner.neighbors(ids, edge_types=edge_types, hops=hops, limit=limit, filters=filters)
        )

    async def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """Retried read."""
        return await self._retry(lambda: self.inner.get(ids))

    async def recent(
        self, *, limit: int = 20, filters: Filters = Filters(), now: datetime | None = None
    ) -> list[MemoryRecord]:
        """Retried read."""
        return await self._retry(lambda: self.inner.recent(limit=limit, filters=filters, now=now))

    async def changes(self, since: datetime, *, limit: int = 100) -> list[Change]:
        """Retried read."""
        return await self._retry(lambda: self.inner.changes(since, limit=limit))

    async def known_entities(self, *, limit: int = 1000) -> list[str]:
        """Retried read."""
        return await self._retry(lambda: self.inner.known_entities(limit=limit))
