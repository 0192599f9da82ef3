"""Extra retrieval channels from plugins, and the vector storage a dense channel needs.

A :class:`RetrievalChannel` is one more ranked list the pipeline fuses with the backend's own
channels (keyword, recall), under the same stage timeout and the same filters. A dense channel
embeds memories with a model of its own and keeps the vectors in the backend, where the backend
can keep them (``Capabilities.vector_search`` and the :class:`VectorStore` methods): the memories
stay the source of truth and the vectors survive restarts. The channel searches the vectors itself
(brute-force cosine is fine up to about 100k memories), so the backend only stores bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memory_orchestrator.ports.records import Filters, Hit, MemoryRecord

if TYPE_CHECKING:
    from memory_orchestrator.ports.backend import MemoryBackend

#: A vector space name: the model that made the vectors (vectors of two models never mix).
MAX_SPACE_CHARS = 100


@dataclass(frozen=True, slots=True)
class VectorPage:
    """Vectors stored after a cursor, oldest first, and the cursor to continue from."""

    rows: list[tuple[str, bytes]] = field(default_factory=list)
    cursor: int = 0


@runtime_checkable
class VectorStore(Protocol):
    """Vectors kept beside memories, one row per (space, memory); the backend never reads them."""

    async def put_vectors(self, space: str, vectors: Sequence[tuple[str, bytes]]) -> int:
        """Store ``(memory id, vector bytes)`` pairs in ``space`` (a pair for an id that is not an
        active memory is ignored; a second vector for the same memory replaces the first). Returns
        how many were stored."""
        ...

    async def vectors_after(self, space: str, cursor: int, *, limit: int) -> VectorPage:
        """Vectors of ``space`` stored after ``cursor`` (0: from the start), at most ``limit``."""
        ...

    async def without_vectors(self, space: str, *, limit: int) -> list[MemoryRecord]:
        """Active memories that have no vector in ``space`` yet, oldest first."""
        ...


@runtime_checkable
class ContextSource(Protocol):
    """A backend that can name each memory's context: what its keyword index matches it on beside
    its own words (``ports.text.CONTEXT_WINDOW``). A dense channel embeds the same context, so both
    channels see a conversation turn with the turns around it."""

    async def context_records(self, ids: Sequence[str]) -> dict[str, list[MemoryRecord]]:
        """For each active memory among ``ids``: the memories just before and just after it in time
        that were written by another source at most ``CONTEXT_WINDOW`` away, oldest first (an empty
        list when none count; unknown or forgotten ids are left out)."""
        ...


class RetrievalChannel(Protocol):
    """A ranked list the pipeline fuses with the backend's channels (registered by a plugin)."""

    #: The channel's name in traces, in ``pipeline.channel_weights`` and in ``[channels]``.
    name: str

    def supports(self, backend: MemoryBackend) -> bool:
        """Whether this channel can run on ``backend`` (e.g. it stores vectors)."""
        ...

    async def search(
        self, backend: MemoryBackend, text: str, *, limit: int, filters: Filters, now: datetime
    ) -> list[Hit]:
        """Best matches for ``text`` first; the domain re-applies ``filters`` and ``now``."""
        ...


#: ``factory(options) -> RetrievalChannel``, registered by a plugin's ``register_channels`` hook.
ChannelFactory = Callable[[Mapping[str, Any]], RetrievalChannel]


def stores_vectors(backend: object) -> bool:
    """Whether ``backend`` keeps vectors (its capability and the :class:`VectorStore` methods)."""
    capabilities = getattr(backend, "capabilities", None)
    return bool(getattr(capabilities, "vector_search", False)) and isinstance(backend, VectorStore)
