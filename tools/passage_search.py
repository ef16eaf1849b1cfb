"""The one knowledge search behind both the ``retrieve`` node and the ``search_knowledge`` tool.

Whoever asks, a search takes a candidate pool when something will re-order it (feedback, the user's
preferred category, a reranker), down-weights the chunks the deployment's users rated bad, lifts those in
the category the user's memories name, reranks, and keeps the best ``top_k``. The caller's identity and
groups are applied by the search the caller passes in (the knowledge base filters inside each retriever).
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
Rerank = Callable[[list[Passage], int], list[Passage]]  # (candidates, top_k) -> re-ordered, maybe cut


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

    boosted = [
        {**p, "score": float(p.get("score", 0.0)) * factor, "metadata": {**(p.get("metadata") or {}), "preferred": True}}
        if named(p)
        else p
        for p in passages
    ]
    return sorted(boosted, key=lambda p: -float(p.get("score", 0.0)))  # type: ignore[return-value]


def search_passages(
    search: Callable[[int], Sequence[Passage]],
    settings: Any,
    *,
    top_k: int,
    penalties: Penalties | None = None,
    memories: Sequence[Mapping[str, Any]] = (),
    rerank: Rerank | None = None,
) -> list[Passage]:
    """The best ``top_k`` passages of ``search(pool)`` (the caller's permission-filtered search for a pool
    of that many), re-ordered by feedback, the user's preferred category and ``rerank``."""
    penalised = rated_bad(penalties, settings)
    boosting = settings.preference_boost > 1.0 and bool(memories)
    pool = max(top_k, settings.candidates) if rerank is not None or penalised or boosting else top_k
    passages = downweight(list(search(pool)), penalised, settings.feedback_penalty)
    passages = preferred(passages, memories, settings.preference_boost)
    if rerank is not None and passages:
        passages = rerank(passages, top_k)
    return passages[:top_k]
