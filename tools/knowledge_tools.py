"""The knowledge-base tools (search, summarise, feedback, statistics) and ``delete_document``.

Every search carries the caller's identity and groups from the run (never from the model's arguments), so
the permission filter inside the knowledge base applies to tools exactly as to the retrieve node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, HumanMessage
from pydantic import Field

from stores.base import Passage
from stores.feedback import answer_digest
from tools.passage_search import pool_size, rated_bad, reordered
from tools.registry import CallContext, RunSettings, ToolContext, ToolError, ToolSpec

PASSAGE_CHARS = 800


@dataclass(frozen=True)
class KnowledgeServices:
    """How the tools reach the stores and the model for this run (wired in ``graph``)."""

    knowledge: Callable[[Any], Any | None]  # settings -> KnowledgeBase or None when nothing is ingested
    feedback: Callable[[Any], Any]  # settings -> FeedbackStore
    summarize: Callable[[str, list[Passage], Any], dict[str, Any]]  # (topic, passages, settings) -> summary
    penalties: Callable[[Any], Mapping[str, int]] | None = None  # settings -> chunk ids rated bad (counts)


def _search(services: KnowledgeServices, kb: Any, query: str, ctx: ToolContext, top_k: int) -> list[Passage]:
    """The caller's search, re-ordered as the retrieve node's (:mod:`tools.passage_search`)."""
    settings = ctx.run_settings()
    penalised = rated_bad(services.penalties, settings)
    pool = pool_size(settings, top_k, penalised=penalised, memories=(), reranking=False)
    hits = kb.search(query, user_id=ctx.user_id, groups=_groups(ctx), top_k=pool)
    return reordered(hits, settings, penalised=penalised)[:top_k]


def _groups(ctx: ToolContext) -> tuple[str, ...]:
    return ctx.run_settings().group_list


def _passage_view(p: Passage) -> dict[str, Any]:
    meta = p.get("metadata", {}) or {}
    text = p.get("text", "")
    return {
        "id": p.get("id"),
        "source": p.get("source") or meta.get("source"),
        "title": meta.get("title") or None,
        "section": meta.get("section") or None,
        "score": round(float(p.get("score", 0.0)), 4),
        "text": text if len(text) <= PASSAGE_CHARS else text[:PASSAGE_CHARS] + "…",
    }


def _previous_turn(history: tuple[Any, ...]) -> tuple[str | None, AIMessage | None]:
    """The question and final answer of the turn before the current one (what feedback is about)."""
    humans = [i for i, m in enumerate(history) if isinstance(m, HumanMessage)]
    if len(humans) < 2:
        return None, None
    start, end = humans[-2], humans[-1]
    answers = [m for m in history[start:end] if isinstance(m, AIMessage) and not m.tool_calls and m.content]
    question = history[start].content if isinstance(history[start].content, str) else None
    answer = answers[-1] if answers and isinstance(answers[-1].content, str) else None
    return question, answer


def _recorded_citations(answer: AIMessage, recorded: Any) -> list[str] | None:
    """The chunks the agent recorded citing when it gave ``answer``; None when the history's message is not
    an answer it gave (written by a caller, or changed since): such a rating is kept but weighs nothing."""
    record = (recorded or {}).get(answer.id) if answer.id else None
    if not isinstance(record, dict) or record.get("digest") != answer_digest(answer.text):
        return None
    return [str(c) for c in record.get("cited") or []]


def knowledge_tools(services: KnowledgeServices) -> list[ToolSpec]:
    """The tool specs, bound to ``services``."""

    def search_knowledge(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for.")],
        top_k: Annotated[int, Field(ge=1, le=20)] = 5,
        *,
        tool_context: CallContext,
    ) -> str:
        kb = services.knowledge(tool_context.run_settings())
        if kb is None:
            return "The knowledge base is empty: nothing has been ingested yet."
        hits = _search(services, kb, query, tool_context, top_k)
        if not hits:
            return json.dumps(
                {"query": query, "passages": [], "note": "no relevant passages found"}, ensure_ascii=False
            )
        return json.dumps({"query": query, "passages": [_passage_view(p) for p in hits]}, ensure_ascii=False)

    def generate_summary(
        topic: Annotated[str, Field(min_length=1, max_length=500)],
        max_docs: Annotated[int, Field(ge=1, le=10)] = 5,
        *,
        tool_context: CallContext,
    ) -> str:
        kb = services.knowledge(tool_context.run_settings())
        hits = (
            []
            if kb is None
            else _search(services, kb, topic, tool_context, max_docs)
        )
        if not hits:
            return json.dumps(
                {"topic": topic, "summary": "", "sources": [], "note": "no passages to summarise"},
                ensure_ascii=False,
            )
        result = services.summarize(topic, hits, tool_context.run_settings())
        return json.dumps(
            {"topic": topic, **result, "sources": [p.get("id") for p in hits]}, ensure_ascii=False
        )

    def submit_feedback(
        rating: Literal["good", "bad"],
        reason: Annotated[str | None, Field(max_length=1000)] = None,
        *,
        tool_context: CallContext,
    ) -> str:
        question, answer = _previous_turn(tool_context.history)
        if answer is None:
            raise ToolError("there is no earlier answer in this thread to give feedback on")
        cited = _recorded_citations(answer, tool_context.answers)
        store = services.feedback(tool_context.run_settings())
        feedback_id = store.add(
            user_id=tool_context.user_id,
            thread_id=tool_context.thread_id,
            rating=rating,
            reason=reason,
            question=question,
            answer=answer.text,
            cited=cited,
        )
        result = {"feedback_id": feedback_id, "rating": rating, "about": answer.text[:200]}
        if cited is None:
            result["note"] = "kept, but not an answer this agent recorded: it changes no ranking"
        return json.dumps(result, ensure_ascii=False)

    def knowledge_stats(*, tool_context: CallContext) -> str:
        kb = services.knowledge(tool_context.run_settings())
        if kb is None:
            return json.dumps(
                {"documents": 0, "chunks": 0, "note": "nothing ingested yet"}, ensure_ascii=False
            )
        return json.dumps(kb.stats(groups=_groups(tool_context)), ensure_ascii=False, default=str)

    def _document(doc_id: str, settings: RunSettings) -> tuple[Any, Any]:
        """The knowledge base and the manifest record of ``doc_id`` (a source path, or a ``path#n`` id)."""
        kb = services.knowledge(settings)
        record = kb.document(doc_id) if kb is not None else None
        visible = set(settings.group_list)
        if record is None or not visible & set(record.groups or ["public"]):
            # A document the caller may not see is reported exactly like one that does not exist.
            raise ToolError(
                f"no document {doc_id.strip()!r} in the knowledge base; document ids are the part of a "
                "passage id before its last '#' (search_knowledge shows them)"
            )
        return kb, record

    def describe_delete(args: dict[str, Any], tool_context: ToolContext) -> str:
        kb, record = _document(str(args.get("doc_id", "")), tool_context.run_settings())  # ToolError: not asked
        days = float(getattr(kb, "trash_days", 0) or 0)
        kept = f"; it stays in the trash {days:g} days (kb-agent trash restore)" if days > 0 else " for good"
        return (
            f"delete document {record.source!r} ({len(record.chunk_ids)} chunks, groups "
            f"{', '.join(record.groups) or 'public'}) from the knowledge base: its chunks are removed from "
            f"the vector index (Chroma) and the keyword index (BM25){kept}"
        )

    def delete_document(
        doc_id: Annotated[
            str, Field(min_length=1, max_length=1000, description="The document's source path, e.g. guides/rag.md")
        ],
        *,
        tool_context: CallContext,
    ) -> str:
        kb, record = _document(doc_id, tool_context.run_settings())
        if hasattr(kb, "delete_to_trash"):
            removed, trash_id = kb.delete_to_trash(record.source)
        else:  # an application's own knowledge base without a trash
            removed, trash_id = kb.delete_document(record.source), None
        result: dict[str, Any] = {
            "deleted": record.source,
            "chunks_removed": removed,
            "documents_left": kb.stats(groups=_groups(tool_context)).get("documents"),
        }
        if trash_id is not None:
            result["trash_id"] = trash_id
            result["restore"] = f"kb-agent trash restore {trash_id} (within {float(kb.trash_days):g} days)"
        return json.dumps(result, ensure_ascii=False)

    return [
        ToolSpec.of(
            search_knowledge,
            name="search_knowledge",
            description=(
                "Search the knowledge base for passages about a query; returns passages with ids to cite as "
                "[id]. Call it when the user asks about the documents' content or the passages you already "
                "have do not answer; use a narrower or broader query to search again. Not for small talk, "
                "arithmetic or dates."
            ),
            domain="knowledge",
            always_on=True,
            permissions=("kb:read",),
        ),
        ToolSpec.of(
            generate_summary,
            name="generate_summary",
            description=(
                "Write a structured summary of what the knowledge base says about a topic (retrieves up to "
                "max_docs passages, then summarises them with a separate model call). Call it only when the "
                "user asks for a summary/overview (整理/总结/摘要); for a specific question use search_knowledge."
            ),
            domain="knowledge",
            always_on=True,
            permissions=("kb:read",),
            timeout=120.0,
        ),
        ToolSpec.of(
            submit_feedback,
            name="submit_feedback",
            description=(
                "Record the user's rating of your previous answer: 'good' when they say it was helpful or "
                "right (满意/有用), 'bad' when they say it was wrong or unhelpful (不准确/没用). Call it only "
                "when the user comments on an earlier answer; include their reason."
            ),
            domain="knowledge",
            always_on=True,
            permissions=("feedback:write",),
            side_effects=True,
        ),
        ToolSpec.of(
            knowledge_stats,
            name="knowledge_stats",
            description=(
                "Return the knowledge base's statistics: documents, chunks, last update, embedding model. "
                "Call it when the user asks how many documents there are or what the knowledge base holds."
            ),
            domain="knowledge",
            always_on=True,
            permissions=("kb:read",),
        ),
        ToolSpec.of(
            delete_document,
            name="delete_document",
            description=(
                "Permanently delete one document (all its chunks) from the knowledge base. Only when the "
                "user explicitly asks to delete/remove a document; needs the kb:admin permission and a "
                "person's approval before it runs. doc_id is the source path (the part of a passage id "
                "before its last '#')."
            ),
            domain="knowledge",
            always_on=True,
            permissions=("kb:admin",),
            side_effects=True,
            requires_approval=True,
            describe=describe_delete,
        ),
    ]
