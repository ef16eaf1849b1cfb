"""The steps of a knowledge search shared by the ``retrieve`` node and the ``search_knowledge`` tool.

Whoever asks, a search fetches a candidate pool when something will re-order it (``pool_size``: feedback,
the user's preferred category, a reranker), then down-weights the chunks the deployment's users rated bad
and lifts those in the category the user's memories name (``reordered``); the node may rerank after that;
both keep the best ``top_k``. The caller's identity and groups are applied by the knowledge base's own
search, inside each retriever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from stores.base import Passage
from stores.feedback import downweight

log = logging.getLogger("kb_agent.search")

Penalties = Callable[[Any], Mapping[str, int]]  # run settings -> chunk ids rated bad, with their counts


def rated_bad(penalties: Penalties | None, settings: Any) -> Mapping[str, int]:
    """Chunks the deployment's feedback down-weights; a feedback store that fails changes nothing."""
    if penalties is None or settings.feedback_penalty >= 1.0:
        return {}
    try:
        return penalties(settings)
    except Exception:  # feedback is a hint: its store failing must not fail the search
        log.exception("feedback penalties unavailable; searching without them")
        return {}


def preferred(passages: Sequence[Passage], memories: Sequence[Mapping[str, Any]], factor: float) -> list[Passage]:
    """Passages from a folder or access group the user's memories name ("我平时查产品手册") score
    ``factor`` times higher, once (the category the user asked for most); the rest keep their order."""
    texts = [str(m.get("content", "")).casefold() for m in memories]
    if factor <= 1.0 or not texts or not passages:
        return list(passages)

    def named(p: Passage) -> bool:
        source = str(p.get("source") or p.get("id", "").rsplit("#", 1)[0])
        groups = str((p.get("metadata") or {}).get("groups", "")).split(",")
        names = [*PurePosixPath(source).parts[:-1], *(g.strip() for g in groups if g.strip() != "public")]
        return any(len(n) >= 2 and n.casefold() in text for n in names for text in texts)

    boosted: list[Passage] = [
        {**p, "score": float(p.get("score", 0.0)) * factor, "metadata": {**(p.get("metadata") or {}), "preferred": True}}
        if named(p)
        else p
        for p in passages
    ]
    return sorted(boosted, key=lambda p: -float(p.get("score", 0.0)))


def pool_size(settings: Any, top_k: int, *, penalised: Mapping[str, int], memories: Sequence[Any], reranking: bool) -> int:
    """How many candidates to fetch for ``top_k``: a pool when something will re-order them."""
    boosting = settings.preference_boost > 1.0 and bool(memories)
    return max(top_k, settings.candidates) if reranking or penalised or boosting else top_k


def reordered(
    passages: Sequence[Passage],
    settings: Any,
    *,
    penalised: Mapping[str, int],
    memories: Sequence[Mapping[str, Any]] = (),
) -> list[Passage]:
    """``passages`` down-weighted by feedback and lifted by the user's preferred category, best first."""
    return preferred(downweight(passages, penalised, settings.feedback_penalty), memories, settings.preference_boost)
