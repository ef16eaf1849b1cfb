"""What the offline model says about passages: quotes with citations, never invented text.

Used for knowledge answers and for ``generate_summary`` when no endpoint is configured; every sentence it
writes is copied from a passage and carries that passage's ``[id]``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stores.text_analysis import has_cjk, tokenize

QUOTE_CHARS = 240
# A passage the retriever found but that shares under half of the question's words is only loosely related:
# quoting it as "根据知识库…" would pass it off as the answer, so the offline model says nothing was found.
RELEVANCE_CUT = 0.5


def sentences(text: str) -> list[str]:
    """Sentences of a passage, Chinese or English punctuation."""
    parts = re.split(r"(?<=[。！？!?])|(?<=[.;])\s+|\n+", text)
    return [p.strip() for p in parts if p and p.strip()]


def best_sentences(question: str, text: str, limit: int = 2) -> list[str]:
    """The sentences sharing most keywords with the question, in their original order."""
    wanted = set(tokenize(question))
    scored = []
    for i, sentence in enumerate(sentences(text)):
        overlap = len(wanted & set(tokenize(sentence)))
        scored.append((overlap, -i, sentence))
    top = sorted(scored, reverse=True)[:limit]
    chosen = sorted(top, key=lambda item: -item[1])
    picked = [s for overlap, _, s in chosen if overlap > 0] or [s for _, _, s in chosen[:1]]
    return [s if len(s) <= QUOTE_CHARS else s[:QUOTE_CHARS] + "…" for s in picked]


def relevance(question: str, text: str) -> float:
    """The share of the question's words the text contains (0 when the question has none)."""
    wanted = set(tokenize(question))
    return len(wanted & set(tokenize(text))) / len(wanted) if wanted else 0.0


def passage_words(passage: dict[str, Any]) -> str:
    """What a passage says for judging relevance: its heading (document title, section) and its text, as
    the keyword index reads it; the quote is taken from the text alone."""
    heads = [str(passage.get(key) or "") for key in ("heading", "title", "section")]
    return " ".join([*filter(None, heads), str(passage.get("text", ""))])


def answer_from_passages(
    question: str, passages: Sequence[dict[str, Any]], *, cut: float | None = None
) -> str:
    """Quote the best passage (and a second one if it adds something), each with its citation.

    With ``cut``, passages below that :func:`relevance` are dropped first (none left: nothing found).
    """
    zh = has_cjk(question)
    if cut is not None:
        passages = [p for p in passages if relevance(question, passage_words(p)) >= cut]
    if not passages:
        return (
            "知识库中没有找到与这个问题相关的资料。"
            if zh
            else "The knowledge base has nothing relevant to this question."
        )
    best = passages[0]
    quote = " ".join(best_sentences(question, str(best.get("text", ""))))
    lines = [
        (
            f"根据知识库：{quote} [{best.get('id')}]"
            if zh
            else f"From the knowledge base: {quote} [{best.get('id')}]"
        )
    ]
    if len(passages) > 1:
        extra = passages[1]
        more = " ".join(best_sentences(question, str(extra.get("text", "")), limit=1))
        if more and more not in quote:
            lines.append(
                f"另见：{more} [{extra.get('id')}]" if zh else f"See also: {more} [{extra.get('id')}]"
            )
    return "\n".join(lines)


def summary_head(topic: str, count: int, zh: bool) -> str:
    """The first line of an extractive summary, in the reader's language."""
    if zh:
        return f"关于「{topic}」，知识库中的 {count} 段资料要点："
    return f"What {count} passage{'s say' if count != 1 else ' says'} about '{topic}':"


def extractive_summary(topic: str, passages: Sequence[dict[str, Any]]) -> str:
    """A bullet summary of ``passages`` about ``topic``: one or two quoted sentences each, cited."""
    zh = has_cjk(topic) or any(has_cjk(str(p.get("text", ""))) for p in passages[:1])
    head = summary_head(topic, len(passages), zh)
    bullets = [
        f"- {' '.join(best_sentences(topic, str(p.get('text', '')), limit=2))} [{p.get('id')}]"
        for p in passages
    ]
    return "\n".join([head, *bullets])
