"""What each MCP tool tells the model: when to use it and what comes back.

Kept apart from the tool bodies because these texts are prompts: they are tuned for the model
reading a tool list, not for the engineer reading the code.
"""

from __future__ import annotations

DESCRIPTIONS: dict[str, str] = {
    "memory_context": (
        "Use at the start of a task or before answering from memory: a ready-to-paste context_block "
        "for a question (or everything about a scope) within response_budget, with the items it "
        "came from (ids, scores, reasons) and a trace_id."
    ),
    "memory_search": (
        "Ranked memories for a query (filters, top_k), graph links followed unless expand=false; each "
        "item has its score, signals and reasons. Prefer memory_context for text to read."
    ),
    "memory_expand": (
        "Follow typed links (causal, temporal, entity, semantic) from memory ids or entity names; "
        "returns the linked memories with the path that reached each."
    ),
    "memory_write": (
        "Store one memory. A duplicate is not stored twice (action added, skipped with duplicate_of, "
        "or updated). Returns the id, link candidates to confirm with memory_link, and a trace_id. "
        "Needs write access."
    ),
    "memory_explain": (
        "How an answer was produced: the trace of an earlier call (trace_id) or of a fresh query, with "
        "the plan, each stage's candidates and scores, drops and why, timings and warnings."
    ),
    "memory_health": (
        "Is memory working: backend, store, indexes; probe=true makes a real write/read/forget round "
        "trip. Each check is ok, degraded or error. Needs no token."
    ),
    "memory_stores": (
        "The stores you may read or write, with memory counts. An empty list means not authorised, "
        "not an empty store."
    ),
    "memory_get": "Full memories by id (at most 100); unknown or forgotten ids are listed under missing.",
    "memory_link": (
        "Create a typed edge between two memories: causal (source led to target), temporal, entity, "
        "semantic, or supersedes (source replaces target). Needs write access."
    ),
    "memory_forget": (
        "Forget a memory by id (soft delete: it and its links stop appearing). Needs write access."
    ),
    "memory_changes": (
        'Catch up: what was added, updated, superseded or forgotten since a time ("last session", '
        '"2 days", "yesterday" or a timestamp), optionally for one entity; oldest first.'
    ),
    "memory_why": (
        "Answer a why-question: the decision or fact it is about with its provenance chain (cause -> "
        "decision -> consequence, with evidence) and what it replaced or what replaced it."
    ),
    "memory_session_summary": (
        "At the end of a session: store its decisions and key points as deduplicated memories, chained "
        "and tagged with the session, so the next memory_context and memory_changes find them. Needs "
        "write access."
    ),
}
