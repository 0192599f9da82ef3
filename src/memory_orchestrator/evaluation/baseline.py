"""The BM25 baseline (``bm25s``) every evaluation run computes over the same corpus as the backends.

One index per store, over the memories' content; queries run "as of" their ``now`` (memories created
later are masked out) and ties are broken by corpus order so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import bm25s
import numpy as np

from memory_orchestrator.evaluation.datasets import DatasetMemory
from memory_orchestrator.ports import ensure_utc

#: bm25s' English stop list; no stemmer, so the baseline stays the plain reference figure.
STOPWORDS = "en"


class Bm25Baseline:
    """Okapi BM25 over one store's memory contents (``bm25s`` defaults: k1=1.5, b=0.75)."""

    def __init__(self, memories: Sequence[DatasetMemory]) -> None:
        self._ids = [memory.id for memory in memories]
        self._created = [memory.created_at for memory in memories]
        self._retriever: bm25s.BM25 | None = None
        self._vocab: dict[str, int] = {}
        texts = [memory.content for memory in memories]
        if not texts:
            return
        tokens = bm25s.tokenize(texts, stopwords=STOPWORDS, show_progress=False)
        self._vocab = dict(tokens.vocab)
        self._retriever = bm25s.BM25()
        self._retriever.index(tokens, show_progress=False)

    def search(self, text: str, *, limit: int, now: datetime | None = None) -> list[str]:
        """Dataset ids of the best ``limit`` memories for ``text`` created at or before ``now``.

        Only memories sharing a term with the query are returned (a zero score is no match).
        """
        if self._retriever is None:
            return []
        query = bm25s.tokenize([text], stopwords=STOPWORDS, return_ids=False, show_progress=False)[0]
        token_ids = [self._vocab[token] for token in query if token in self._vocab]
        if not token_ids:
            return []
        scores = np.asarray(self._retriever.get_scores(token_ids), dtype=np.float64)
        if now is not None:
            scores = scores * self._visible_mask(ensure_utc(now))
        # lexsort: last key is primary -> highest score first, then corpus order
        order = np.lexsort((np.arange(len(scores)), -scores))
        ranked = [int(index) for index in order[:limit] if scores[index] > 0.0]
        return [self._ids[index] for index in ranked]

    def _visible_mask(self, now: datetime) -> np.ndarray:
        return np.array(
            [1.0 if created is None or created <= now else 0.0 for created in self._created],
            dtype=np.float64,
        )
