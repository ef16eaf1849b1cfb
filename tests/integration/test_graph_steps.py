"""A turn takes only the steps that have work: every step checkpoints the whole state.

Recall and learning run for runs with long-term memory; without it a turn goes straight to the
knowledge base and ends at the answer. A calculation skips the knowledge base. Memories and passages
an earlier turn brought are still cleared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.services import ROOT, RunMemory
from nodes.settings import Settings


def steps(graph: Any, text: str, context: Settings) -> list[str]:
    config = {"configurable": {"thread_id": "steps"}}
    taken: list[str] = []
    for update in graph.stream({"messages": [HumanMessage(text)]}, config, context=context, stream_mode="updates"):
        taken.extend(update)
    return taken


def test_runs_without_long_term_memory_skip_recall_and_learning(tmp_path: Path) -> None:
    on = Settings(data_dir=str(tmp_path), embedder="hashing", long_term_memory=True)
    off = on.replace(long_term_memory=False)
    graph = build_graph(InMemorySaver(), memory=RunMemory(), settings=on)
    config = {"configurable": {"thread_id": "steps"}}
    try:
        assert steps(graph, "remember that I prefer green tea", on) == [
            *("load_memory", "retrieve", "agent", "tools", "agent", "update_memory")
        ]
        steps(graph, "what tea do I prefer?", on)
        assert graph.get_state(config).values["memories"], "the memory was recalled"

        # memory off: recall runs once more only to clear what the last turn recalled
        assert steps(graph, "计算 2 × 3", off) == ["load_memory", "agent", "tools", "agent"]
        assert graph.get_state(config).values["memories"] == []
        assert steps(graph, "计算 3 × 4", off) == ["agent", "tools", "agent"]
        assert "12" in graph.get_state(config).values["messages"][-1].content
        assert steps(graph, "what tea do I prefer?", off)[0] == "retrieve"
    finally:
        ROOT.close()


class OnePassage:
    """A knowledge base that finds one passage for anything."""

    def search(self, query: str, *, user_id: str, groups: Any, top_k: int = 5) -> list[dict[str, Any]]:
        text = "Refunds are accepted within 30 days of purchase."
        return [{"id": "policy.md#0", "text": text, "score": 0.9, "source": "policy.md", "title": "Refunds"}]


def test_a_calculation_skips_the_knowledge_base_after_the_passages_of_the_last_turn_are_cleared() -> None:
    graph = build_graph(InMemorySaver(), knowledge=OnePassage())
    config = {"configurable": {"thread_id": "steps"}}
    context = Settings.current().replace(long_term_memory=False)
    assert steps(graph, "what is the refund policy?", context)[0] == "retrieve"
    assert graph.get_state(config).values["passages"]
    assert steps(graph, "计算 6 × 7", context) == ["retrieve", "agent", "tools", "agent"]  # clears them
    assert graph.get_state(config).values["passages"] == []
    assert steps(graph, "计算 7 × 8", context) == ["agent", "tools", "agent"]
    assert "56" in graph.get_state(config).values["messages"][-1].content
