"""A turn is saved whole or not at all (through the Python API and the CLI, which use it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from graph.api import open_agent
from models.scripted import ScriptedChatModel, tool_call
from nodes.settings import Settings


class Boom(RuntimeError):
    pass


def _explode(_messages: list[BaseMessage], _tools: list) -> AIMessage:
    raise Boom("the model broke mid-turn")


def test_a_failed_turn_leaves_the_thread_as_it_was(tmp_path: Path) -> None:
    model = ScriptedChatModel(
        [
            AIMessage("", tool_calls=[tool_call("calculator", {"expression": "6*7"})]),
            "42",
            AIMessage("", tool_calls=[tool_call("calculator", {"expression": "1+1"})]),
            _explode,  # after a tool round: the turn has written several checkpoints by now
            "2",
        ]
    )
    ctx = Settings(data_dir=str(tmp_path), long_term_memory=False)
    with open_agent(ctx, model=model) as agent:
        agent.ask("6*7?", thread_id="t")
        config = {"configurable": {"thread_id": "t"}}
        before = agent.graph.get_state(config)
        count = len(list(agent.checkpointer.list(config)))
        with pytest.raises(Boom):
            agent.ask("1+1?", thread_id="t")
        after = agent.graph.get_state(config)
        assert after.values == before.values and after.config == before.config
        assert len(list(agent.checkpointer.list(config))) == count
        assert [m.type for m in agent.history("t", include_folded=True)] == ["human", "ai", "tool", "ai"]
        assert agent.ask("1+1?", thread_id="t").text == "2"  # and the thread goes on normally


def test_a_failed_first_turn_leaves_no_thread(tmp_path: Path) -> None:
    ctx = Settings(data_dir=str(tmp_path), long_term_memory=False)
    with open_agent(ctx, model=ScriptedChatModel([_explode])) as agent:
        with pytest.raises(Boom):
            agent.ask("hello", thread_id="fresh")
        assert agent.history("fresh") == []
        assert [t.thread_id for t in agent.threads()] == []
        assert list(agent.checkpointer.list({"configurable": {"thread_id": "fresh"}})) == []


def test_an_unreachable_endpoint_loses_nothing(tmp_path: Path) -> None:
    good = Settings(data_dir=str(tmp_path), long_term_memory=False)
    with open_agent(good) as agent:
        agent.ask("计算 2 + 3", thread_id="t")
    bad = Settings(
        data_dir=str(tmp_path),
        long_term_memory=False,
        base_url="http://127.0.0.1:9/v1",
        model="x",
        model_max_retries=0,
        model_timeout=2,
    )
    with open_agent(bad) as agent, pytest.raises(Exception, match="cannot reach"):
        agent.ask("计算 4 + 5", thread_id="t")
    with open_agent(good) as agent:
        assert [m.content for m in agent.history("t") if m.type == "human"] == ["计算 2 + 3"]
