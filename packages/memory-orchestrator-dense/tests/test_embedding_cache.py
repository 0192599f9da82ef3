"""The embedding cache: a text embedded once is answered from the file, by any later process."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from memory_orchestrator_dense import DenseChannel, MiniLmEmbedder, create_channel
from memory_orchestrator_dense.cache import FILE_NAME, CachedEmbedder

from memory_orchestrator.adapters.sqlite.backend import SqliteBackend
from memory_orchestrator.ports import FixedClock, InvalidRequest, NewMemory

T0 = datetime(2026, 3, 1, tzinfo=UTC)
TEXTS = ["The cat sat on the mat", "Stock prices fell", "The cat sat on the mat"]


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


def test_cached_vectors_are_the_models_and_survive_a_new_process(
    tmp_path: Path, embedder: MiniLmEmbedder
) -> None:
    expected = embedder.embed(TEXTS)
    cached = CachedEmbedder(embedder, tmp_path)
    assert np.allclose(cached.embed(TEXTS), expected, atol=1e-6)
    assert (cached.hits, cached.misses) == (0, 3)
    assert np.allclose(
        cached.embed([*TEXTS[:2], "Bond yields rose"]),
        [*expected[:2], embedder.embed(["Bond yields rose"])[0]],
        atol=1e-6,
    )
    assert (cached.hits, cached.misses) == (2, 4)
    cached.close()
    again = CachedEmbedder(embedder, tmp_path)  # another process: the file answers
    assert np.allclose(again.embed(TEXTS), expected, atol=1e-6)
    assert (again.hits, again.misses) == (3, 0)
    assert again.embed([]).shape == (0, 384)


def test_a_vector_of_the_wrong_length_is_embedded_again(tmp_path: Path, embedder: MiniLmEmbedder) -> None:
    cached = CachedEmbedder(embedder, tmp_path)
    cached.embed(["Stock prices fell"])
    with cached._connection:  # another model wrote a shorter vector under the same key
        cached._connection.execute("UPDATE vectors SET vector = ?", (np.zeros(8, np.float32).tobytes(),))
    vector = cached.embed(["Stock prices fell"])[0]
    assert cached.misses == 2
    assert np.allclose(vector, embedder.embed(["Stock prices fell"])[0], atol=1e-6)


@pytest.mark.anyio
async def test_the_channel_uses_the_cache_directory_option(tmp_path: Path) -> None:
    channel = create_channel({"cache_dir": str(tmp_path / "cache")})
    assert isinstance(channel.embedder, CachedEmbedder)
    assert (tmp_path / "cache" / FILE_NAME).is_file()
    async with SqliteBackend(tmp_path / "m.db", clock=FixedClock(T0)) as backend:
        await backend.remember(NewMemory("Our tabby likes to nap on the rug"))
        await backend.remember(NewMemory("Postgres replication lag reached ten minutes"))
        assert (await channel.index(backend)).embedded == 2
    misses = channel.embedder.misses
    # the same memories in a fresh store: every vector comes from the cache, none from the model
    async with SqliteBackend(tmp_path / "other.db", clock=FixedClock(T0)) as backend:
        await backend.remember(NewMemory("Our tabby likes to nap on the rug"))
        await backend.remember(NewMemory("Postgres replication lag reached ten minutes"))
        fresh = DenseChannel(channel.embedder)
        assert (await fresh.index(backend)).embedded == 2
    assert channel.embedder.misses == misses


def test_a_bad_cache_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(InvalidRequest, match="cache_dir"):
        create_channel({"cache_dir": str(blocked)})
    with pytest.raises(InvalidRequest, match="cache_dir"):
        create_channel({"cache_dir": 3})
