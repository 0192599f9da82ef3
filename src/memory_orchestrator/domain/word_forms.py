"""Base forms of a question's words (pure): the last resort when none of its words matched.

The keyword index stems (Porter), which joins "babysits" and "babysitting" but leaves agent nouns
apart from their verbs: "babysitters" stems to "babysitt", "sitters" to "sitter", "visitors" to
"visitor". A question asked with the agent noun ("why did we change babysitters?") then finds nothing
although the notes say "babysits". The base forms are only searched when the question's own words
matched no memory at all, so a wrong guess ("mother" -> "moth") costs a search that had nothing to
lose.
"""

from __future__ import annotations

from memory_orchestrator.domain.planner import content_terms

#: Agent-noun endings, longest first ("-ers" before "-er").
AGENT_SUFFIXES = ("ers", "ors", "er", "or")
#: Shortest base a suffix may leave ("owner" -> "own").
MIN_BASE = 3
#: Final consonants that an English verb doubles before "-er" ("runner", "shopper", "babysitter").
_DOUBLED = frozenset("bdgmnprt")


def base_form(word: str) -> str | None:
    """The verb an agent noun is made from ("babysitters" -> "babysit"), else ``None``."""
    if not word.isalpha():
        return None
    for suffix in AGENT_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_BASE:
            base = word[: -len(suffix)]
            if len(base) > MIN_BASE and base[-1] == base[-2] and base[-1] in _DOUBLED:
                base = base[:-1]
            return base
    return None


def with_base_forms(text: str) -> str:
    """``text`` followed by the base forms of its content words; ``text`` itself when there are none."""
    bases = [base for term in content_terms(text) if (base := base_form(term)) is not None and base != term]
    return " ".join([text, *dict.fromkeys(bases)]) if bases else text
