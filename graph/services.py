"""The composition root: the one place a deployment's services are opened, once, from its settings.

A deployment's settings name its storage (data dir, Chroma server, databases), its embedder and its
model; :meth:`Root.services` opens what those name — the knowledge base, feedback, the tool-effect log,
long-term memory with its durable outbox, the checkpointer with the threads' owners and turn locks — on
first use and hands the same :class:`Services` to every later run of that deployment. Every store on one Postgres database borrows its connections from one
``psycopg_pool`` pool the root keeps per database, so a database restart costs each store at most the
operation in flight. Closing the root closes everything it opened.

Below this module nothing opens a store from settings: nodes and tools receive these services (or a
function of the run's settings that returns them) and never read the environment themselves.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.process import limit_malloc_arenas
from models import ChatModelFactory, ChatModels, follows_instructions, get_chat_model
from models.extractive import extractive_summary
from models.extractor import ModelExtractor
from nodes import prompts
from nodes.settings import Settings
from stores.base import MemoryStore, Passage
from stores.checkpoint import open_checkpointer
from stores.embeddings import embedder_for
from stores.feedback import FeedbackStore
from stores.memory.extraction import OfflineExtractor
from stores.memory.outbox import MemoryOutbox
from stores.memory.rules import Extractor
from stores.memory.store import ChromaMemoryStore
from stores.memory.updater import BackgroundMemoryUpdater
from stores.postgres import CHECKPOINT_SETTING, DATABASE_SETTING, is_postgres
from stores.threads import ThreadRegistry
from stores.tool_effects import ToolEffectLog
from stores.turn_lock import TurnLocks
from tools.knowledge_tools import KnowledgeServices

log = logging.getLogger("kb_agent.services")

DRAIN_SECONDS = 10.0  # how long closing waits for memory updates still queued

# What a deployment's services depend on: two settings that differ only elsewhere (a budget, a caller's
# identity, a per-run knob such as the chat model) share one set of open services, so one process never
# holds two knowledge bases on one directory.
SERVICE_FIELDS = (
    "data_dir",
    "embedder",
    "chroma_url",
    "database_url",
    "checkpoint_url",
    "candidates",
    "rrf_k",
    "fusion",
    "vector_weight",
    "bm25_weight",
    "trash_days",
    "bm25_staleness",
    "max_file_mb",
    "memory_episodic_days",
)


def service_key(settings: Settings) -> tuple[Any, ...]:
    """The part of ``settings`` that decides which stores are open (the data dir resolved)."""
    values = [getattr(settings, name) for name in SERVICE_FIELDS]
    values[0] = str(Path(settings.data_dir).expanduser().resolve())
    # An endpoint's embedder is reached at its URL; a local one does not depend on the chat endpoint.
    endpoint = settings.embedding_base_url or settings.base_url if settings.embedder.startswith("openai:") else ""
    return (*values, endpoint)


def extractor_for(settings: Settings, chat_models: ChatModelFactory) -> Extractor:
    """Memory extraction by the configured model when there is one, else by the offline rules."""
    if settings.uses_offline_model:
        return OfflineExtractor()
    return ModelExtractor(chat_models(settings), timeout=settings.model_timeout)


def summarize(
    topic: str, passages: list[Passage], settings: Settings, chat_models: ChatModelFactory
) -> dict[str, Any]:
    """The second model call of ``generate_summary``: run and counted apart from the outer loop."""
    model = chat_models(settings)
    if not follows_instructions(model):
        return {"summary": extractive_summary(topic, passages), "model_calls": 0, "model": "offline-extractive"}
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
    return {"summary": reply.text, "model_calls": 1, "tokens": usage.get("total_tokens"), "model": settings.model_name}


class Services:
    """One deployment's open services, each opened on first use (a CLI command that only lists feedback
    never loads an embedder) and kept until :meth:`close`."""

    def __init__(
        self, settings: Settings, pools: Callable[[str, str], Any], chat_models: ChatModelFactory = get_chat_model
    ) -> None:
        self.settings = settings
        self._pools = pools  # (url, setting) -> the root's pool for that database, or None
        self._chat_models = chat_models  # the root's clients, shared by every deployment of the process
        self._lock = threading.RLock()
        self._knowledge: Any = None
        self._feedback: FeedbackStore | None = None
        self._effects: ToolEffectLog | None = None
        # One memory store per extracting model: the chat model is a per-run choice.
        self._memory_stores: dict[tuple[Any, ...], ChromaMemoryStore] = {}
        self._memories: dict[tuple[Any, ...], BackgroundMemoryUpdater] = {}
        self._outbox: MemoryOutbox | None = None
        self._checkpointer: BaseCheckpointSaver | None = None
        self._threads: ThreadRegistry | None = None
        self._turn_locks: TurnLocks | None = None
        self._held = contextlib.ExitStack()  # what must be exited, not just closed (the checkpointer)

    @property
    def knowledge_dir(self) -> Path:
        return Path(self.settings.data_dir) / "knowledge"

    def _pool(self, url: str, setting: str = DATABASE_SETTING) -> Any:
        return self._pools(url, setting) if is_postgres(url) else None

    def knowledge(self, *, create: bool = False) -> Any | None:
        """The knowledge base, or None when nothing was ingested yet (unless ``create``)."""
        s = self.settings
        with self._lock:
            if self._knowledge is None:
                if not create and not s.chroma_url and not self.knowledge_dir.exists():
                    return None
                from stores.knowledge.knowledge_base import (
                    KnowledgeBase,  # Chroma and the loaders only when asked
                )

                self._knowledge = KnowledgeBase(
                    s.data_dir,
                    embedder=embedder_for(s),
                    chroma_url=s.chroma_url,
                    database_url=s.database_url,
                    candidates=s.candidates,
                    rrf_k=s.rrf_k,
                    fusion=s.fusion,
                    vector_weight=s.vector_weight,
                    bm25_weight=s.bm25_weight,
                    trash_days=s.trash_days,
                    bm25_staleness=s.bm25_staleness,
                    max_file_bytes=round(s.max_file_mb * 1024 * 1024) or None,
                    pool=self._pool(s.database_url) if s.chroma_url else None,
                )
            return self._knowledge

    def feedback(self) -> FeedbackStore:
        with self._lock:
            if self._feedback is None:
                s = self.settings
                self._feedback = FeedbackStore(s.data_dir, s.database_url, pool=self._pool(s.database_url))
            return self._feedback

    def feedback_penalties(self) -> dict[str, int]:
        """Chunks cited in enough answers rated bad to be down-weighted."""
        return self.feedback().bad_citations(self.settings.feedback_min_bad, self.settings.feedback_min_users)

    def tool_effects(self) -> ToolEffectLog:
        """The record of side-effecting tool calls, beside the threads."""
        with self._lock:
            if self._effects is None:
                s = self.settings
                pool = self._pool(s.checkpoint_url, CHECKPOINT_SETTING)
                self._effects = ToolEffectLog(s.data_dir, s.checkpoint_url, pool=pool)
            return self._effects

    def checkpointer(self) -> BaseCheckpointSaver:
        """Where the deployment's threads are kept (tables created on first use): SQLite under the data
        dir, or Postgres on the root's pool for ``checkpoint_url``."""
        with self._lock:
            if self._checkpointer is None:
                s = self.settings
                pool = self._pool(s.checkpoint_url, CHECKPOINT_SETTING)
                self._checkpointer = self._held.enter_context(
                    open_checkpointer(s.data_dir, s.checkpoint_url, pool=pool)
                )
            return self._checkpointer

    def threads(self) -> ThreadRegistry:
        """Who owns each thread, beside the checkpoints."""
        with self._lock:
            if self._threads is None:
                s = self.settings
                pool = self._pool(s.checkpoint_url, CHECKPOINT_SETTING)
                self._threads = ThreadRegistry(s.data_dir, s.checkpoint_url, pool=pool)
            return self._threads

    def turn_locks(self) -> TurnLocks:
        """One turn per thread at a time, across the processes sharing the threads."""
        with self._lock:
            if self._turn_locks is None:
                s = self.settings
                pool = self._pool(s.checkpoint_url, CHECKPOINT_SETTING)
                self._turn_locks = TurnLocks(s.data_dir, s.checkpoint_url, pool=pool)
            return self._turn_locks

    def memory_store(self, run: Settings | None = None) -> ChromaMemoryStore:
        """The long-term memory store (recall and validated writes), extracting with ``run``'s model
        (default: the deployment's)."""
        run = run if run is not None else self.settings
        key = (run.model_name, run.base_url, run.model_timeout)
        with self._lock:
            store = self._memory_stores.get(key)
            if store is None:
                s = self.settings
                days = s.memory_episodic_days
                store = self._memory_stores[key] = ChromaMemoryStore(
                    s.data_dir,
                    embedder=embedder_for(s),
                    chroma_url=s.chroma_url,
                    database_url=s.database_url,
                    extractor=extractor_for(run, self._chat_models),
                    ttl_days={"episodic": days} if days > 0 else None,
                    pool=self._pool(s.database_url),
                )
            return store

    def memory(self, run: Settings | None = None) -> BackgroundMemoryUpdater:
        """The memory store behind a background updater whose turns wait in a durable outbox, so a crash
        loses none; opening it finishes what a dead process left."""
        run = run if run is not None else self.settings
        store = self.memory_store(run)
        key = (run.model_name, run.base_url, run.model_timeout)
        with self._lock:
            updater = self._memories.get(key)
            if updater is None:
                s = self.settings
                if self._outbox is None:
                    self._outbox = MemoryOutbox(s.data_dir, s.database_url, pool=self._pool(s.database_url))
                updater = self._memories[key] = BackgroundMemoryUpdater(store, outbox=self._outbox)
            return updater

    def close(self) -> None:
        """Drain the memory updates, then close every store opened (the root closes the pools)."""
        with self._lock:
            memories = list(self._memories.values())
            opened: list[Any] = [self._knowledge, self._feedback, self._effects, *self._memory_stores.values()]
            opened += [self._outbox, self._threads, self._turn_locks]
            held, self._held = self._held, contextlib.ExitStack()
            self._memories, self._memory_stores, self._outbox = {}, {}, None
            self._knowledge = self._feedback = self._effects = None
            self._checkpointer = self._threads = self._turn_locks = None
        for memory in memories:
            memory.close(DRAIN_SECONDS)
        opened.append(held)
        for service in opened:
            close = getattr(service, "close", None)
            if close is None:
                continue
            try:
                close()
            except Exception:  # one store failing to close must not keep the others open
                log.exception("closing %s failed", type(service).__name__)


