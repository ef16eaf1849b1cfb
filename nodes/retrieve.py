"""``retrieve``: consult the knowledge base before the model decides, when there is one (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from graph.context import Context
from graph.state import State
from nodes.turn import current_question
from stores.base import KnowledgeBase

TOP_K = 5


def make_retrieve(knowledge: KnowledgeBase | None) -> Callable[[State, Runtime[Context]], dict[str, Any]]:
    def retrieve(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        question, _ = current_question(state.messages)
        if knowledge is None or not question.strip():
            return {"passages": []}
        ctx = Context.from_runtime(runtime)
        passages = knowledge.search(question, user_id=ctx.user_id, groups=(), top_k=TOP_K)
        return {"passages": list(passages)}

    return retrieve
