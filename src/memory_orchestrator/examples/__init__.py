"""Bundled example memory sets in the eval format (package data).

``atlas``: a fictional team migrating project Atlas off a legacy warehouse and a hosting vendor,
January to May 2026: people, a vendor, decisions with causal chains, superseded decisions and a
near-duplicate pair, with questions and their gold memories (``queries.jsonl``).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from memory_orchestrator.ports import InvalidRequest

#: Names of the bundled sets.
EXAMPLE_SETS = ("atlas",)


def example_path(name: str = "atlas") -> Path:
    """The folder of a bundled example set (``memories.jsonl`` + ``queries.jsonl``)."""
    if name not in EXAMPLE_SETS:
        raise InvalidRequest(f"unknown example set {name!r} (bundled: {', '.join(EXAMPLE_SETS)})")
    folder = Path(str(files(__name__).joinpath(name)))
    if not (folder / "memories.jsonl").is_file():
        raise InvalidRequest(f"example set {name!r} is not installed as files (looked in {folder})")
    return folder