class Root:
    """The process's services, one :class:`Services` per deployment and one pool per Postgres database."""

    def __init__(self) -> None:
        limit_malloc_arenas()  # before any service starts a thread
        self._lock = threading.Lock()
        self._services: dict[tuple[Any, ...], Services] = {}
        self._pools: dict[str, Any] = {}
        self._mcp: dict[str, Any] = {}
        self._mcp_lock = threading.Lock()  # starting servers takes seconds: not under the services' lock
        self.chat_models = ChatModels()  # one client per model endpoint, whichever deployment or run asks

    def mcp(self, config_path: str) -> Any:
        """The MCP servers of ``config_path``, started once: every registry built reuses their sessions.
        ``MCPConfigError`` naming the setting when the file cannot be used."""
        from tools.mcp import MCPManager  # MCP machinery only when configured
        from tools.mcp_config import MCPConfigError

        with self._mcp_lock:
            manager = self._mcp.get(str(config_path))
            if manager is None or manager.closed:
                try:
                    manager = MCPManager.from_config(config_path)
                except MCPConfigError as exc:
                    raise MCPConfigError(f"KB_AGENT_MCP_CONFIG: {exc}") from None
                self._mcp[str(config_path)] = manager
            return manager

    def services(self, settings: Settings) -> Services:
        if not isinstance(settings, Settings):  # a tool called outside any run: nothing to open, nothing guessed
            raise TypeError(f"a run's settings are needed to open its services, got {type(settings).__name__}")
        key = service_key(settings)
        with self._lock:
            found = self._services.get(key)
            if found is None:
                found = self._services[key] = Services(settings, self.pool, self.chat_models)
            return found

    def pool(self, url: str, setting: str = DATABASE_SETTING) -> Any:
        """The pool of the database at ``url``, opened on first use and shared by every store on it."""
        with self._lock:
            pool = self._pools.get(url)
        if pool is not None:
            return pool
        from stores.postgres import open_pool

        opened = open_pool(url, setting=setting)  # outside the lock: connecting may take seconds
        with self._lock:
            pool = self._pools.setdefault(url, opened)
        if pool is not opened:
            opened.close()
        return pool

    def close(self) -> None:
        """Close every deployment's services, the MCP servers, then the pools the stores borrowed from."""
        with self._lock:
            services, self._services = list(self._services.values()), {}
            pools, self._pools = list(self._pools.values()), {}
        with self._mcp_lock:
            managers, self._mcp = list(self._mcp.values()), {}
        for each in services:
            each.close()
        for manager in managers:
            manager.close()
        for pool in pools:
            pool.close()
        self.chat_models.clear()


