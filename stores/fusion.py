"""Merging ranked lists from several retrievers (hybrid BM25 + vector search, fused by RRF or by normalised scores).

BM25 scores and cosine similarities live on unrelated scales, so the default fusion (``rrf``) uses only
ranks; ``convex`` is the score-based alternative (normalise each retriever, then weighted sum): long-term
memory recall uses it, the knowledge base keeps it for evaluation. Both return ``(id, fused score,
retrievers that found it)`` best first, with ties broken deterministically (best single rank, then id)
so results and evaluation runs are reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Fused = tuple[str, float, list[str]]

NORMALISERS = ("minmax", "zscore", "max")


def _weight(weights: Mapping[str, float] | None, retriever: str) -> float:
    if weights is None:
        return 1.0
    weight = float(weights.get(retriever, 1.0))
    if weight < 0 or math.isnan(weight):
        raise ValueError(f"weight for {retriever!r} must be >= 0, got {weight}")
    return weight


def _ordered(
    fused: dict[str, float], best_rank: dict[str, int], found_by: dict[str, list[str]]
) -> list[Fused]:
    order = sorted(fused, key=lambda doc: (-fused[doc], best_rank[doc], doc))
    return [(doc, fused[doc], found_by[doc]) for doc in order]


def rrf(
    rankings: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[Fused]:
    """Reciprocal Rank Fusion: ``score(d) = sum_r w_r / (k + rank_r(d))`` with 1-based ranks.

    ``rankings`` maps retriever name to ids best first; an id repeated within one list counts once, at
    its best rank. ``k`` damps the head of each list (60 is the value from Cormack et al.). Retrievers
    are listed per id in the order of ``rankings``; a retriever weighted 0 is switched off.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    fused: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    found_by: dict[str, list[str]] = {}
    for retriever, ids in rankings.items():
        weight = _weight(weights, retriever)
        if weight == 0:
            continue
        seen: set[str] = set()
        rank = 0
        for doc in ids:
            if doc in seen:
                continue
            seen.add(doc)
            rank += 1
            fused[doc] = fused.get(doc, 0.0) + weight / (k + rank)
            best_rank[doc] = min(best_rank.get(doc, rank), rank)
            found_by.setdefault(doc, []).append(retriever)
    return _ordered(fused, best_rank, found_by)


def _normalise(scores: Mapping[str, float], method: str) -> dict[str, float]:
    if not scores:
        return {}
    values = list(scores.values())
    if method == "minmax":
        low, high = min(values), max(values)
        span = high - low
        return {doc: (s - low) / span if span > 0 else 1.0 for doc, s in scores.items()}
    if method == "max":
        top = max(abs(v) for v in values)
        return {doc: s / top if top > 0 else 0.0 for doc, s in scores.items()}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {doc: (s - mean) / std if std > 0 else 0.0 for doc, s in scores.items()}


def convex(
    scores: Mapping[str, Mapping[str, float]],
    weights: Mapping[str, float] | None = None,
    normalise: str | Mapping[str, str] = "minmax",
) -> list[Fused]:
    """Score fusion: normalise each retriever's scores, then ``sum_r w_r * norm_r(d)``.

    ``minmax`` maps each list to [0, 1] (a list whose scores are all equal maps to 1.0); ``zscore``
    centres on the list mean (equal scores map to 0.0); ``max`` divides by the largest magnitude, so
    for scores where 0 means "no evidence" (term overlap, BM25) a weak match stays weak instead of being
    stretched to 0 as ``minmax`` would. ``normalise`` may name one method per retriever (a mapping;
    ``minmax`` for one it leaves out). An id a retriever did not return contributes nothing from it; a
    retriever weighted 0 is switched off. Ties break on the best raw-order rank.
    """
    named = [normalise] if isinstance(normalise, str) else list(normalise.values())
    for method in named:
        if method not in NORMALISERS:
            raise ValueError(f"unknown normalisation {method!r}: use one of {', '.join(NORMALISERS)}")
    methods = {r: normalise if isinstance(normalise, str) else normalise.get(r, "minmax") for r in scores}
    fused: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    found_by: dict[str, list[str]] = {}
    for retriever, raw in scores.items():
        weight = _weight(weights, retriever)
        if weight == 0:
            continue
        normed = _normalise(raw, methods[retriever])
        ranked = sorted(raw, key=lambda doc: (-raw[doc], doc))
        for rank, doc in enumerate(ranked, start=1):
            fused[doc] = fused.get(doc, 0.0) + weight * normed[doc]
            best_rank[doc] = min(best_rank.get(doc, rank), rank)
            found_by.setdefault(doc, []).append(retriever)
    return _ordered(fused, best_rank, found_by)
