"""The stores a run uses, opened from its settings once per process: knowledge base, feedback, long-term
memory (with its extractor: the configured model, else the offline rules).

The LangGraph server, the CLI and ``graph.invoke`` all build the same graph; what differs is the data dir,
the embedder and the URLs in the settings. This module maps settings to open stores, and hands them to
tools and nodes as services, so neither imports the wiring.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.runtime import get_runtime

from models import OfflineChatModel, get_chat_model
from models.extractive import extractive_summary
from models.extractor import ModelExtractor
from nodes import prompts
from nodes.context import run_settings
from nodes.settings import Settings
from stores.base import MemoryRecord, Passage
from stores.embeddings import embedder_for
from stores.feedback import FeedbackStore
from stores.memory.extraction import OfflineExtractor
from stores.memory.outbox import MemoryOutbox
from stores.memory.rules import Extractor
from stores.memory.store import ChromaMemoryStore
from stores.memory.updater import BackgroundMemoryUpdater
from stores.tool_effects import ToolEffectLog
from tools.knowledge_tools import KnowledgeServices

log = logging.getLogger("kb_agent.services")
_lock = threading.Lock()
_knowledge: dict[tuple[Any, ...], Any] = {}
_feedback: dict[tuple[str, str], FeedbackStore] = {}
_effects: dict[tuple[str, str], ToolEffectLog] = {}



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
        ctx.database_url,
        ctx.candidates,
        ctx.rrf_k,
        ctx.fusion,
        ctx.vector_weight,
        ctx.bm25_weight,
        ctx.trash_days,
        ctx.bm25_staleness,
    )
    with _lock:
        if key not in _knowledge:
            embedder = embedder_for(ctx)
            _knowledge[key] = KnowledgeBase(
                ctx.data_dir,
                embedder=embedder,
                chroma_url=ctx.chroma_url,
                database_url=ctx.database_url,
                candidates=ctx.candidates,
                rrf_k=ctx.rrf_k,
                fusion=ctx.fusion,
                vector_weight=ctx.vector_weight,
                bm25_weight=ctx.bm25_weight,
                trash_days=ctx.trash_days,
                bm25_staleness=ctx.bm25_staleness,
            )
        return _knowledge[key]


def feedback_store(ctx: Settings) -> FeedbackStore:
    key = (str(Path(ctx.data_dir).resolve()), ctx.database_url)
    with _lock:
        if key not in _feedback:
            _feedback[key] = FeedbackStore(ctx.data_dir, ctx.database_url)
        return _feedback[key]


def tool_effects(ctx: Settings) -> ToolEffectLog:
    """The record of side-effecting tool calls, beside the threads; opened once per process."""
    key = (str(Path(ctx.data_dir).resolve()), ctx.checkpoint_url)
    with _lock:
        if key not in _effects:
            _effects[key] = ToolEffectLog(ctx.data_dir, ctx.checkpoint_url)
        return _effects[key]


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
            HumanMessage(prompts.TOOL_SUMMARY[lang].format(topic=topic, passages=body)),
        ],
        config={"run_name": "generate_summary", "tags": ["kb-agent:tool-model"]},
    )
    usage = getattr(reply, "usage_metadata", None) or {}
    log.info("tool=generate_summary model_calls=1 tokens=%s", usage.get("total_tokens", "?"))
    return {
        "summary": reply.text,
        "model_calls": 1,
        "tokens": usage.get("total_tokens"),
        "model": ctx.model_name,
    }


def feedback_penalties(ctx: Settings) -> dict[str, int]:
    """Chunks cited in enough answers rated bad to be down-weighted (``KB_AGENT_FEEDBACK_MIN_BAD``)."""
    return feedback_store(ctx).bad_citations(ctx.feedback_min_bad)


def knowledge_services() -> KnowledgeServices:
    return KnowledgeServices(
        knowledge=lambda settings: open_knowledge_base(settings or Settings()),
        feedback=lambda settings: feedback_store(settings or Settings()),
        summarize=lambda topic, passages, settings: summarize(topic, passages, settings or Settings()),
        penalties=lambda settings: feedback_penalties(settings or Settings()),
    )


_stores: dict[tuple[Any, ...], ChromaMemoryStore] = {}
_updaters: dict[tuple[Any, ...], BackgroundMemoryUpdater] = {}


def extractor_for(ctx: Settings) -> Extractor:
    """The configured model when there is one, else the offline rules."""
    if ctx.uses_offline_model:
        return OfflineExtractor()
    return ModelExtractor(get_chat_model(ctx), timeout=ctx.model_timeout)


def memory_store(ctx: Settings) -> ChromaMemoryStore:
    """The long-term memory store of this context, opened once per process."""
    key = (
        str(Path(ctx.data_dir).resolve()),
        ctx.embedder,
        ctx.chroma_url,
        ctx.database_url,
        ctx.model_name,
        ctx.base_url,
    )
    with _lock:
        if key not in _stores:
            embedder = embedder_for(ctx)
            episodic_days = float(getattr(ctx, "memory_episodic_days", 0.0) or 0.0)
            _stores[key] = ChromaMemoryStore(
                ctx.data_dir,
                embedder=embedder,
                chroma_url=ctx.chroma_url,
                database_url=ctx.database_url,
                extractor=extractor_for(ctx),
                ttl_days={"episodic": episodic_days} if episodic_days > 0 else None,
            )
        return _stores[key]


def open_memory(ctx: Settings) -> BackgroundMemoryUpdater:
    """The store of this context behind a background updater (drained at exit, at most 10 s), its turns
    kept in a durable outbox so a crash loses none; opening it finishes what a dead process left."""
    store = memory_store(ctx)
    key = (id(store),)
    with _lock:
        if key not in _updaters:
            outbox = MemoryOutbox(ctx.data_dir, ctx.database_url)
            _updaters[key] = updater = BackgroundMemoryUpdater(store, outbox=outbox)
            atexit.register(updater.close, 10.0)
        return _updaters[key]


class RunMemory:
    """A :class:`MemoryStore` that opens the store of each run's context (for the server's ``graph``).

    A context with ``long_term_memory`` off (when that setting exists) recalls and learns nothing.
    ``deployment`` is the graph's settings (None: the environment's).
    """

    def __init__(self, deployment: Settings | None = None) -> None:
        self.deployment = deployment

    def _memory(self) -> BackgroundMemoryUpdater | None:
        try:
            runtime = get_runtime()
        except (RuntimeError, KeyError):
            runtime = None
        ctx = run_settings(runtime, self.deployment)
        return open_memory(ctx) if getattr(ctx, "long_term_memory", True) else None

    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        memory = self._memory()
        return memory.recall(user_id, query, top_k) if memory is not None else []

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        memory = self._memory()
        return memory.update_from_turn(user_id, thread_id, messages) if memory is not None else 0
