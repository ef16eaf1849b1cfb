"""``update_memory``: after the answer is in the state, let the memory store learn from the turn.

A failure here is logged and swallowed: the answer is already saved and must not be lost or changed
because memory extraction failed.
"""

from __future__ import annotations

import logging

from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.context import Context, run_settings
from nodes.load_memory import MemorySource, run_memory
from nodes.node_io import IO, Node, Steps, dual_node
from nodes.settings import Settings
from nodes.state import State
from tools.permissions import grant_for

log = logging.getLogger("kb_agent.memory")


def make_update_memory(source: MemorySource, deployment: Settings | None = None) -> Node:
    """The node; the store's update (extraction, SQLite, Chroma) runs off the event loop under ``ainvoke``."""

    def update_memory(state: State, runtime: Runtime[Context]) -> Steps:
        ctx = run_settings(runtime, deployment)
        memory = run_memory(source, ctx)
        if memory is None:
            return {}
        if not grant_for(ctx).allows("memory:write"):  # the caller may not keep memories: learn nothing
            return {}
        thread_id = get_config().get("configurable", {}).get("thread_id")
        try:
            applied = yield IO(lambda: memory.update_from_turn(ctx.user_id, thread_id, state.messages))
        except Exception:
            log.exception(
                "memory update failed for user=%s thread=%s; the answer is kept", ctx.user_id, thread_id
            )
            return {}
        log.info("node=update_memory user=%s applied=%d", ctx.user_id, applied)
        return {}

    return dual_node(update_memory, "update_memory")
