"""The second model, bge-small-en-v1.5, read from its Maven Central jar (``scripts/setup-models``)."""

from __future__ import annotations

import shutil
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from memory_orchestrator_dense import DenseChannel, create_channel
from memory_orchestrator_dense.embedder import BGE_ARTIFACT, BGE_SMALL, MINILM, OnnxEmbedder
from model_jars import Recording, installed_jar

from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.ports import Filters, FixedClock, InvalidRequest, NewMemory

T0 = datetime(2026, 3, 1, tzinfo=UTC)
LATER = datetime(2026, 4, 1, tzinfo=UTC)
JAR = installed_jar(BGE_SMALL)


@pytest.fixture(scope="module")
def bge() -> OnnxEmbedder:
    return OnnxEmbedder(BGE_SMALL)


def test_bge_vectors_are_unit_length_cls_pooled_and_similar_sentences_are_closer(bge: OnnxEmbedder) -> None:
    vectors = bge.embed(["The cat sat on the mat", "A feline rested on the rug", "Stock prices fell"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.1
    alone = bge.embed(["A feline rested on the rug"])[0]
    # int8 with dynamic activation scales: a batch's padding moves a vector a little, never far
    assert float(alone @ vectors[1]) > 0.99
    # another model, another space: vectors of the two never meet in one index
    assert bge.space != MINILM.space
    assert not np.allclose(vectors[0], OnnxEmbedder(MINILM).embed(["The cat sat on the mat"])[0], atol=0.05)


@pytest.mark.anyio
async def test_a_search_text_gets_the_query_instruction_and_memories_do_not(
    tmp_path: Path, bge: OnnxEmbedder
) -> None:
    recording = Recording(bge)

    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        pet = await backend.remember(NewMemory("Our tabby likes to nap on the rug in the sun"))
        await backend.remember(NewMemory("Postgres replication lag reached ten minutes on Tuesday"))
        channel = DenseChannel(recording)
        hits = await channel.search(backend, "sleeping cat carpet", limit=2, filters=Filters(), now=LATER)
    assert hits[0].record.id == pet.id and hits[0].score == 1.0 and hits[1].score < 1.0
    assert BGE_SMALL.query_prefix and recording.seen[-1] == BGE_SMALL.query_prefix + "sleeping cat carpet"
    assert not any(text.startswith(BGE_SMALL.query_prefix) for text in recording.seen[:-1])


def test_the_channel_takes_the_model_by_name_from_maven_or_from_a_jar_given(tmp_path: Path) -> None:
    channel = create_channel({"model_name": "bge-small-en-v1.5"})
    assert channel.embedder.space == BGE_SMALL.space
    copy = tmp_path / "bge.jar"
    shutil.copyfile(JAR, copy)
    from_copy = create_channel({"model_name": "bge-small-en-v1.5", "model": str(copy)})
    assert np.allclose(from_copy.embedder.embed(["Kafka lag"]), channel.embedder.embed(["Kafka lag"]))
    with pytest.raises(InvalidRequest, match="model_name must be one of"):
        create_channel({"model_name": "bge-large"})
    empty = tmp_path / "empty.jar"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("README", "no model here")
    with pytest.raises(InvalidRequest, match=r"holds 0 \.onnx and 0 tokenizer\.json"):
        create_channel({"model_name": "bge-small-en-v1.5", "model": str(empty)})


def test_a_missing_model_file_is_a_clear_error_that_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memory_orchestrator_dense import embedder

    monkeypatch.setattr(embedder, "_M2", Path("/nonexistent/m2"))
    with pytest.raises(InvalidRequest, match=f"mvn dependency:get -Dartifact={BGE_ARTIFACT}"):
        create_channel({"model_name": "bge-small-en-v1.5"})
