"""How recall scores a user's memories: IDF-weighted keyword overlap fused with the vector similarity.

The weights and normalisers were chosen on LoCoMo (bench/memory_recall.py, bench/README.md).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from stores.fusion import convex
from stores.text_analysis import has_cjk, tokenize

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


# Neutral memories, one set per language: what "a memory unrelated to the question" scores. A small
# multilingual embedder scores by language first (a Chinese question is ~0.1 closer to any Chinese text
# than to any English one), so a memory's similarity only means something against unrelated memories
# in its own language, scored for the same question.
REFERENCE_MEMORIES = {
    "en": (
        "The user has a sister who teaches music",
        "The user drives an old blue car",
        "The user visited Rome last spring",
        "The user is learning to cook Thai food",
        "The user's favourite season is autumn",
        "The user collects old coins",
        "The user watches football on Sundays",
        "The user grew up near the sea",
        "The user reads science fiction",
        "The user keeps a vegetable garden",
        "The user asked about parking at the office",
        "The user wants replies in a formal tone",
    ),
    "zh": (
        "用户有一个教音乐的姐姐",
        "用户开一辆旧的蓝色汽车",
        "用户去年春天去过罗马",
        "用户在学做泰国菜",
        "用户最喜欢秋天",
        "用户收藏旧硬币",
        "用户周日看足球",
        "用户在海边长大",
        "用户喜欢读科幻小说",
        "用户有一个菜园",
        "用户问过：公司停车位怎么申请",
        "用户希望回复语气正式",
    ),
}
# A memory is related to the question when it shares a term with it, or when its vector similarity is at
# least this far above the unrelated memories of its language (their mean + 1.5 standard deviations).
# Chosen on bench/data/memory_relevance.json (bench/memory_relevance.py, bench/README.md).
RELEVANT_MARGIN = 0.02


def reference_language(text: str) -> str:
    """Which reference set a memory is judged against: Chinese text, else the English one."""
    return "zh" if has_cjk(text) else "en"


def baselines(query_vector: np.ndarray, references: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Per language, how similar an unrelated memory is to the query: mean + 1.5 sd of the references."""
    out = {}
    for lang, vectors in references.items():
        sims = vectors @ np.asarray(query_vector, dtype=np.float32).ravel()
        out[lang] = float(sims.mean() + 1.5 * sims.std())
    return out


def related(
    keyword: Mapping[str, float],
    similarity: Mapping[str, float],
    contents: Mapping[str, str],
    baseline: Mapping[str, float],
    margin: float = RELEVANT_MARGIN,
) -> set[str]:
    """The memories judged related to the question: a shared term, or a similarity ``margin`` above the
    unrelated memories of the memory's language."""
    out = {mid for mid, score in keyword.items() if score > 0}
    for mid, sim in similarity.items():
        base = baseline.get(reference_language(contents.get(mid, "")))
        if base is not None and sim - base >= margin:
            out.add(mid)
    return out
