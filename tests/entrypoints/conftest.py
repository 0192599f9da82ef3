"""Fixtures shared by the entrypoint tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Own data dir and cwd, and no ambient ORCHESTRATOR_* configuration (no developer config leaks in)."""
    for name in list(os.environ):
        if name.startswith("ORCHESTRATOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    return tmp_path
