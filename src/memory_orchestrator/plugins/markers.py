"""The pluggy markers of the project; kept apart so plugins can import them without the manager."""

from __future__ import annotations

import pluggy

#: The pluggy project name and the entry-point group plugins are discovered through.
PROJECT_NAME = "memory_orchestrator"
ENTRY_POINT_GROUP = "memory_orchestrator"

#: Marks a hook specification (only :mod:`memory_orchestrator.plugins.hookspecs` uses it).
hookspec = pluggy.HookspecMarker(PROJECT_NAME)

#: Marks a hook implementation in a plugin: ``@hookimpl def register_backends(register): ...``.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
