"""CachedEmbedder: a text is embedded once across processes; results equal the wrapped embedder's."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stores.embeddings import HashingEmbedder
from stores.vector_cache import CachedEmbedder


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def embed_documents(self, texts):  # type: ignore[override]
        self.embedded.extend(texts)
        return super().embed_documents(texts)


def test_vectors_are_reused_and_equal(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    base = Counting()
    first = CachedEmbedder(base, path).embed_documents(["a b", "c d", "a b"])
    assert base.embedded == ["a b", "c d"]  # a repeated text is embedded once
    np.testing.assert_allclose(first[0], first[2])
    again = Counting()
    second = CachedEmbedder(again, path).embed_documents(["c d", "e f", "a b"])
    assert again.embedded == ["e f"]  # only the new text
    np.testing.assert_allclose(second[0], first[1])
    np.testing.assert_allclose(second[2], HashingEmbedder().embed_documents(["a b"])[0])
    assert CachedEmbedder(Counting(), path).embed_documents([]).shape == (0, 256)


def test_queries_are_not_cached(tmp_path: Path) -> None:
    cached = CachedEmbedder(HashingEmbedder(), tmp_path / "v.sqlite")
    np.testing.assert_allclose(cached.embed_query("x y"), HashingEmbedder().embed_query("x y"))
