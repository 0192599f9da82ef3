"""The evaluation modes, apart from the runner so the CLI can list them without the evaluation stack."""

from __future__ import annotations

MODES = ("raw", "keyword", "orchestrated", "expanded", "context")
