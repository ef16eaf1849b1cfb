"""A side effect happens once: a tools node that crashed and re-runs on resume replays recorded results.

LangGraph re-runs a whole node when a run resumes after it failed, so a side-effecting call that finished
before another call of the same round crashed would run again. Side-effecting tools (``side_effects=True``)
are recorded by ``tool_call_id`` in the thread database and replayed from the record.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from graph.builder import build_graph, default_registry
from models.scripted import ScriptedChatModel, tool_call
from nodes.settings import Settings
from tools.registry import ToolRegistry, ToolSpec

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


class Crash(BaseException):
    """A crash that no ``except Exception`` catches: the node fails and LangGraph keeps its checkpoint."""


def _registry(effects: list[str], crash: dict[str, bool], side_effects: bool = True) -> ToolRegistry:
    registry = ToolRegistry()

    def send_mail() -> str:
        effects.append("mail")
        return f"mail #{len(effects)} sent"

    def flaky() -> str:
        if crash["now"]:
            raise Crash("the process fell over mid-round")
        return "ok"

    registry.register(ToolSpec.from_schema("send_mail", "send a mail", OBJ, send_mail, side_effects=side_effects))
    registry.register(ToolSpec.from_schema("flaky", "read something", OBJ, flaky))
    return registry


def _run_crash_and_resume(
    checkpointer: BaseCheckpointSaver, tmp_path: Path, side_effects: bool = True
) -> tuple[list[str], list[ToolMessage]]:
    effects: list[str] = []
    crash = {"now": True}
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("send_mail", {}), tool_call("flaky", {})]), "done"]
    )
    graph = build_graph(
        checkpointer=checkpointer, model=model, registry=_registry(effects, crash, side_effects), knowledge=None
    )
    ctx = Settings(data_dir=str(tmp_path), long_term_memory=False, tool_concurrency=1)  # mail first
    config = {"configurable": {"thread_id": f"once-{uuid.uuid4().hex[:8]}"}}  # Postgres outlives the test
    with pytest.raises(Crash):
        graph.invoke({"messages": [("user", "mail them")]}, config, context=ctx)
    assert effects == ["mail"]  # the mail went out before the crash
    crash["now"] = False
    result = graph.invoke(None, config, context=ctx)  # resume: the tools node runs again
    return effects, [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_a_side_effect_runs_once_when_the_tools_node_is_re_run_after_a_crash(
    checkpointer: BaseCheckpointSaver, tmp_path: Path
) -> None:
    effects, results = _run_crash_and_resume(checkpointer, tmp_path)
    assert effects == ["mail"]
    assert [(m.name, m.text, m.status) for m in results] == [
        ("send_mail", "mail #1 sent", "success"),  # the recorded result, not a second run
        ("flaky", "ok", "success"),
    ]


def test_without_the_flag_the_call_runs_again_which_is_why_the_flag_exists(
    checkpointer: BaseCheckpointSaver, tmp_path: Path
) -> None:
    effects, _ = _run_crash_and_resume(checkpointer, tmp_path, side_effects=False)
    assert effects == ["mail", "mail"]


def test_the_built_in_tools_that_change_something_are_marked() -> None:
    marked = {spec.name for spec in default_registry() if spec.side_effects}
    assert marked == {"submit_feedback", "remember", "forget", "delete_document"}
