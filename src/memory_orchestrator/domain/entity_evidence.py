"""Whether the candidates back the entity boost (pure): who says what the question asks about.

The entity signal boosts memories that carry a name the question names: in a conversation most
answers are the named person's own turns. A question can name the wrong person, though ("What does
Caroline say running has been great for?", answered by Melanie), and then the boost lifts the named
person's unrelated turns over the answer. The question text cannot tell the two apart; the
candidates can. When some memory *without* the name says most of the question's other words, and
more of them than any memory *with* the name, the named person is not the one who told it, and the
boost is weakened for that request (``RankingWeights.contested_entity``, a share of the boost kept).

Words are compared in a light stemmed form (see :func:`stem`), so "painted" meets "painting".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

from memory_orchestrator.domain.candidates import Candidate
from memory_orchestrator.domain.planner import content_terms
from memory_orchestrator.ports.text import tokenize

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


def coverage(words: Iterable[str], stems: frozenset[str]) -> int:
    """How many of ``stems`` the memory's ``words`` say."""
    return len(stems.intersection(stem(word) for word in words))


def entity_share(
    query: str,
    entities: Sequence[str],
    candidates: Sequence[Candidate],
    matches: Mapping[str, Sequence[str]],
    contested_share: float,
) -> float:
    """The share of the entity boost this request keeps: 1.0, or ``contested_share`` when a candidate
    carrying none of the question's entities covers more of its other words than every candidate that
    carries one, and more than half of them (``matches``: memory id -> the entities it carries).
    """
    if not entities or contested_share >= 1.0:
        return 1.0
    stems = question_stems(query, entities)
    if not stems:
        return 1.0
    named = other = 0
    for candidate in candidates:
        found = coverage(candidate.words(), stems)
        if matches.get(candidate.memory_id):
            named = max(named, found)
        else:
            other = max(other, found)
    # a majority of the question's words, or the "better" match may be two stray words of a long question
    return contested_share if other > named and 2 * other > len(stems) else 1.0
