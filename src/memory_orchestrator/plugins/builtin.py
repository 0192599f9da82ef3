"""The built-in plugins, registered through the same entry points and hooks as third-party ones.

Each factory imports its adapter only when called, so listing plugins never imports a driver.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from memory_orchestrator.plugins.hookspecs import RegisterBackend, RegisterScorer
from memory_orchestrator.plugins.markers import hookimpl
from memory_orchestrator.plugins.scorers import create_tag_match_scorer
from memory_orchestrator.ports import MemoryBackend, PluginError

#: What to install when an adapter's driver is missing.
_EXTRA_HINT = {"neo4j": "pip install 'mnemon-memory-orchestrator[neo4j]'"}


def _adapter_factory(name: str) -> Any:
    def create(options: Mapping[str, Any]) -> MemoryBackend:
        try:
            adapter = importlib.import_module(f"memory_orchestrator.adapters.{name}")
        except ImportError as exc:
            hint = _EXTRA_HINT.get(name, "")
            suffix = f"; install it with {hint}" if hint else ""
            raise PluginError(f"backend {name!r} cannot be imported ({exc}){suffix}") from exc
        backend: MemoryBackend = adapter.create_backend(options)
        return backend

    create.__name__ = f"create_{name}_backend"
    create.__doc__ = f"Build the {name} backend (memory_orchestrator.adapters.{name}.create_backend)."
    return create


class AdapterPlugin:
    """A built-in plugin contributing one backend adapter of this package."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    @hookimpl
    def register_backends(self, register: RegisterBackend) -> None:
        """Register the adapter's factory under its name."""
        register(self.backend, _adapter_factory(self.backend))


class BuiltinScorersPlugin:
    """The built-in ranking signals."""

    @hookimpl
    def register_scorers(self, register: RegisterScorer) -> None:
        """Register ``tag_match``."""
        register("tag_match", create_tag_match_scorer)


memory_plugin = AdapterPlugin("memory")
sqlite_plugin = AdapterPlugin("sqlite")
neo4j_plugin = AdapterPlugin("neo4j")
mnemon_plugin = AdapterPlugin("mnemon")
mcp_kg_plugin = AdapterPlugin("mcp_kg")
scorers_plugin = BuiltinScorersPlugin()
