"""Where a run happened: package versions, the git commit of the source tree, the machine."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path


def git_revision() -> str:
    """The checked-out commit of this source tree (``+dirty`` with local changes), or ``""``."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return ""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head.stdout.strip() + ("+dirty" if status.stdout.strip() else "")


def versions() -> dict[str, str]:
    """Versions of this package (and its git commit), Python and the evaluation libraries."""
    found = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count() or 0),
        "git": git_revision(),
    }
    for name in ("mnemon-memory-orchestrator", "bm25s", "numpy", "matplotlib"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found
