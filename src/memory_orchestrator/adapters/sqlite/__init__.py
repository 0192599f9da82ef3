"""The embedded SQLite backend (the default store): ``create_backend(options)`` builds it.

The backend module (its SQL, schema and search code) loads on first use: the settings and the MCP
server's start need only the path helpers of this package.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_orchestrator.ports import InvalidRequest

if TYPE_CHECKING:
    from memory_orchestrator.adapters.sqlite.backend import SqliteBackend

__all__ = ["SqliteBackend", "create_backend", "default_data_dir", "existing_stores", "store_path"]

DEFAULT_STORE = "default"


def default_data_dir() -> Path:
    """``$XDG_DATA_HOME/memory-orchestrator`` or ``~/.local/share/memory-orchestrator``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memory-orchestrator"


def store_path(path: str | os.PathLike[str] | None, store: str) -> Path:
    """The database file of ``store``: one file per store.

    No ``path``: ``<data dir>/<store>.db``. A folder: ``<folder>/<store>.db``. A file: that file for
    the default store, ``<stem>.<store><suffix>`` beside it for any other store.
    """
    if not store or "/" in store or "\\" in store or store.startswith("."):
        raise InvalidRequest(f"store name {store!r} is not a plain file name")
    if path is None or str(path) == "":
        return default_data_dir() / f"{store}.db"
    target = Path(path).expanduser()
    if target.is_dir() or str(path).endswith(("/", os.sep)):
        return target / f"{store}.db"
    if store == DEFAULT_STORE:
        return target
    return target.with_name(f"{target.stem}.{store}{target.suffix or '.db'}")


def existing_stores(path: str | os.PathLike[str] | None) -> list[str]:
    """Names of the stores whose database file exists under ``path`` (the inverse of ``store_path``)."""
    if path is None or str(path) == "":
        folder, default_file = default_data_dir(), None
    else:
        target = Path(path).expanduser()
        is_folder = target.is_dir() or str(path).endswith(("/", os.sep))
        folder, default_file = (target, None) if is_folder else (target.parent, target)
    if default_file is None:
        candidates = {file.stem: file for file in folder.glob("*.db")}
    else:
        suffix = default_file.suffix or ".db"
        prefix = f"{default_file.stem}."
        candidates = {
            file.name[len(prefix) : -len(suffix)]: file for file in folder.glob(f"{prefix}*{suffix}")
        }
        candidates[DEFAULT_STORE] = default_file
    names = []
    for name, file in candidates.items():
        try:  # only a name that maps back to this very file is a store (not "x.y" or a stray file)
            if file.is_file() and store_path(path, name) == file:
                names.append(name)
        except InvalidRequest:
            continue
    return sorted(names)


def __getattr__(name: str) -> Any:
    # ``SqliteBackend``, imported only when asked for (PEP 562)
    if name == "SqliteBackend":
        from memory_orchestrator.adapters.sqlite.backend import SqliteBackend

        return SqliteBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def create_backend(options: Mapping[str, Any]) -> SqliteBackend:
    """An unopened SQLite backend; options: ``path``, ``store``, ``clock``, ``busy_timeout_ms``,
    ``bulk_helper`` (``adapters/sqlite/planner.py``; on by default)."""
    from memory_orchestrator.adapters.sqlite.backend import SqliteBackend

    store = str(options.get("store") or DEFAULT_STORE)
    clock = options.get("clock")
    return SqliteBackend(
        store_path(options.get("path"), store),
        store=store,
        clock=clock if clock is not None and hasattr(clock, "now") else None,
        busy_timeout_ms=int(options.get("busy_timeout_ms", 5000)),
        bulk_helper=bool(options.get("bulk_helper", True)),
    )
