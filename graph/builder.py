"""The agent's wiring — read it top to bottom as the picture of the agent.

    load_memory → retrieve → agent ⇄ [review →] tools → update_memory

Before each model round ``agent`` brings the request within its input budget, in the same step: over the
history budget it folds the oldest whole rounds into the running summary (``nodes.summarize``). After
``agent``: tool calls go to ``tools``, an answer to ``update_memory``. After ``tools``: back to the model
unless the budget is spent. Python and CLI callers use ``build_graph(checkpointer=...)``; the
LangGraph server imports ``graph.server.graph``, compiled without one (it brings its own).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore

from graph.services import (
    DEPLOYMENT_KNOWLEDGE,
    ROOT,
    DeploymentKnowledge,
    Root,
    RunMemory,
    knowledge_services,
)
from nodes.agent import make_agent
from nodes.context import context_schema, run_settings
from nodes.conversation import current_question
from nodes.execute_tools import make_review, make_tools, needs_review, pending
from nodes.load_memory import make_load_memory, remembers
from nodes.retrieval_gate import is_calculation
from nodes.retrieve import KnowledgeSource, make_retrieve
from nodes.settings import Settings
from nodes.state import InputState, State
from nodes.summarize import make_fold
from nodes.tool_choice import add_find_tools
from nodes.update_memory import make_update_memory
from stores.base import MemoryStore
from stores.memory.store import ChromaMemoryStore
from stores.tool_effects import ToolEffectLog
from tools.builtin import builtin_registry
from tools.knowledge_tools import knowledge_tools
from tools.memory_tools import memory_tools
from tools.registry import ToolRegistry

log = logging.getLogger("kb_agent.graph")


def route_after_agent(
    state: State, registry: ToolRegistry | None = None
) -> Literal["review", "tools", "agent", "update_memory"]:
    """Calls go to ``tools``, through ``review`` when one is for a tool that asks a person first or the
    agent node did not admit them; a round of only unreadable calls (answered by the agent node) goes back
    to the model; an answer ends the turn."""
    message = pending(state.messages)
    if message is not None:
        return "review" if needs_review(registry or ToolRegistry(), state, message) else "tools"
    if state.messages and isinstance(state.messages[-1], ToolMessage):
        return "agent"
    return "update_memory"


def route_after_tools(state: State) -> Literal["agent", "update_memory"]:
    """Back to the model (which ends the turn itself when its budget is spent)."""
    return "update_memory" if state.stop_reason else "agent"


class Routes:
    """The conditional edges of one graph: a step with nothing to do in a run is not taken, since every
    step checkpoints the whole state. Decided from the state and the run's settings only, never by
    opening a store (edges run on the event loop under ``ainvoke``)."""

    def __init__(
        self,
        memory: MemoryStore | RunMemory | None,
        knowledge: object,
        deployment: Settings,
        registry: ToolRegistry | None = None,
    ) -> None:
        self.memory, self.knowledge, self.deployment = memory, knowledge, deployment
        self.registry = registry

    def remembers(self) -> bool:
        """Whether this run has long-term memory; outside a run (a state update applied as a node, which
        takes the node's edges) by the deployment's settings."""
        try:
            runtime = get_runtime()
        except RuntimeError:
            runtime = None
        return remembers(self.memory, run_settings(runtime, self.deployment))

    def start(self, state: State) -> Literal["load_memory", "retrieve", "agent"]:
        """Recall when the run has long-term memory, or last turn's recalled memories must be cleared."""
        return "load_memory" if state.memories or self.remembers() else self.after_memory(state)

    def after_memory(self, state: State) -> Literal["retrieve", "agent"]:
        """Search when the question may need the documents, or last turn's passages must be cleared."""
        if state.passages:
            return "retrieve"
        question, _ = current_question(state.messages)
        searchable = self.knowledge is not None and question.strip() and not is_calculation(question)
        return "retrieve" if searchable else "agent"

    def after_agent(self, state: State) -> Literal["review", "tools", "agent", "update_memory", "__end__"]:
        return self._learn(route_after_agent(state, self.registry))

    def after_tools(self, state: State) -> Literal["agent", "update_memory", "__end__"]:
        return self._learn(route_after_tools(state))

    def _learn(self, step: Any) -> Any:
        """``update_memory`` only for a run that has long-term memory; else the turn ends here."""
        return step if step != "update_memory" or self.remembers() else END


def tool_memory(memory: MemoryStore | RunMemory | None) -> ChromaMemoryStore | None:
    """The store behind a ``memory`` given to the graph, for the memory tools to write where it reads."""
    inner = getattr(memory, "store", memory)
    return inner if isinstance(inner, ChromaMemoryStore) else None


def default_registry(memory: ChromaMemoryStore | None = None, root: Root = ROOT) -> ToolRegistry:
    """The built-in tools plus the knowledge-base tools, bound to the services of each run's settings.

    ``memory`` fixes the memory tools' store (else each run's settings open theirs).
    """
    registry = builtin_registry()
    for spec in knowledge_tools(knowledge_services(root)):
        registry.register(spec)

    def run_memory(settings: Settings) -> ChromaMemoryStore:
        return memory if memory is not None else root.services(settings).memory_store(settings)

    for spec in memory_tools(run_memory):
        registry.register(spec)
    return registry


def app_registry(ctx: Settings | None = None, *, memory: ChromaMemoryStore | None = None) -> ToolRegistry:
    """Everything the application offers: the defaults plus the MCP servers of ``ctx.mcp_config``.

    A config file that cannot be used is ``MCPConfigError`` naming the setting (nothing starts on half a
    config); a server of a valid config that fails to start is logged and the others still load.
    """
    registry = default_registry(memory)
    ctx = ctx if ctx is not None else Settings.current()
    if ctx.mcp_config:
        from tools.mcp import register_mcp_tools  # MCP machinery only when configured

        register_mcp_tools(registry, ROOT.mcp(ctx.mcp_config))
    add_find_tools(registry, ctx.tool_candidates)
    return registry


def build_builder(
    *,
    model: BaseChatModel | None = None,
    registry: ToolRegistry | None = None,
    knowledge: KnowledgeSource = DEPLOYMENT_KNOWLEDGE,
    memory: MemoryStore | RunMemory | None = None,
    settings: Settings | None = None,
    effects: ToolEffectLog | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """The uncompiled graph.

    ``model`` fixes the chat model (else it is chosen per run from the context); ``knowledge`` is a
    knowledge base, a function of the run's settings that opens one (the default: the one under the data
    dir, if anything was ingested), or None for none. ``settings`` is the deployment (None: read from the
    environment); a run's context may only adjust it within its caps (``nodes.context``). ``effects`` is
    the record of side-effecting tool calls (else the one beside each run's threads).
    """
    settings = settings if settings is not None else Settings.current()  # read once, here, not per run
    if registry is None:
        registry = app_registry(settings, memory=tool_memory(memory))
    add_find_tools(registry)  # a catalog too big to bind whole gets the find_tools meta-tool
    builder = StateGraph(State, input_schema=InputState, context_schema=context_schema(settings))
    builder.add_node("load_memory", make_load_memory(memory, settings))
    # Bad feedback down-weights chunks of the deployment's own knowledge base only.
    penalties = knowledge.penalties if isinstance(knowledge, DeploymentKnowledge) else None
    models = ROOT.chat_models  # the process's clients: a run picks its model, the client is shared
    builder.add_node("retrieve", make_retrieve(knowledge, model, settings, penalties, chat_models=models))
    fold = make_fold(registry, model, deployment=settings, chat_models=models)
    builder.add_node("agent", make_agent(registry, model, settings, chat_models=models, fold=fold))
    record = (lambda _: effects) if effects is not None else (lambda s: ROOT.services(s).tool_effects())
    builder.add_node("review", make_review(registry, settings))
    builder.add_node("tools", make_tools(registry, settings, effects=record))
    builder.add_node("update_memory", make_update_memory(memory, settings))

    routes = Routes(memory, knowledge, settings, registry)
    builder.add_conditional_edges(START, routes.start, ["load_memory", "retrieve", "agent"])
    builder.add_conditional_edges("load_memory", routes.after_memory, ["retrieve", "agent"])
    builder.add_edge("retrieve", "agent")
    builder.add_conditional_edges("agent", routes.after_agent, ["review", "tools", "agent", "update_memory", END])
    builder.add_edge("review", "tools")
    builder.add_conditional_edges("tools", routes.after_tools, ["agent", "update_memory", END])
    builder.add_edge("update_memory", END)
    return builder


def build_graph(
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    *,
    model: BaseChatModel | None = None,
    registry: ToolRegistry | None = None,
    knowledge: KnowledgeSource = DEPLOYMENT_KNOWLEDGE,
    memory: MemoryStore | RunMemory | None = None,
    settings: Settings | None = None,
) -> CompiledStateGraph:
    """The compiled agent. Pass a checkpointer to keep threads (``stores.checkpoint.open_checkpointer``).

    With an in-memory checkpointer the record of side-effecting tool calls is kept in memory too: it guards
    re-runs of a thread's steps, and such threads end with the process.
    """
    settings = settings if settings is not None else Settings.current()
    effects = ToolEffectLog.in_memory() if isinstance(checkpointer, InMemorySaver) else None
    builder = build_builder(
        model=model, registry=registry, knowledge=knowledge, memory=memory, settings=settings, effects=effects
    )
    return builder.compile(checkpointer=checkpointer, store=store, name="kb-agent")
