"""Threads persist in every checkpointer (memory, SQLite, Postgres) and survive a new process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph import build_graph
from graph.api import open_agent
from nodes.settings import Settings
from stores.checkpoint import CheckpointConfigError, list_threads, open_checkpointer

ROOT = Path(__file__).resolve().parents[2]


def test_a_thread_keeps_its_turns_and_threads_are_isolated(checkpointer: BaseCheckpointSaver) -> None:
    graph = build_graph(checkpointer)
    a = {"configurable": {"thread_id": f"a-{uuid.uuid4().hex}"}}
    b = {"configurable": {"thread_id": f"b-{uuid.uuid4().hex}"}}
    graph.invoke({"messages": [HumanMessage("计算 6 × 7")]}, a)
    graph.invoke({"messages": [HumanMessage("今天几号")]}, a)
    graph.invoke({"messages": [HumanMessage("hello")]}, b)
    a_messages = graph.get_state(a).values["messages"]
    assert [m.type for m in a_messages] == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert "42" in a_messages[3].content
    assert [m.type for m in graph.get_state(b).values["messages"]] == ["human", "ai"]
    threads = {t.thread_id for t in list_threads(checkpointer)}
    assert {a["configurable"]["thread_id"], b["configurable"]["thread_id"]} <= threads


def test_a_failed_turn_keeps_the_question(checkpointer: BaseCheckpointSaver) -> None:
    config = {"configurable": {"thread_id": f"fail-{uuid.uuid4().hex}"}}
    graph = build_graph(checkpointer)
    bad = Settings(base_url="http://127.0.0.1:9/v1", model="x", model_max_retries=0, model_timeout=2)
    with pytest.raises(Exception, match="cannot reach"):
        graph.invoke({"messages": [HumanMessage("计算 1+1")]}, config, context=bad)
    assert [m.content for m in graph.get_state(config).values["messages"]] == ["计算 1+1"]


CHILD = """
import json, sys
from graph.api import open_agent
from nodes.settings import Settings
with open_agent(Settings(data_dir=sys.argv[1])) as agent:
    answer = agent.ask(sys.argv[2], thread_id="restart")
    print(json.dumps({"text": answer.text, "history": [m.type for m in agent.history("restart")]}))
"""


def _child(data_dir: Path, question: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_AGENT_", "OPENAI_"))}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(data_dir), question],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_thread_continues_in_a_new_process_from_sqlite(tmp_path: Path) -> None:
    first = _child(tmp_path, "计算 123 × 456")
    assert "56088" in first["text"]
    second = _child(tmp_path, "今天几号")
    assert second["history"][:4] == ["human", "ai", "tool", "ai"]
    assert len(second["history"]) == 8
    with open_agent(Settings(data_dir=str(tmp_path))) as agent:
        history = agent.history("restart")
        assert "56088" in history[3].content
        assert isinstance(history[2], ToolMessage)
        agent.clear("restart")
        assert agent.history("restart") == []


def test_unsupported_checkpoint_url_is_a_clear_error(tmp_path: Path) -> None:
    with (
        pytest.raises(CheckpointConfigError, match="unsupported checkpoint URL"),
        open_checkpointer(tmp_path, "mysql://x"),
    ):
        pass
