"""Each budget limit ends the turn with a clear final message, never an exception."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph import build_graph
from models import ScriptedChatModel, tool_call
from nodes.settings import Settings
from tools.builtin import builtin_registry
from tools.registry import ToolSpec


def _run(model: ScriptedChatModel, ctx: Settings, question: str = "go", **kwargs: Any) -> dict[str, Any]:
    return build_graph(model=model, **kwargs).invoke({"messages": [HumanMessage(question)]}, context=ctx)


def _counting_calculator() -> ScriptedChatModel:
    counter = iter(range(1_000))
    return ScriptedChatModel(
        lambda msgs, tools: AIMessage(
            "", tool_calls=[tool_call("calculator", {"expression": f"{next(counter)} + 1"})]
        )
    )


def test_max_rounds_stops_the_turn_with_a_message() -> None:
    model = _counting_calculator()
    result = _run(model, Settings(max_rounds=3))
    assert len(model.calls) == 3
    assert result["stop_reason"] == "rounds"
    last = result["messages"][-1]
    assert isinstance(last, AIMessage) and not last.tool_calls
    assert "model rounds (3)" in last.content
    assert last.response_metadata["kb_agent_stop"] == "rounds"


def test_max_rounds_default_is_ten() -> None:
    model = _counting_calculator()
    result = _run(model, Settings())
    assert len(model.calls) == 10 and result["stop_reason"] == "rounds"


def test_max_tool_calls_answers_every_call_and_stops() -> None:
    calls = [tool_call("calculator", {"expression": f"{i} * 2"}) for i in range(3)]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls)])
    result = _run(model, Settings(max_tool_calls=2))
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == [c["id"] for c in calls]
    assert [m.status for m in tool_messages] == ["success", "success", "error"]
    assert "budget of 2 tool calls" in tool_messages[2].content
    assert result["stop_reason"] == "tool_calls"
    assert "tool calls (2)" in result["messages"][-1].content


def test_max_tokens_counts_reported_usage() -> None:
    usage = {"input_tokens": 900, "output_tokens": 100, "total_tokens": 1000}
    model = ScriptedChatModel(
        lambda msgs, tools: AIMessage(
            "", tool_calls=[tool_call("calculator", {"expression": f"{len(msgs)} + 1"})], usage_metadata=usage
        )
    )
    result = _run(model, Settings(max_tokens=1500))
    assert len(model.calls) == 2
    assert result["budget"]["tokens"] == 2000
    assert result["stop_reason"] == "tokens"


def test_max_seconds_stops_after_a_slow_tool() -> None:
    registry = builtin_registry()
    registry.register(
        ToolSpec.from_schema(
            name="slow",
            description="sleeps",
            parameters={"type": "object", "properties": {}},
            handler=lambda: time.sleep(0.3) or "ok",
        )
    )
    model = ScriptedChatModel(lambda msgs, tools: AIMessage("", tool_calls=[tool_call("slow", {})]))
    result = _run(model, Settings(max_seconds=0.2), registry=registry)
    assert result["stop_reason"] == "time"
    assert len(model.calls) == 1
    assert "wall time" in result["messages"][-1].content


def test_same_call_three_times_in_a_row_is_stopped_before_the_third_runs() -> None:
    model = ScriptedChatModel(
        lambda msgs, tools: AIMessage("", tool_calls=[tool_call("calculator", {"expression": "1+1"})])
    )
    result = _run(model, Settings(), question="计算 1+1")
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 2
    assert result["stop_reason"] == "repeated_call"
    last = result["messages"][-1]
    assert "连续被请求 3 次" in last.content and not last.tool_calls


def test_model_is_told_the_budget_left() -> None:
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=[tool_call("calculator", {"expression": "2+2"})]), "4"]
    )
    _run(model, Settings(max_rounds=5, max_tool_calls=7))
    first, second = model.calls[0][-1].content, model.calls[1][-1].content  # the note comes last
    assert "5 model rounds, 7 tool calls" in first
    assert "4 model rounds, 6 tool calls" in second


def test_budget_resets_for_each_new_question() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_graph(InMemorySaver(), model=_counting_calculator())
    config = {"configurable": {"thread_id": "t"}}
    ctx = Settings(max_rounds=2)
    first = graph.invoke({"messages": [HumanMessage("one")]}, config, context=ctx)
    second = graph.invoke({"messages": [HumanMessage("two")]}, config, context=ctx)
    assert first["stop_reason"] == second["stop_reason"] == "rounds"
    assert second["budget"]["rounds"] == 2


def test_stored_counters_cannot_lift_the_budget() -> None:
    """Counters read back from state are as the nodes write them: no negative counts, no future start."""
    from nodes.budget import Budget

    budget = Budget(max_rounds=3, max_tool_calls=3, max_tokens=100, max_seconds=10)
    forged = {"turn": "q", "rounds": -1000, "tool_calls": -1e9, "tokens": "many", "started_at": 4e9, "repeats": -5}
    counters = budget.counters_for(forged, "q")
    assert (counters["rounds"], counters["tool_calls"], counters["tokens"], counters["repeats"]) == (0, 0, 0, 0)
    assert counters["started_at"] <= time.time()
    assert budget.spent({**counters, "started_at": counters["started_at"] - 11}) == "time"
    assert budget.counters_for({"turn": "q", "rounds": 2, "started_at": float("nan")}, "q")["rounds"] == 2
