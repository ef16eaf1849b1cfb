"""``load_memory``: recall this user's long-term memories relevant to the question."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from langgraph.runtime import Runtime

from nodes.context import Context, run_settings
from nodes.conversation import current_question
from nodes.node_io import IO, Node, Steps, dual_node
from nodes.settings import Settings
from nodes.state import State
from stores.base import MemoryStore
from tools.permissions import grant_for

RECALL_TOP_K = 5


@runtime_checkable
class MemoryForRun(Protocol):
    """Long-term memory chosen by each run's settings (a graph serving many deployments)."""

    def for_run(self, settings: Settings) -> MemoryStore | None: ...


MemorySource = MemoryStore | MemoryForRun | None


def run_memory(memory: MemorySource, settings: Settings) -> MemoryStore | None:
    """The store this run recalls from and learns into (None: no long-term memory)."""
    return memory.for_run(settings) if isinstance(memory, MemoryForRun) else memory


def remembers(source: MemorySource, settings: Settings) -> bool:
    """Whether runs with ``settings`` have long-term memory at all, decided without opening a store (the
    graph's edges ask it on the event loop): a source that chooses per run may say so by ``enabled``."""
    if source is None:
        return False
    enabled = getattr(source, "enabled", None) if isinstance(source, MemoryForRun) else None
    return bool(enabled(settings)) if callable(enabled) else True


def make_load_memory(source: MemorySource, deployment: Settings | None = None) -> Node:
    """The node; recall (Chroma and the embedder, blocking) runs off the event loop under ``ainvoke``."""

    def load_memory(state: State, runtime: Runtime[Context]) -> Steps:
        ctx = run_settings(runtime, deployment)  # first node: a run's bad context stops the run here
        memory = run_memory(source, ctx)
        if memory is None or not grant_for(ctx).allows("memory:read"):
            return {"memories": []}
        question, _ = current_question(state.messages)
        if not question.strip():
            return {"memories": []}
        recalled = yield IO(lambda: list(memory.recall(ctx.user_id, question, RECALL_TOP_K)))
        if recalled:
            runtime.stream_writer(
                {"type": "memories_recalled", "memories": [{"id": m.get("id"), "content": m.get("content")} for m in recalled]}
            )
        return {"memories": recalled}

    return dual_node(load_memory, "load_memory")
