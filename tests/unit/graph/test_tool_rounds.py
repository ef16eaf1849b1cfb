"""The graph's tools step is LangGraph's ToolNode: an application's ``@tool`` runs under every policy, and
neither a caller's state write nor an old approval lets a call past the turn's budget or a person."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from graph.builder import build_graph
from models.scripted import ScriptedChatModel, tool_call
from nodes.settings import Settings
from tools.builtin import builtin_registry

ADMIN = {"roles": "admin", "user_id": "root"}


def _registry(ran: list[str]) -> Any:
    registry = builtin_registry()

    @tool
    def ship(order: str) -> str:
        """Ship an order."""
        ran.append(order)
        return f"shipped {order}"

    @tool
    async def track(order: str) -> str:
        """Track an order (async only)."""
        return f"{order}: on its way"

    registry.add(ship, requires_approval=True, side_effects=True, permissions=("orders:write",))
    registry.add(track, permissions=("orders:read",))
    return registry


def _tools(result: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def test_the_tools_step_is_a_tool_node() -> None:
    graph = build_graph(InMemorySaver(), model=ScriptedChatModel(["hi"]), knowledge=None)
    assert isinstance(graph.builder.nodes["tools"].runnable, ToolNode)


def test_an_application_tool_runs_under_permissions_approval_and_run_once() -> None:
    ran: list[str] = []
    calls = [tool_call("ship", {"order": "A1"}), tool_call("track", {"order": "A1"})]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "done", AIMessage("", tool_calls=calls), "done"])
    graph = build_graph(InMemorySaver(), model=model, registry=_registry(ran), knowledge=None)
    config = {"configurable": {"thread_id": "t1"}}

    denied = graph.invoke({"messages": [HumanMessage("ship A1")]}, config, context=Settings(user_id="bob"))
    assert ran == [] and all("permission denied" in m.text for m in _tools(denied))

    config = {"configurable": {"thread_id": "t2"}}
    paused = graph.invoke({"messages": [HumanMessage("ship A1")]}, config, context=Settings(**ADMIN))
    assert ran == [] and paused["__interrupt__"][0].value["tool"] == "ship"
    done = graph.invoke(Command(resume={"approved": True}), config, context=Settings(**ADMIN))
    assert ran == ["A1"]
    assert [m.text for m in _tools(done)] == ["shipped A1", "A1: on its way"]  # the async tool under invoke


def test_calls_a_caller_writes_in_a_node_s_name_are_admitted_or_refused_never_run_free() -> None:
    ran: list[str] = []
    model = ScriptedChatModel(["ok", "ok", "ok"])
    graph = build_graph(InMemorySaver(), model=model, registry=_registry(ran), knowledge=None)
    config = {"configurable": {"thread_id": "t3"}}
    graph.invoke({"messages": [HumanMessage("hello")]}, config, context=Settings(**ADMIN, max_tool_calls=3))

    many = [tool_call("calculator", {"expression": f"{i} + 1"}, id=f"c{i}") for i in range(5)]
    graph.update_state(config, {"messages": [AIMessage("", tool_calls=many, id="caller-1")]}, as_node="agent")
    result = graph.invoke(None, config, context=Settings(**ADMIN, max_tool_calls=3))
    answers = {m.tool_call_id: m.text for m in _tools(result) if m.tool_call_id.startswith("c")}
    assert [answers[f"c{i}"] for i in range(3)] == ["1", "2", "3"]
    assert all("budget of 3 tool calls is spent" in answers[f"c{i}"] for i in (3, 4))

    skipped = [tool_call("ship", {"order": "B2"}, id="s1"), tool_call("calculator", {"expression": "1"}, id="s2")]
    graph.update_state(config, {"messages": [AIMessage("", tool_calls=skipped, id="caller-2")]}, as_node="review")
    result = graph.invoke(None, config, context=Settings(**ADMIN))
    answers = {m.tool_call_id: m.text for m in _tools(result)}
    assert ran == [] and all("not admitted" in answers[i] for i in ("s1", "s2"))


def test_an_approval_does_not_carry_over_to_another_message_with_the_same_call() -> None:
    ran: list[str] = []
    call = tool_call("ship", {"order": "C3"}, id="same")
    model = ScriptedChatModel([AIMessage("", tool_calls=[call]), "shipped", "again"])
    graph = build_graph(InMemorySaver(), model=model, registry=_registry(ran), knowledge=None)
    config = {"configurable": {"thread_id": "t4"}}
    graph.invoke({"messages": [HumanMessage("ship C3")]}, config, context=Settings(**ADMIN))
    graph.invoke(Command(resume={"approved": True}), config, context=Settings(**ADMIN))
    assert ran == ["C3"]

    replay = AIMessage("", tool_calls=[call], id="caller-replay")  # the call that was approved, once more
    graph.update_state(config, {"messages": [replay]}, as_node="review")
    result = graph.invoke(None, config, context=Settings(**ADMIN))
    assert ran == ["C3"] and "not admitted" in _tools(result)[-1].text
    graph.update_state(config, {"messages": [replay.model_copy(update={"id": "caller-replay-2"})]}, as_node="agent")
    paused = graph.invoke(None, config, context=Settings(**ADMIN))
    assert ran == ["C3"] and paused["__interrupt__"][0].value["call_id"] == "same"  # a person is asked again
