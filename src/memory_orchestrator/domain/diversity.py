"""Episode diversity of the top results for a question asking for several things (pure).

Memories written within ``ports.text.CONTEXT_WINDOW`` of each other belong to one episode (a
conversation's session, a burst of notes). Keyword search with context at index time finds a turn
together with the turns around it, so one episode can fill the whole top-k with a hit and its
neighbours while a question that needs several facts ("what do Melanie's kids like?", "what has
Maria done to help others?") has them in different episodes. The results are therefore chosen
greedily, MMR-style: each next result is the one with the best score after a penalty of
``EPISODE_PENALTY`` per result already chosen from its episode. A hit from another episode then
outranks the third or fourth neighbour of the same hit; a much stronger hit still wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from memory_orchestrator.domain.ranking import RankedItem, order_key
from memory_orchestrator.ports.text import CONTEXT_WINDOW

#: Score cost per result already chosen from the same episode. On the LoCoMo tuning conversations
#: (list questions only) 0.03, 0.05, 0.07 gave multi-hop R@10 48.4, 48.7, 49.2 (46.5 without);
#: 0.1 and 0.2 gave 47.6 and 44.5: several answers are often told in the same session too.
#: Applied to every question, even 0.02 cost single-hop questions 2 points (their answer is
#: usually a later turn of the session the best hit comes from), hence only for list questions.
EPISODE_PENALTY = 0.05


def diversify(items: Sequence[RankedItem], keep: int, window: timedelta = CONTEXT_WINDOW) -> list[RankedItem]:
    """``items`` (best first, stale ones last) with the first ``keep`` chosen for episode diversity.

    A chosen item that paid a penalty carries it as its ``diversity`` signal, has it taken off its
    score and says why; the rest follow in their previous order. Superseded items stay last.
    """
    remaining = list(items)
    # how many chosen items share each remaining item's episode, kept up to date as items are chosen
    same = [0] * len(remaining)
    chosen: list[RankedItem] = []
    while remaining and len(chosen) < keep:
        best = min(range(len(remaining)), key=lambda index: _choice_key(remaining[index], same[index]))
        item, count = remaining.pop(best), same.pop(best)
        if count:
            penalty = EPISODE_PENALTY * count
            item.score -= penalty
            item.signals["diversity"] = round(penalty, 6)
            item.notes.append(f"{count} stronger result(s) from the same episode (-{penalty:.2f})")
        chosen.append(item)
        moment = item.record.created_at
        for index, other in enumerate(remaining):
            if abs(other.record.created_at - moment) <= window:
                same[index] += 1
    return chosen + remaining


def _choice_key(item: RankedItem, same: int) -> tuple[bool, float, float, str]:
    # stale items last; then the score after the episode penalty, newer first, id (as order_key)
    _, newer, memory_id = order_key(item)
    return (item.superseded, -round(item.score - EPISODE_PENALTY * same, 9), newer, memory_id)
