"""Plugins: pluggy hook specifications, the plugin manager and the built-in plugins.

A third-party plugin imports ``hookimpl`` from here and records from ``memory_orchestrator.ports``,
and declares itself in the entry-point group ``memory_orchestrator``.
"""

from memory_orchestrator.plugins.markers import ENTRY_POINT_GROUP, PROJECT_NAME, hookimpl

__all__ = ["ENTRY_POINT_GROUP", "PROJECT_NAME", "hookimpl"]
