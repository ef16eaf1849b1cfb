"""How recall scores a user's memories: IDF-weighted keyword overlap fused with the vector similarity.

The weights and normalisers were chosen on LoCoMo (bench/memory_recall.py, bench/README.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from stores.fusion import convex
from stores.text_analysis import tokenize

# Share of the vector similarity in recall's fused score (the keyword score has the rest). Chosen on
# LoCoMo conversations 26–43 and checked on 44–50 (bench/README.md): 0.2–0.4 is a plateau; above 0.5 a
# close-but-wrong vector neighbour starts to outrank a memory that shares the question's rare words.
VECTOR_WEIGHT = 0.3


@functools.lru_cache(maxsize=16384)
def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def keyword_scores(query: str, contents: Mapping[str, str]) -> dict[str, float]:
    """The memories sharing terms with ``query``, scored by the summed IDF of the shared terms.

    IDF is BM25's, ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over ``contents`` (the user's live memories),
    so a speaker's name that every memory carries counts for little and a rare noun for much. Term
    frequency and length are ignored on purpose: memories are short, and on LoCoMo BM25's length
    normalisation lowered recall.
    """
    wanted = _terms(query)
    if not wanted or not contents:
        return {}
    terms = {mid: _terms(text) for mid, text in contents.items()}
    df = dict.fromkeys(wanted, 0)
    for have in terms.values():
        for term in wanted & have:
            df[term] += 1
    n = len(terms)
    idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}
    scores = {mid: sum(idf[t] for t in wanted & have) for mid, have in terms.items()}
    return {mid: score for mid, score in scores.items() if score > 0}


def fuse(
    keyword: Mapping[str, float], vector: Mapping[str, float], vector_weight: float = VECTOR_WEIGHT
) -> dict[str, float]:
    """Recall's fused score: ``(1 - w) * keyword / max keyword + w * min-max(vector similarity)``.

    The keyword side is divided by its best score, so 0 stays "no shared term" and the best match is 1;
    the vector side is min-max scaled over its candidates, because cosine similarities sit in a narrow
    band that depends on the embedder (e5's are compressed into about 0.7–0.9). A weight of 0 or 1
    leaves one side alone.
    """
    if not 0.0 <= vector_weight <= 1.0:
        raise ValueError(f"vector_weight must be within [0, 1], got {vector_weight}")
    fused = convex(
        {"keyword": keyword, "vector": vector},
        weights={"keyword": 1.0 - vector_weight, "vector": vector_weight},
        normalise={"keyword": "max", "vector": "minmax"},
    )
    return {mid: score for mid, score, _ in fused}
