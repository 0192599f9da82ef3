"""A third-party plugin: the ``notebook`` backend and the ``pinned`` scorer.

It imports only ``memory_orchestrator.ports`` and ``memory_orchestrator.plugins.hookimpl``, as any
plugin should, and is discovered through the entry-point group ``memory_orchestrator``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_orchestrator.plugins import hookimpl
from memory_orchestrator.ports import InvalidRequest, MemoryRecord, ScoringContext
from orchestrator_sample_plugin.notebook import NotebookBackend


class PinnedScorer:
    """Memories tagged ``pinned`` are what the user asked to always see first."""

    name = "pinned"

    def __init__(self, weight: float) -> None:
        self.weight = weight

    def score(self, context: ScoringContext, record: MemoryRecord, signals: Mapping[str, float]) -> float:
        """1 for a pinned memory, else 0."""
        return 1.0 if "pinned" in record.tags else 0.0


def create_pinned_scorer(options: Mapping[str, Any]) -> PinnedScorer:
    """Option ``weight`` (default 2.0: strong enough to reorder results visibly)."""
    weight = options.get("weight", 2.0)
    if not isinstance(weight, int | float) or weight < 0:
        raise InvalidRequest("pinned: weight must be a non-negative number")
    return PinnedScorer(float(weight))


def create_notebook_backend(options: Mapping[str, Any]) -> NotebookBackend:
    """Option ``path``: the JSON file holding the notebook (required)."""
    path = options.get("path")
    if not path:
        raise InvalidRequest("notebook backend: set backend.extra.notebook.path")
    return NotebookBackend(str(path))


class SamplePlugin:
    """Registers one backend and one scorer."""

    @hookimpl
    def register_backends(self, register: Callable[[str, Any], None]) -> None:
        """The ``notebook`` backend."""
        register("notebook", create_notebook_backend)

    @hookimpl
    def register_scorers(self, register: Callable[[str, Any], None]) -> None:
        """The ``pinned`` scorer."""
        register("pinned", create_pinned_scorer)


plugin = SamplePlugin()
