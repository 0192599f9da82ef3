"""What the global options of one ``orchestrator`` run mean, without the CLI framework: the settings
they select. Shared by the commands and by ``serve``'s own reading of its command line
(:mod:`serving`), which starts without importing the framework."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memory_orchestrator.entrypoints.config.settings import Settings, load_settings
from memory_orchestrator.entrypoints.telemetry.log_lines import configure_logging
from memory_orchestrator.ports import InvalidRequest

#: The values of ``--log-level``.
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(slots=True)
class CliState:
    """Global options given before the command (``orchestrator --backend memory recall ...``)."""

    config: Path | None = None
    backend: str | None = None
    store: str | None = None
    log_level: str | None = None


def settings_for(state: CliState) -> Settings:
    """Settings from the file and environment, with the global ``--backend`` / ``--store`` applied."""
    settings = load_settings(state.config)
    if state.backend:
        if not state.backend.strip():
            raise InvalidRequest("--backend must name a backend (see `orchestrator plugins`)")
        settings.backend.name = state.backend
    if state.store:
        apply_store(settings, state.store)
    if state.log_level:
        settings.log.level = state.log_level  # type: ignore[assignment]
    # Warnings only unless asked: a command's own output is on stdout, its log lines on stderr.
    configure_logging(settings.log.level or "warning")
    return settings


def apply_store(settings: Settings, store: str) -> None:
    """Point the configured backend at another store (namespace)."""
    section = getattr(settings.backend, settings.backend.name, None)
    if hasattr(section, "store"):
        try:
            section.store = store  # type: ignore[union-attr]
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise InvalidRequest(f"--store {store!r}: {exc.errors()[0]['msg']}") from exc  # type: ignore[attr-defined]
    elif settings.backend.name == "memory":
        settings.backend.memory["store"] = store
    else:
        settings.backend.extra.setdefault(settings.backend.name, {})["store"] = store