ROOT = Root()
atexit.register(ROOT.close)


def services_for(settings: Settings) -> Services:
    """The services of ``settings``'s deployment, from the process's root."""
    return ROOT.services(settings)


def knowledge_services(root: Root = ROOT) -> KnowledgeServices:
    """The knowledge tools' services: each call opens (once) those of the calling run's settings."""
    return KnowledgeServices(
        knowledge=lambda settings: root.services(settings).knowledge(),
        feedback=lambda settings: root.services(settings).feedback(),
        summarize=lambda topic, passages, settings: summarize(topic, passages, settings, root.chat_models),
        penalties=lambda settings: root.services(settings).feedback_penalties(),
    )


class DeploymentKnowledge:
    """The knowledge base under each run's data dir (None until something is ingested), with the
    down-weighting of chunks the deployment's users rated bad."""

    def __init__(self, root: Root = ROOT) -> None:
        self.root = root

    def __call__(self, settings: Settings) -> Any | None:
        return self.root.services(settings).knowledge()

    def penalties(self, settings: Settings) -> dict[str, int]:
        return self.root.services(settings).feedback_penalties()


DEPLOYMENT_KNOWLEDGE = DeploymentKnowledge()


class RunMemory:
    """Long-term memory for a graph that serves many deployments' runs (the server's ``graph``): each
    run's settings pick their store; a run with ``long_term_memory`` off recalls and learns nothing."""

    def __init__(self, root: Root = ROOT) -> None:
        self.root = root

    def for_run(self, settings: Settings) -> MemoryStore | None:
        return self.root.services(settings).memory(settings) if self.enabled(settings) else None

    def enabled(self, settings: Settings) -> bool:
        return settings.long_term_memory


# The services of the process's root, by the settings that name them: the CLI's and the tests' entry.
def open_knowledge_base(settings: Settings, *, create: bool = False) -> Any | None:
    return ROOT.services(settings).knowledge(create=create)


def feedback_store(settings: Settings) -> FeedbackStore:
    return ROOT.services(settings).feedback()


def tool_effects(settings: Settings) -> ToolEffectLog:
    return ROOT.services(settings).tool_effects()


def memory_store(settings: Settings) -> ChromaMemoryStore:
    return ROOT.services(settings).memory_store(settings)


def open_memory(settings: Settings) -> BackgroundMemoryUpdater:
    return ROOT.services(settings).memory(settings)
