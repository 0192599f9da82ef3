"""Questions that ask for several things (pure): "What books has Melanie read?", "How many times ...".

Such a question is answered by things told at different times, each in the asker's own words about
the person named ("I just finished 'Becoming Nicole'", weeks apart), so the planner marks it with a
cue and ranking leans more on the named entity for it (``RankingWeights.list_entity``).
"""

from __future__ import annotations

import re

#: Cue prefix of a question that asks for several things (in the plan's ``intent_cues``).
SEVERAL_CUE = "several: "
_AUX = r"(?:has|have|had|does|do|did|is|are|was|were|can|could|will|would)"
_PLURAL_NOUN = r"[\w+-]*[^\Ws']s"
_SEVERAL = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\bhow many\b",
        r"\bboth\b",
        # "What books has ...", "Which US cities does ...", "What types of yoga has ..."
        rf"^(?:what|which)\s+(?:[\w+'-]+\s+){{0,2}}?{_PLURAL_NOUN}\s+(?:of\s+[\w'-]+\s+(?:[\w'-]+\s+)?)?{_AUX}\b",
        # "What are Melanie's pets' names", "What are some changes ..."
        r"^(?:what|which|who)\s+are\b",
        # "What has Melanie painted?", "Where has Maria made friends?": all of it, over time
        r"^(?:what|where|who|which)\b(?:\s+[\w'+-]+){0,3}?\s+(?:has|have)\s+[\w']+\s+(?:\w+\s+)?"
        r"(?:\w+ed|been(?!\s+\w+ing\b)|done|made|read|seen|taken|met|bought|had|gone|eaten|written|drawn)\b",
    )
)


def asks_for_several(canonical: str) -> str | None:
    """The phrase that makes ``canonical`` ask for several things, or ``None``."""
    for pattern in _SEVERAL:
        match = pattern.search(canonical)
        if match:
            return match.group().strip()
    return None


def several_cue(canonical: str) -> tuple[str, ...]:
    """``("several: <phrase>",)`` for a question asking for several things, else ``()``."""
    phrase = asks_for_several(canonical)
    return () if phrase is None else (SEVERAL_CUE + phrase,)


def is_list_question(intent_cues: tuple[str, ...]) -> bool:
    """True when a plan's cues mark its question as asking for several things."""
    return any(cue.startswith(SEVERAL_CUE) for cue in intent_cues)
