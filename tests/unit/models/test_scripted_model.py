"""``ScriptedChatModel``, the test double (models/scripted.py)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from models import ScriptedChatModel, tool_call
from models.scripted import ScriptExhausted
from tools.builtin import builtin_registry


def test_replays_the_script_in_order() -> None:
    model = ScriptedChatModel([AIMessage("one"), AIMessage("two"), AIMessage("three")])
    assert [model.invoke("q").content for _ in range(3)] == ["one", "two", "three"]


def test_strings_become_ai_messages() -> None:
    model = ScriptedChatModel(["plain text"])
    reply = model.invoke([HumanMessage("hi")])
    assert isinstance(reply, AIMessage)
    assert reply.content == "plain text"
    assert reply.tool_calls == []


def test_tool_calls_are_replayed() -> None:
    call = tool_call("calculator", {"expression": "1 + 1"}, id="call_fixed")
    reply = ScriptedChatModel([AIMessage("", tool_calls=[call])]).invoke("q")
    assert reply.tool_calls == [call]


def test_tool_call_helper_shape() -> None:
    call = tool_call("get_current_date")
    assert call["name"] == "get_current_date"
    assert call["args"] == {}
    assert call["type"] == "tool_call"
    assert call["id"].startswith("call_")
    assert tool_call("x")["id"] != tool_call("x")["id"]
    assert tool_call("x", {"a": 1}, id="c1") == {
        "name": "x",
        "args": {"a": 1},
        "id": "c1",
        "type": "tool_call",
    }


def test_callable_entries_get_messages_and_tools() -> None:
    seen: list[tuple[list[BaseMessage], list[dict[str, Any]]]] = []

    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen.append((messages, tools))
        return AIMessage(f"saw {len(messages)} messages and {len(tools)} tools")

    defs = builtin_registry().definitions()
    model = ScriptedChatModel(["first", reply])
    bound = model.bind_tools(defs)
    assert bound.invoke([HumanMessage("a")]).content == "first"
    out = bound.invoke([SystemMessage("s"), HumanMessage("b")])
    assert out.content == "saw 2 messages and 2 tools"
    messages, tools = seen[0]
    assert [m.content for m in messages] == ["s", "b"]
    assert tools == defs


def test_callable_entries_may_return_strings() -> None:
    model = ScriptedChatModel([lambda messages, tools: f"echo {messages[-1].content}"])
    reply = model.invoke([HumanMessage("ping")])
    assert isinstance(reply, AIMessage) and reply.content == "echo ping"


def test_a_single_function_answers_every_call() -> None:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(f"call {len(messages)}")

    model = ScriptedChatModel(reply)
    assert [model.invoke([HumanMessage("x")] * n).content for n in (1, 2, 3)] == [
        "call 1",
        "call 2",
        "call 3",
    ]
    assert len(model.calls) == 3


def test_a_single_message_is_replayed_forever() -> None:
    model = ScriptedChatModel(AIMessage("always"))
    assert [model.invoke("q").content for _ in range(4)] == ["always"] * 4


def test_tuple_scripts_work_like_lists() -> None:
    model = ScriptedChatModel(("a", "b"))
    assert [model.invoke("q").content for _ in range(2)] == ["a", "b"]
    with pytest.raises(ScriptExhausted):
        model.invoke("q")


def test_records_every_request() -> None:
    model = ScriptedChatModel(["one", "two"])
    model.invoke([HumanMessage("first")])
    model.invoke([HumanMessage("first"), AIMessage("one"), HumanMessage("second")])
    assert [[m.content for m in call] for call in model.calls] == [
        ["first"],
        ["first", "one", "second"],
    ]


def test_records_the_tools_of_every_request() -> None:
    defs = builtin_registry().definitions()
    model = ScriptedChatModel(["a", "b"])
    model.bind_tools(defs).invoke("q")
    model.invoke("q")
    assert model.tools_seen == [defs, []]
    assert [t["function"]["name"] for t in model.tools_seen[0]] == ["calculator", "get_current_date"]


def test_bind_tools_converts_langchain_tools() -> None:
    from langchain_core.tools import tool

    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    model = ScriptedChatModel(["ok"])
    model.bind_tools([lookup]).invoke("q")
    assert model.tools_seen[0][0]["function"]["name"] == "lookup"
    assert model.tools_seen[0][0]["type"] == "function"


def test_replies_get_fresh_ids_and_the_script_is_not_mutated() -> None:
    original = AIMessage("same", id="fixed")
    model = ScriptedChatModel(original)
    a, b = model.invoke("q"), model.invoke("q")
    assert a.id and b.id and a.id != b.id
    assert a.id.startswith("scripted-")
    assert original.id == "fixed"


def test_the_callers_list_is_not_consumed() -> None:
    script = ["a", "b"]
    model = ScriptedChatModel(script)
    model.invoke("q")
    assert script == ["a", "b"]


def test_exhausted_script_raises_a_clear_error() -> None:
    model = ScriptedChatModel(["only"])
    model.invoke("q")
    with pytest.raises(ScriptExhausted, match=r"ran out after 1 model calls"):
        model.invoke("q")
    assert issubclass(ScriptExhausted, AssertionError)


def test_empty_script_raises_on_the_first_call() -> None:
    with pytest.raises(ScriptExhausted, match=r"after 0 model calls"):
        ScriptedChatModel([]).invoke("q")


def test_stream_falls_back_to_the_scripted_reply() -> None:
    model = ScriptedChatModel(["streamed"])
    chunks = list(model.stream("q"))
    assert "".join(str(c.content) for c in chunks) == "streamed"


def test_async_invoke_uses_the_script() -> None:
    import asyncio

    model = ScriptedChatModel(["async"])
    assert asyncio.run(model.ainvoke("q")).content == "async"
    assert len(model.calls) == 1


def test_model_identity() -> None:
    model = ScriptedChatModel(["x"])
    assert model.model_name == "scripted"
    assert model._llm_type == "scripted"
