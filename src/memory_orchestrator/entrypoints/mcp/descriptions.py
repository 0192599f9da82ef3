"""What each MCP tool tells the model: when to use it and what comes back.

Kept apart from the tool bodies because these texts are prompts: they are tuned for the model
reading a tool list, not for the engineer reading the code.
"""

from __future__ import annotations

DESCRIPTIONS: dict[str, str] = {
    "memory_context": (
        "Use at the start of a task or before answering from memory. Give the question (and the task) "
        "or a scope (an entity or project name) to get everything about it. Returns a ready-to-paste "
        "context_block that fits response_budget (max_items / max_chars / max_tokens), the items it was "
        "packed from (ids, scores, reasons), a one-paragraph summary, the ids cut for budget, and a "
        "trace_id for memory_explain."
    ),
    "memory_search": (
        "Ranked lookup of stored memories for a query, with optional filters (entities, categories, "
        "sources, time_range) and top_k. Graph links are followed from the direct hits unless "
        "expand=false. Each item has its score breakdown (signals) and human-readable reasons; the "
        "answer has a summary and a trace_id. Prefer memory_context when you need text to read."
    ),
    "memory_expand": (
        "Follow typed links (causal, temporal, entity, semantic) from known memories. Seeds are memory "
        "ids and/or entity names. Returns the linked memories with the path that reached each one. Use "
        "after a search when you need what surrounds a result."
    ),
    "memory_write": (
        "Store one memory: content, category (preference, decision, fact, insight, context, general), "
        "importance 1-5, tags, entities, source, optional links to existing ids and ids it supersedes. "
        "Duplicates are not stored twice: action is added, skipped (duplicate_of names the existing "
        "memory) or updated. Returns the id, link candidates you may confirm with memory_link, and a "
        "trace_id. Needs write access."
    ),
    "memory_explain": (
        "Show how an answer was produced: pass the trace_id of an earlier call, or a fresh query. "
        "Returns the full trace: the plan, the candidates of every stage with their scores, the graph "
        "expansion decisions, what was dropped and why, timings and warnings."
    ),
    "memory_health": (
        "Check that memory works: backend reachable, store present, indexes ready, vector search "
        "availability, and with probe=true a real write/read/forget round trip. Each check says ok, "
        "degraded or error with its duration. Needs no token."
    ),
    "memory_get": "Full memories by id (at most 100). Unknown or forgotten ids are listed under missing.",
    "memory_link": (
        "Create a typed edge between two stored memories: causal (source led to target), temporal, "
        "entity, semantic, or supersedes (source replaces target). Add evidence to say why. "
        "Needs write access."
    ),
    "memory_forget": (
        "Forget a memory by id (soft delete: it stops appearing in results and its links are hidden). "
        "Needs write access."
    ),
    "memory_changes": (
        "Catch up: what was added, updated, superseded or forgotten since a time. since is a timestamp "
        'or a phrase such as "last session", "2 days", "3 hours ago", "yesterday". Optionally only '
        "for one entity. Events are oldest first; not_visible says what this store cannot report."
    ),
    "memory_why": (
        "Answer a why-question from memory: finds the decision or fact it is about and returns its "
        "provenance chain ordered cause -> decision -> consequence, each link with its evidence and "
        "score, plus the supersession history (what it replaced, what replaced it)."
    ),
    "memory_session_summary": (
        "Call at the end of a session: give the decisions and key points (and background context). "
        "They are stored as deduplicated memories (decisions as decision, key points as fact), "
        "chained in order and tagged with a session entity so the next memory_context and "
        "memory_changes find them. Needs write access."
    ),
}
