"""The Mnemon backend (``github.com/mnemon-dev/mnemon``): ``create_backend(options)`` builds it.

Options: ``binary`` (name or path; ``$MNEMON_BIN`` wins), ``data_dir`` (Mnemon's base folder),
``store``, ``diff`` (let Mnemon's own dedup rewrite older memories; off by default because our write
path deduplicates), ``create`` (create the store if missing; otherwise a missing store is an error),
``timeout_s`` (every CLI call), ``lock_timeout_s`` (waiting for another writer), ``environment``
(extra variables for the binary, e.g. ``MNEMON_EMBED_ENDPOINT``), ``search`` (``index``: our stemmed
BM25 over the store, the default; ``mnemon``: Mnemon's own ``search`` command, for comparison).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memory_orchestrator.adapters.mnemon.backend import MnemonBackend
from memory_orchestrator.adapters.mnemon.binary import (
    ENV_VARIABLE,
    INSTALL_HINT,
    PINNED_VERSION,
    BinaryInfo,
    locate,
    probe,
)
from memory_orchestrator.adapters.mnemon.cli import CliTransport
from memory_orchestrator.ports import InvalidRequest

__all__ = [
    "ENV_VARIABLE",
    "INSTALL_HINT",
    "PINNED_VERSION",
    "BinaryInfo",
    "MnemonBackend",
    "create_backend",
    "existing_stores",
    "locate",
    "probe",
]

DEFAULT_STORE = "default"
_STORE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$")


def _data_dir(options: Mapping[str, Any]) -> Path:
    configured = options.get("data_dir") or os.environ.get("MNEMON_DATA_DIR") or Path.home() / ".mnemon"
    return Path(configured).expanduser().resolve()


def existing_stores(options: Mapping[str, Any]) -> list[str]:
    """Names of the stores with a database under Mnemon's data folder (``<data_dir>/data/<store>``)."""
    folder = _data_dir(options) / "data"
    if not folder.is_dir():
        return []
    return sorted(
        entry.name
        for entry in folder.iterdir()
        if _STORE_NAME.match(entry.name) and (entry / "mnemon.db").is_file()
    )


def create_backend(options: Mapping[str, Any]) -> MnemonBackend:
    """An unopened Mnemon backend (finds and probes the binary; no store I/O)."""
    store = str(options.get("store") or DEFAULT_STORE)
    if not _STORE_NAME.match(store):
        raise InvalidRequest(f"Mnemon store name {store!r} must match [a-zA-Z0-9][a-zA-Z0-9_-]*")
    info = probe(locate(str(options.get("binary") or "mnemon")))
    data_dir = _data_dir(options)
    environment = {str(k): str(v) for k, v in dict(options.get("environment") or {}).items()}
    transport = CliTransport(
        info.path,
        str(data_dir),
        store,
        timeout_s=float(options.get("timeout_s", 10.0)),
        environment=environment,
    )
    return MnemonBackend(
        transport,
        info,
        data_dir=data_dir,
        store=store,
        diff=bool(options.get("diff", False)),
        create=bool(options.get("create", store == DEFAULT_STORE)),
        lock_timeout_s=float(options.get("lock_timeout_s", 30.0)),
        native_search=str(options.get("search", "index")) == "mnemon",
    )
