"""The in-process backend (reference implementation and test fake): ``create_backend(options)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_orchestrator.adapters.memory.backend import InMemoryBackend
from memory_orchestrator.adapters.memory.state import MemoryState, StoredMemory

__all__ = ["InMemoryBackend", "MemoryState", "StoredMemory", "create_backend"]


def create_backend(options: Mapping[str, Any]) -> InMemoryBackend:
    """Build an in-memory backend; ``options`` may carry a ``clock`` (any object with ``now()``)."""
    clock = options.get("clock")
    return InMemoryBackend(clock=clock if clock is not None and hasattr(clock, "now") else None)
