"""The dense channel with the real model on a real SQLite store, discovered through its entry point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from memory_orchestrator_dense import SPACE, DenseChannel, MiniLmEmbedder, create_channel

from memory_orchestrator.adapters.memory import InMemoryBackend
from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.domain.orchestrator import Orchestrator
from memory_orchestrator.domain.requests import SearchRequest
from memory_orchestrator.plugins.manager import load_plugins
from memory_orchestrator.ports import Filters, FixedClock, InvalidRequest, NewMemory

T0 = datetime(2026, 3, 1, tzinfo=UTC)
LATER = datetime(2026, 4, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


def test_vectors_are_unit_length_and_similar_sentences_are_closer(embedder: MiniLmEmbedder) -> None:
    vectors = embedder.embed(["The cat sat on the mat", "A feline rested on the rug", "Stock prices fell"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.3
    # batching (sorted, padded) does not change a text's vector beyond rounding
    alone = embedder.embed(["A feline rested on the rug"])[0]
    assert float(alone @ vectors[1]) > 0.999


async def seeded(path: Path) -> tuple[SqliteBackend, dict[str, str]]:
    backend = SqliteBackend(path, clock=FixedClock(T0))
    await backend.open()
    texts = {
        "pet": "Our tabby likes to nap on the rug in the sun",
        "db": "Postgres replication lag reached ten minutes on Tuesday",
        "trip": "Melanie booked flights to Lisbon for the conference",
    }
    ids = {}
    for key, text in texts.items():
        category = "decision" if key == "trip" else "fact"
        ids[key] = (await backend.remember(NewMemory(text, category=category))).id
    return backend, ids


@pytest.mark.anyio
async def test_the_channel_finds_a_paraphrase_keyword_search_cannot(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    backend, ids = await seeded(tmp_path / "m.db")
    try:
        channel = DenseChannel(embedder)
        assert channel.supports(backend)
        assert await backend.search("sleeping cat carpet", limit=5) == []
        hits = await channel.search(backend, "sleeping cat carpet", limit=2, filters=Filters(), now=LATER)
        assert hits[0].record.id == ids["pet"]
        assert hits[0].score == 1.0 and hits[1].score < 0.5  # the model's odds relative to the best
        orchestrator = Orchestrator(backend, clock=FixedClock(LATER), channels=[channel])
        result = await orchestrator.search(SearchRequest("sleeping cat carpet", top_k=3))
        assert result.items[0].memory_id == ids["pet"]
    finally:
        await backend.aclose()


@pytest.mark.anyio
async def test_vectors_are_stored_once_and_reused_after_a_restart(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    backend, ids = await seeded(tmp_path / "m.db")
    try:
        report = await DenseChannel(embedder).index(backend)
        assert report.embedded == 3 and report.per_second > 0
        assert await backend.without_vectors(SPACE, limit=10) == []
    finally:
        await backend.aclose()
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as reopened:
        fresh = DenseChannel(embedder)
        assert (await fresh.index(reopened)).embedded == 0
        new = (await reopened.remember(NewMemory("The kitten dozed on the carpet"))).id
        # a search catches up with memories stored since the last look
        hits = await fresh.search(reopened, "cat sleeping on a rug", limit=4, filters=Filters(), now=LATER)
        assert {hit.record.id for hit in hits[:2]} == {new, ids["pet"]}


@pytest.mark.anyio
async def test_forgotten_filtered_and_future_memories_are_not_returned(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    backend, ids = await seeded(tmp_path / "m.db")
    try:
        channel = DenseChannel(embedder)
        await backend.forget(ids["pet"])
        hits = await channel.search(backend, "cat napping", limit=5, filters=Filters(), now=LATER)
        assert ids["pet"] not in {hit.record.id for hit in hits}
        only_trip = Filters(categories=("decision",))
        hits = await channel.search(backend, "travel plans", limit=5, filters=only_trip, now=LATER)
        assert [hit.record.id for hit in hits] == [ids["trip"]]
        before = datetime(2026, 1, 1, tzinfo=UTC)
        assert await channel.search(backend, "travel plans", limit=5, filters=Filters(), now=before) == []
    finally:
        await backend.aclose()


@pytest.mark.anyio
async def test_a_backend_without_vectors_is_not_supported(embedder: MiniLmEmbedder) -> None:
    channel = DenseChannel(embedder)
    async with InMemoryBackend(clock=FixedClock(T0)) as backend:
        await backend.remember(NewMemory("Kafka consumer lag"))
        assert not channel.supports(backend)
        with pytest.raises(InvalidRequest, match="does not store vectors"):
            await channel.index(backend)
        result = await Orchestrator(backend, channels=[channel]).search(SearchRequest("Kafka"))
        assert any("channel dense does not run on backend memory" in warning for warning in result.warnings)


def test_the_entry_point_registers_the_channel_and_options_are_checked() -> None:
    manager = load_plugins()
    assert "dense" in manager.channels
    assert manager.channels["dense"].plugin == "dense"
    channel = manager.create_channel("dense", {"index_batch": 64})
    assert channel.name == "dense"
    for bad in ({"index_batch": 0}, {"threads": "four"}, {"model": "x"}, {"size": 3}):
        with pytest.raises(InvalidRequest):
            create_channel(bad)


def test_another_copy_of_the_model_is_an_option_settings_accept_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_orchestrator_dense.embedder import model_file

    from memory_orchestrator.entrypoints.config.settings import load_settings

    copy = tmp_path / "model.onnx"
    copy.write_bytes(model_file().read_bytes())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ORCHESTRATOR_CHANNELS__OPTIONS__DENSE__MODEL", str(copy))
    options = load_settings().channels.options["dense"]
    assert options == {"model": str(copy)}
    channel = create_channel(options)
    assert np.allclose(channel.embedder.embed(["Kafka lag"]), MiniLmEmbedder().embed(["Kafka lag"]))


QUESTION = "Melanie: What kind of counseling services do you want to pursue?"
ANSWER = "Caroline: I'm thinking of working with trans people and supporting them."
THANKS = "Melanie: That sounds meaningful, good luck with it."


async def stored_vector(backend: SqliteBackend, memory_id: str) -> np.ndarray:
    page = await backend.vectors_after(SPACE, 0, limit=100)
    latest = dict(page.rows)  # oldest first: a re-embedded memory's newest vector wins
    return np.frombuffer(latest[memory_id], dtype=np.float32)


@pytest.mark.anyio
async def test_a_vector_is_its_own_text_plus_its_context_document(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=1))
        )
        alone = await backend.remember(NewMemory("Kafka consumer lag", source="agent", created_at=LATER))
        await DenseChannel(embedder).index(backend)
        own, document = embedder.embed([ANSWER, f"{QUESTION}\n{ANSWER}"])
        assert np.allclose(await stored_vector(backend, answer.id), own + document, atol=1e-5)
        own, document = embedder.embed([QUESTION, f"{QUESTION}\n{ANSWER}"])
        assert np.allclose(await stored_vector(backend, question.id), own + document, atol=1e-5)
        # no context: the document is the text itself
        own = embedder.embed(["Kafka consumer lag"])[0]
        assert np.allclose(await stored_vector(backend, alone.id), 2 * own, atol=1e-5)


@pytest.mark.anyio
async def test_a_new_turn_embeds_the_turn_before_it_again_with_the_new_context(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        channel = DenseChannel(embedder)
        question = await backend.remember(NewMemory(QUESTION, source="Melanie", created_at=T0))
        answer = await backend.remember(
            NewMemory(ANSWER, source="Caroline", created_at=T0 + timedelta(seconds=1))
        )
        await channel.index(backend)
        thanks = await backend.remember(
            NewMemory(THANKS, source="Melanie", created_at=T0 + timedelta(seconds=2))
        )
        # a search catches up: the new turn, and the answer whose context it joined
        hits = await channel.search(backend, "career counseling", limit=3, filters=Filters(), now=LATER)
        assert {hit.record.id for hit in hits} == {question.id, answer.id, thanks.id}
        own, document = embedder.embed([ANSWER, f"{QUESTION}\n{ANSWER}\n{THANKS}"])
        assert np.allclose(await stored_vector(backend, answer.id), own + document, atol=1e-5)
        assert (await channel.index(backend)).embedded == 0
