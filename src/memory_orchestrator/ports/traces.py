"""The trace store port: where explain traces are kept so they can be shown and replayed later."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class TraceStore(Protocol):
    """Keeps JSON-safe trace documents under their ``trace_id``; oldest pruned past ``retention``."""

    async def open(self) -> None:
        """Create the store if needed. Idempotent."""
        ...

    async def aclose(self) -> None:
        """Release resources. Idempotent."""
        ...

    async def save(self, trace_id: str, created_at: datetime, document: Mapping[str, Any]) -> None:
        """Store (or replace) one trace document. It may be written after this returns (the SQLite
        store writes behind its callers); ``load`` and ``recent`` see it either way."""
        ...

    async def load(self, trace_id: str) -> Mapping[str, Any] | None:
        """The stored document, or ``None`` when unknown or pruned."""
        ...

    async def recent(self, *, limit: int = 20) -> list[tuple[str, datetime]]:
        """Ids and times of the newest traces, newest first."""
        ...
