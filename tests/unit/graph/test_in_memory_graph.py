"""A graph built with an in-memory checkpointer and no stores leaves nothing on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph


def test_an_in_memory_graph_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("KB_AGENT_HOME", str(home))
    graph = build_graph(InMemorySaver(), knowledge=None, memory=None)
    config = {"configurable": {"thread_id": "t"}}
    for question in ("what is 12*7?", "what is the date today?", "call tool knowledge_stats with {}"):
        graph.invoke({"messages": [("user", question)]}, config)
    messages = graph.get_state(config).values["messages"]
    assert "84" in messages[2].content or any("84" in str(m.content) for m in messages)
    assert sum(1 for m in messages if m.type == "tool") == 3  # three tools ran, each recorded in memory
    assert not home.exists() or not any(home.rglob("*")), sorted(home.rglob("*"))
