"""Tunable settings of the pipeline (plain dataclasses; the entrypoints fill them from settings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from memory_orchestrator.ports import EdgeType, Intent


def _table(rows: dict[Intent, dict[EdgeType, float]]) -> Mapping[Intent, Mapping[EdgeType, float]]:
    return MappingProxyType({intent: MappingProxyType(dict(row)) for intent, row in rows.items()})


#: Edge weights per intent (DESIGN.md); ``supersedes`` is never followed for relevance.
DEFAULT_EDGE_WEIGHTS = _table(
    {
        Intent.WHY: {
            EdgeType.CAUSAL: 0.70,
            EdgeType.TEMPORAL: 0.20,
            EdgeType.ENTITY: 0.05,
            EdgeType.SEMANTIC: 0.05,
            EdgeType.SUPERSEDES: 0.0,
        },
        Intent.WHEN: {
            EdgeType.TEMPORAL: 0.65,
            EdgeType.CAUSAL: 0.15,
            EdgeType.ENTITY: 0.10,
            EdgeType.SEMANTIC: 0.10,
            EdgeType.SUPERSEDES: 0.0,
        },
        Intent.ENTITY: {
            EdgeType.ENTITY: 0.55,
            EdgeType.SEMANTIC: 0.30,
            EdgeType.CAUSAL: 0.10,
            EdgeType.TEMPORAL: 0.05,
            EdgeType.SUPERSEDES: 0.0,
        },
        Intent.GENERAL: {
            EdgeType.TEMPORAL: 0.25,
            EdgeType.ENTITY: 0.25,
            EdgeType.CAUSAL: 0.25,
            EdgeType.SEMANTIC: 0.25,
            EdgeType.SUPERSEDES: 0.0,
        },
    }
)


#: Retrieval channels a backend may offer, by the names ``channel_weights`` uses.
RETRIEVAL_CHANNELS: tuple[str, ...] = ("keyword", "recall")


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """Weights of the re-ranking formula (DESIGN.md, pipeline step 4)."""

    relevance: float = 1.0
    recency: float = 0.15
    graph: float = 0.15
    type_match: float = 0.10
    #: Gentle on purpose: adversarial questions name the wrong person. On LoCoMo tuning conversations
    #: 0.30 gave expanded R@10 76.7 but adversarial recall 78.4; 0.15 gave 76.0 and 82.8 (= keyword).
    #: With ``contested_entity`` taking the boost off such requests, 0.20 (tuning / held-out 78.2 /
    #: 73.0, adversarial 84.9 / 87.5) beats 0.15 (77.7 / 72.8, 84.9 / 86.7) and 0.25 (78.1, 82.3).
    entity: float = 0.20
    #: Share of the entity boost kept when the memories without the question's entities say its other
    #: words better than those with them (the question named the wrong person; ``entity_evidence``).
    #: LoCoMo expanded R@10 tuning / held-out, adversarial 83.3 / 84.2 -> 85.4 / 89.2 at 0 (keyword
    #: 84.1 / 87.5), categories 1-4 78.4 / 73.0 -> 78.2 / 73.1.
    contested_entity: float = 0.0
    #: Added to ``entity`` for a question that asks for several things ("What books has Melanie
    #: read?", ``list_questions``): its answers are the named person's own turns, told weeks apart.
    #: LoCoMo multi-hop R@10 tuning: 48.1 at 0 and 0.05, 49.3 at 0.10-0.20 (the smallest kept);
    #: held-out 38.7 -> 38.8, adversarial 89.2 -> 87.5 (keyword 87.5).
    list_entity: float = 0.10
    importance: float = 0.05
    cross_reference: float = 0.10
    duplication: float = 0.20
    noise: float = 0.20
    #: A memory inside the time window a question names (a soft signal; see ``ranking.time_match``).
    time: float = 0.30
    #: Multiplier applied to the score of a superseded memory.
    superseded_factor: float = 0.25


@dataclass(frozen=True, slots=True)
class ExpansionLimits:
    """Bounds of the graph expansion."""

    hops: int = 2
    beam_width: int = 10
    max_visited: int = 200
    #: Neighbours kept per node per hop (hub guard); the rest is recorded as cut.
    max_fanout: int = 12
    #: Expanded items must reach this path score to enter ranking.
    min_path_score: float = 0.05
    #: Share of its parent's relevance a neighbour inherits per hop (times the intent edge weight,
    #: relative to the intent's strongest edge type, and the edge's own weight).
    hop_decay: float = 0.6
    #: The j-th strongest neighbour of one node inherits ``1 / (1 + sibling_decay * j)`` of its share,
    #: so one strong hit cannot flood the results with its whole neighbourhood.
    sibling_decay: float = 0.5
    #: Only direct hits at least this relevant (1.0 = the best hit) seed the walk: weak matches would
    #: spend the beam on neighbourhoods nobody asked about.
    min_seed_relevance: float = 0.5


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Everything the pipeline can be tuned by. Every field has a sensible default."""

    default_top_k: int = 10
    max_top_k: int = 100
    #: Candidates fetched per channel and subquery before fusion.
    candidates_per_channel: int = 50
    #: Fusion weight per retrieval channel; a channel weighted 0 is not called while another channel
    #: is available. The backends' native recall fuses keyword, entity and recency lists; next to a
    #: keyword channel it lowered recall@10 on LoCoMo dev (0.652 at weight 0, 0.642 at 0.1, 0.619 at
    #: 0.3), so by default it only answers when the backend has no keyword search.
    channel_weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"keyword": 1.0, "recall": 0.0})
    )
    rrf_k: int = 60
    edge_weights: Mapping[Intent, Mapping[EdgeType, float]] = field(
        default_factory=lambda: DEFAULT_EDGE_WEIGHTS
    )
    allowed_edge_types: tuple[EdgeType, ...] = (
        EdgeType.TEMPORAL,
        EdgeType.ENTITY,
        EdgeType.CAUSAL,
        EdgeType.SEMANTIC,
    )
    expansion: ExpansionLimits = ExpansionLimits()
    weights: RankingWeights = RankingWeights()
    #: Half-life of the recency signal, in days.
    recency_half_life_days: float = 30.0
    #: Token Jaccard at or above which two results are one (read path) / a write is a near duplicate.
    dedup_threshold: float = 0.85
    write_dedup_threshold: float = 0.85
    #: Per-stage timeout in seconds (retrieval, expansion); a stage that overruns is cut with a warning.
    stage_timeout_s: float = 5.0
    #: Items scoring below this are dropped with reason ``below threshold``.
    min_score: float = 0.0
    #: Characters per token for the budget estimate.
    chars_per_token: float = 4.0
    #: Max characters of one item's text in a packed context before it is trimmed around the query.
    max_item_chars: int = 600
    #: Orchestration off: every call passes straight through to the backend's own recall / remember.
    passthrough: bool = False
    #: Traces kept in the trace store (oldest are pruned), and how much they hold (``basic|full``).
    trace_retention: int = 1000
    trace_verbosity: str = "basic"
    #: How long the backend's entity names are cached for the planner, in seconds (0: no cache).
    known_entities_ttl_s: float = 300.0
