"""Whether the candidates back the entity boost (pure): who says what the question asks about.

The entity signal boosts memories that carry a name the question names: in a conversation most
answers are the named person's own turns. A question can name the wrong person, though ("What does
Caroline say running has been great for?", answered by Melanie), and then the boost lifts the named
person's unrelated turns over the answer. The question text cannot tell the two apart; the
candidates can. When the memories *without* the name say the question's other words better than the
memories *with* it (one of them says most of the words and more than any named one, or their best
few say clearly more of them in total), the named person is not the one who told it, and the boost
is weakened for that request (``RankingWeights.contested_entity``, a share of the boost kept).

Words are compared in a light stemmed form (see :func:`stem`), so "painted" meets "painting".
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from functools import lru_cache

from memory_orchestrator.domain.candidates import Candidate, content_tokens
from memory_orchestrator.domain.planner import content_terms
from memory_orchestrator.ports.text import tokenize

#: How many best matches per side the spread test of :func:`contested` adds up.
TOP_MATCHES = 3
#: How many more question words the other side's best matches must say in total.
MARGIN = 2
#: Verb and adverb endings :func:`stem` removes (the first that fits), longer before shorter.
_ENDINGS = ("ingly", "edly", "ing", "ed")
#: Shortest stem an ending may leave ("sing" stays "sing", "red" stays "red").
_MIN_STEM = 3
#: Final consonants doubled before "-ing"/"-ed" ("running", "stopped").
_DOUBLED = frozenset("bdgmnprt")
#: Plurals in "-es" are the ones after a hiss ("boxes", "classes", "watches"); "games" is "game"+"s".
_HISS = ("s", "x", "z", "ch", "sh")


@lru_cache(maxsize=32768)
def stem(word: str) -> str:
    """A light stem: a plural, then a verb ending, then a final "e" off, so that "games" meets
    "game", "painted" meets "painting" and "making" meets "make" (and "running" is "run")."""
    base = _singular(word)
    for ending in _ENDINGS:
        if base.endswith(ending) and len(base) - len(ending) >= _MIN_STEM:
            base = base[: -len(ending)]
            if len(base) > _MIN_STEM and base[-1] == base[-2] and base[-1] in _DOUBLED:
                base = base[:-1]
            break
    return base[:-1] if base.endswith("e") and len(base) > _MIN_STEM else base


def _singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2].endswith(_HISS) and len(word) > 4:
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def question_stems(query: str, entities: Sequence[str]) -> frozenset[str]:
    """The stems of the question's content words, the named entities' own words (and the "s" of a
    possessive) taken out."""
    names = {token for name in entities for token in tokenize(name)}
    return frozenset(stem(term) for term in content_terms(query) if len(term) > 1 and term not in names)


def coverage(content: str, stems: frozenset[str]) -> int:
    """How many of ``stems`` the memory's ``content`` says."""
    return len(stems.intersection(stemmed(content)))


@lru_cache(maxsize=16384)
def stemmed(content: str) -> tuple[str, ...]:
    """The distinct stems of a memory's words; cached by content, as the same memories come back
    query after query. Plain tuples of strings, which the cycle collector stops tracking (cached sets,
    keyed by sets, would be walked by every full collection)."""
    return tuple({stem(word): None for word in content_tokens(content)})


def entity_share(
    query: str,
    entities: Sequence[str],
    candidates: Sequence[Candidate],
    matches: Mapping[str, Sequence[str]],
    contested_share: float,
) -> float:
    """The share of the entity boost this request keeps: 1.0, or ``contested_share`` when the
    candidates carrying none of the question's entities say its other words better than those that
    carry one (see :func:`contested`; ``matches``: memory id -> the entities it carries).
    """
    if not entities or contested_share >= 1.0:
        return 1.0
    stems = question_stems(query, entities)
    if not stems:
        return 1.0
    named: list[int] = []
    other: list[int] = []
    for candidate in candidates:
        side = named if matches.get(candidate.memory_id) else other
        side.append(coverage(candidate.record.content, stems))
    return contested_share if contested(named, other, len(stems)) else 1.0


def contested(named: list[int], other: list[int], words: int) -> bool:
    """True when the memories without the name say the question better than those with it.

    ``named`` and ``other`` are how many of the question's ``words`` each memory says. Either the
    best other memory says a majority of them and more than the best named one (one memory told
    it), or the best ``TOP_MATCHES`` other memories say at least ``MARGIN`` more of them in total
    than the best named ones (the telling is spread over a few turns).
    """
    best_named, best_other = max(named, default=0), max(other, default=0)
    # a majority, or the "better" match may be two stray words of a long question
    if best_other > best_named and 2 * best_other > words:
        return True
    top_named = sum(heapq.nlargest(TOP_MATCHES, named))
    return sum(heapq.nlargest(TOP_MATCHES, other)) - top_named >= MARGIN
