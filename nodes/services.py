"""The stores and helpers a run uses, resolved from its context and opened once per process.

The LangGraph server, the CLI and ``graph.invoke`` all build the same graph; what differs is the data dir,
the embedder and the URLs in the run's context. This module maps a context to open stores.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from graph.settings import Settings
from models import OfflineChatModel, get_chat_model
from models.extractive import extractive_summary
from models.tokens import message_text
from stores.base import Passage
from stores.embeddings import embedder_for
from stores.feedback import FeedbackStore
from tools.knowledge_tools import KnowledgeServices

log = logging.getLogger("kb_agent.services")
_lock = threading.Lock()
_knowledge: dict[tuple[Any, ...], Any] = {}
_feedback: dict[tuple[str, str], FeedbackStore] = {}

SUMMARY_PROMPT = {
    "zh": "根据下面的资料，为主题「{topic}」写一份结构化摘要（要点列表），每条要点后用 [编号] 标注来源；资料里没有的不要写。\n\n{passages}",
    "en": "Write a structured summary (bullet points) of what the passages below say about '{topic}'. End each "
    "bullet with its source as [id]; write nothing the passages do not support.\n\n{passages}",
}


def knowledge_dir(ctx: Settings) -> Path:
    return Path(ctx.data_dir) / "knowledge"


def open_knowledge_base(ctx: Settings, *, create: bool = False) -> Any | None:
    """The knowledge base for this context, or None when nothing was ingested (and ``create`` is False)."""
    from stores.knowledge import KnowledgeBase

    directory = knowledge_dir(ctx)
    if not create and not ctx.chroma_url and not directory.exists():
        return None
    key = (
        str(directory.resolve()),
        ctx.embedder,
        ctx.chroma_url,
        ctx.candidates,
        ctx.rrf_k,
        ctx.fusion,
        ctx.vector_weight,
        ctx.bm25_weight,
    )
    with _lock:
        if key not in _knowledge:
            embedder = embedder_for(ctx)
            _knowledge[key] = KnowledgeBase(
                ctx.data_dir,
                embedder=embedder,
                chroma_url=ctx.chroma_url,
                candidates=ctx.candidates,
                rrf_k=ctx.rrf_k,
                fusion=ctx.fusion,
                vector_weight=ctx.vector_weight,
                bm25_weight=ctx.bm25_weight,
            )
        return _knowledge[key]


def feedback_store(ctx: Settings) -> FeedbackStore:
    key = (str(Path(ctx.data_dir).resolve()), ctx.database_url)
    with _lock:
        if key not in _feedback:
            _feedback[key] = FeedbackStore(ctx.data_dir, ctx.database_url)
        return _feedback[key]


def summarize(topic: str, passages: list[Passage], ctx: Settings) -> dict[str, Any]:
    """The second model call of ``generate_summary``: run and counted apart from the outer loop."""
    model = get_chat_model(ctx)
    if isinstance(model, OfflineChatModel):
        return {
            "summary": extractive_summary(topic, passages),
            "model_calls": 0,
            "model": "offline-extractive",
        }
    lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in topic) else "en"
    body = "\n\n".join(f"[{p.get('id')}] {p.get('text', '')}" for p in passages)
    reply = model.invoke(
        [
            SystemMessage("You summarise documents faithfully."),
            HumanMessage(SUMMARY_PROMPT[lang].format(topic=topic, passages=body)),
        ],
        config={"run_name": "generate_summary", "tags": ["kb-agent:tool-model"]},
    )
    usage = getattr(reply, "usage_metadata", None) or {}
    log.info("tool=generate_summary model_calls=1 tokens=%s", usage.get("total_tokens", "?"))
    return {
        "summary": message_text(reply),
        "model_calls": 1,
        "tokens": usage.get("total_tokens"),
        "model": ctx.model_name,
    }


def knowledge_services() -> KnowledgeServices:
    return KnowledgeServices(
        knowledge=lambda settings: open_knowledge_base(settings or Settings()),
        feedback=lambda settings: feedback_store(settings or Settings()),
        summarize=lambda topic, passages, settings: summarize(topic, passages, settings or Settings()),
    )
