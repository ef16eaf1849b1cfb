"""Arguments nested past MAX_ARGUMENT_DEPTH are refused with one line, never a RecursionError."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from typer.testing import CliRunner

from cli.app import app
from graph import build_graph
from models import ScriptedChatModel, tool_call
from tests.fixtures.tool_rounds import Call, Calls
from tools.nesting import MAX_ARGUMENT_DEPTH, json_too_deep, too_deep
from tools.registry import ToolContext, ToolRegistry, ToolSpec

DEEP = 60_000


def _nested(depth: int) -> dict[str, Any]:
    """{"x": [[[…]]]} with ``depth`` levels in all, built without recursion."""
    inner: list[Any] = []
    for _ in range(depth - 2):
        inner = [inner]
    return {"x": inner}


def test_the_bound_is_exact() -> None:
    assert not too_deep(_nested(MAX_ARGUMENT_DEPTH)) and too_deep(_nested(MAX_ARGUMENT_DEPTH + 1))
    text = "[" * MAX_ARGUMENT_DEPTH + "]" * MAX_ARGUMENT_DEPTH
    assert not json_too_deep(text) and json_too_deep("[" + text + "]")
    assert not json_too_deep('{"a": "' + "[" * 1000 + '"}')  # brackets inside a string are text


def test_the_model_gets_a_tool_error_for_deep_arguments() -> None:
    received: list[Any] = []
    registry = ToolRegistry()
    registry.register(
        ToolSpec.from_schema(
            "echo", "Echo.", {"type": "object", "properties": {"x": {}}}, lambda **kw: received.append(kw)
        )
    )
    events: list[dict[str, Any]] = []
    [outcome] = Calls(registry).run(
        [Call("c1", "echo", _nested(DEEP))], ToolContext(user_id="u"), emit=events.append
    )
    assert outcome.status == "error" and outcome.call_id == "c1"
    assert outcome.content == (
        f"Error: the arguments for 'echo' nest deeper than {MAX_ARGUMENT_DEPTH} levels; send flat arguments"
    )
    assert received == [] and events[0]["args"] is None


def test_a_graph_turn_with_deep_model_arguments_ends_with_a_tool_message() -> None:
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("calculator", _nested(DEEP), id="deep")]), AIMessage("ok")]
    )
    config = {"configurable": {"thread_id": "deep"}}  # the checkpointer must not walk the arguments either
    result = build_graph(InMemorySaver(), model=model).invoke({"messages": [HumanMessage("go")]}, config)
    [reply] = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert reply.tool_call_id == "deep" and "nest deeper than" in reply.text


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_tools_call_refuses_deep_args_with_one_line_and_exit_2(opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    result = CliRunner().invoke(app, ["tools", "call", "calculator", "--args", opener * DEEP + closer * DEEP])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: --args nest deeper than {MAX_ARGUMENT_DEPTH} levels; send flat arguments"
    ]
