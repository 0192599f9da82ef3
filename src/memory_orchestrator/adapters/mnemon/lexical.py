"""An in-process BM25 index over a Mnemon store's memories, with light English stemming.

Mnemon's own ``search`` scores the share of query words present (no IDF, no stemming: ``invoices`` does
not find ``invoice``) and costs a process per call. A Mnemon store holds at most about 1,000 active
memories, so an index rebuilt whenever the store changes costs a few milliseconds and answers in well
under one.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memory_orchestrator.ports.text import CONTEXT_WEIGHT, tokenize

K1 = 1.2
B = 0.75

_KEEP_ENDINGS = ("ss", "us", "is")
_ES_AFTER = ("s", "x", "z", "ch", "sh")


def _strip_suffix(token: str) -> str:
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    if token.endswith("es") and token[:-2].endswith(_ES_AFTER):
        return token[:-2]
    if token.endswith("s") and not token.endswith(_KEEP_ENDINGS):
        return token[:-1]
    for suffix in ("ing", "ed"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            base = token[: -len(suffix)]
            # planned -> plan, running -> run (a doubled final consonant is undone)
            if len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]
            return base
    return token


def stem(token: str) -> str:
    """A light suffix-stripping stem: plurals, -ed, -ing and a final -e, so that ``invoices``,
    ``invoice``, ``moved`` / ``moving`` / ``move`` meet. Non-alphabetic and short tokens are kept."""
    if not token.isalpha() or len(token) <= 3:
        return token
    base = _strip_suffix(token)
    if base.endswith("e") and len(base) > 3:
        base = base[:-1]
    return base


def terms(text: str) -> list[str]:
    """The stemmed index terms of ``text``."""
    return [stem(token) for token in tokenize(text)]


@dataclass
class LexicalIndex:
    """BM25 postings of a fixed set of documents (rebuilt, never updated in place)."""

    postings: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    lengths: dict[str, int] = field(default_factory=dict)
    average_length: float = 0.0

    @classmethod
    def build(cls, documents: Iterable[tuple[str, str, str]]) -> LexicalIndex:
        """Index ``(id, text, context)`` triples: the context's terms count ``CONTEXT_WEIGHT`` each
        (context at index time, as adapters/sqlite/context.py explains)."""
        postings: dict[str, list[tuple[str, float]]] = defaultdict(list)
        lengths: dict[str, int] = {}
        for doc_id, text, context in documents:
            own, around = Counter(terms(text)), Counter(terms(context))
            lengths[doc_id] = sum(own.values()) + sum(around.values())
            for term in own.keys() | around.keys():
                postings[term].append((doc_id, own[term] + CONTEXT_WEIGHT * around[term]))
        average = sum(lengths.values()) / len(lengths) if lengths else 0.0
        return cls(dict(postings), lengths, average)

    def scores(self, query: str, allowed: Sequence[str] | None = None) -> dict[str, float]:
        """BM25 score of every document sharing a term with ``query`` (restricted to ``allowed``)."""
        total = len(self.lengths)
        keep = set(allowed) if allowed is not None else None
        found: dict[str, float] = defaultdict(float)
        for term in dict.fromkeys(terms(query)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (total - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc_id, count in posting:
                if keep is not None and doc_id not in keep:
                    continue
                norm = 1 - B + B * self.lengths[doc_id] / (self.average_length or 1.0)
                found[doc_id] += idf * count * (K1 + 1) / (count + K1 * norm)
        return dict(found)
