"""A trace store that names the store each trace belongs to and tells an observer about each save.

The domain saves plain trace documents and knows nothing of stores or metrics; this decorator, wired
in by the composition root, adds ``"store"`` (so ``orchestrator stats`` can tell stores apart in the
shared trace database) and hands the document to an observer (the server's metrics).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from memory_orchestrator.ports import TraceStore

LOG = logging.getLogger("memory_orchestrator")
#: Called with every saved trace document; must be cheap and must not raise (errors are logged).
TraceObserver = Callable[[Mapping[str, Any]], None]
#: Called with how many traces a failed write or drop of the trace store lost (behind the answers).
LostTraces = Callable[[int], None]


class ObservedTraceStore:
    """A ``TraceStore`` passing everything to ``inner``, labelling and observing each saved trace."""

    def __init__(self, inner: TraceStore, store: str, observer: TraceObserver | None = None) -> None:
        self.inner = inner
        self.store = store
        self.observer = observer

    async def open(self) -> None:
        """Open the inner store."""
        await self.inner.open()

    async def aclose(self) -> None:
        """Close the inner store."""
        await self.inner.aclose()

    async def save(self, trace_id: str, created_at: datetime, document: Mapping[str, Any]) -> None:
        """Save the document with its store named, then tell the observer (even if saving failed)."""
        labelled = {**document, "store": self.store}
        try:
            await self.inner.save(trace_id, created_at, labelled)
        finally:
            if self.observer is not None:
                try:
                    self.observer(labelled)
                except Exception:  # metrics must never fail a request
                    LOG.exception("trace observer failed")

    async def load(self, trace_id: str) -> Mapping[str, Any] | None:
        """The stored document, or ``None``."""
        return await self.inner.load(trace_id)

    async def recent(self, *, limit: int = 20) -> list[tuple[str, datetime]]:
        """Ids and times of the newest traces, newest first."""
        return await self.inner.recent(limit=limit)
