"""The text part of a tool result: what a model reads, kept short; full detail is structured.

``memory_context`` gives its context block itself (already within the requested token budget, ids
kept); tools that return memories give one line per memory (id, score, summary); every other tool
gives its structured result as compact JSON. Nothing is pretty-printed or repeated.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

#: Longest line of a listed memory's summary.
SUMMARY_CHARS = 160


def result_text(tool: str, output: BaseModel, data: dict[str, Any]) -> str:
    """The text content of ``tool``'s result (``data`` is ``output`` dumped for the wire)."""
    if tool == "memory_context":
        return str(data.get("context_block", ""))
    items = data.get("items")
    if isinstance(items, list) and tool in {"memory_search", "memory_expand"}:
        return _listing(items, data)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def _listing(items: list[dict[str, Any]], data: dict[str, Any]) -> str:
    lines = [f"{len(items)} memories (trace {data.get('trace_id', '')}); full detail in structuredContent"]
    for rank, item in enumerate(items, start=1):
        summary = str(item.get("summary") or item.get("content") or "")
        if len(summary) > SUMMARY_CHARS:
            summary = summary[: SUMMARY_CHARS - 1] + "…"
        flag = " [superseded]" if item.get("superseded") else ""
        lines.append(f"{rank}. {item.get('memory_id')} ({float(item.get('score', 0.0)):.2f}){flag} {summary}")
    lines.extend(f"warning: {warning}" for warning in data.get("warnings") or ())
    return "\n".join(lines)
