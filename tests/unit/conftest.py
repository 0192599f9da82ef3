"""Fixtures shared by the unit tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def no_ambient_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ambient configuration leaks in: empty cwd, no ORCHESTRATOR_* variables."""
    for name in list(os.environ):
        if name.startswith("ORCHESTRATOR_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path
