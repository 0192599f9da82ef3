"""The one error tree of the orchestrator.

Adapters translate their driver's errors into these at their boundary (``raise ... from exc``), so the
domain and the entrypoints never see a driver exception.
"""

from __future__ import annotations


class OrchestratorError(Exception):
    """Base of every error the orchestrator raises on purpose."""


class BackendError(OrchestratorError):
    """A memory backend failed; ``backend`` names it."""

    def __init__(self, message: str, *, backend: str) -> None:
        super().__init__(message)
        self.backend = backend


class BackendUnavailable(BackendError):
    """The backend cannot be reached or is temporarily unable to answer; retrying may help."""


class BackendRejected(BackendError):
    """The backend refused the request (constraint, invalid data); retrying will not help."""


class NotFound(OrchestratorError):
    """A memory, trace or other named object does not exist."""


class InvalidRequest(OrchestratorError):
    """The caller's input is malformed or out of bounds; the message says how to fix it."""


class PluginError(OrchestratorError):
    """A plugin could not be loaded, or two plugins registered the same name."""


class AccessDenied(OrchestratorError):
    """The caller is not allowed to do this (distinct from 'found nothing')."""
