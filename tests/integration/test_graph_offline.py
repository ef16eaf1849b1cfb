"""The whole graph on the offline model: the README's first command, multi-step turns, streaming, ordering."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from graph.server import graph
from models import ScriptedChatModel, tool_call
from nodes.settings import Settings
from stores.base import MemoryRecord, Passage


def assert_tool_results_follow_calls(messages: Sequence[AnyMessage]) -> None:
    """Every assistant tool call is answered right after it, in call order."""
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            ids = [c["id"] for c in message.tool_calls] + [c["id"] for c in message.invalid_tool_calls]
            following = messages[i + 1 : i + 1 + len(ids)]
            assert [getattr(m, "tool_call_id", None) for m in following] == ids
        if isinstance(message, ToolMessage):
            j = i - 1
            while isinstance(messages[j], ToolMessage):
                j -= 1
            assert isinstance(messages[j], AIMessage) and (
                messages[j].tool_calls or messages[j].invalid_tool_calls
            )


def test_calculation_in_chinese_calls_the_calculator() -> None:
    result = graph.invoke({"messages": [HumanMessage("计算 123 × 456")]})
    messages = result["messages"]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [c["name"] for c in calls] == ["calculator"]
    assert "56088" in messages[-1].content
    assert messages[-1].response_metadata["offline"] is True
    assert_tool_results_follow_calls(messages)


def test_two_step_question_takes_two_rounds_using_the_first_result() -> None:
    result = graph.invoke({"messages": [HumanMessage("计算 123 × 456，然后把结果除以 8")]})
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["56088", "7011"]
    assert "7011" in result["messages"][-1].content
    assert result["budget"]["rounds"] == 3
    assert_tool_results_follow_calls(result["messages"])


def test_english_calculation_and_date_in_one_turn() -> None:
    result = graph.invoke({"messages": [HumanMessage("what is 12 times 3, and what is the date today?")]})
    names = [m.name for m in result["messages"] if isinstance(m, ToolMessage)]
    assert names == ["calculator", "get_current_date"]
    assert "36" in result["messages"][-1].content and "Today is" in result["messages"][-1].content


def test_date_uses_the_context_time_zone() -> None:
    result = graph.invoke(
        {"messages": [HumanMessage("今天几号？")]}, context=Settings(timezone="Asia/Shanghai")
    )
    tool = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert '"timezone": "Asia/Shanghai"' in tool.content


def test_plain_question_gets_a_capabilities_reply_without_tools() -> None:
    result = graph.invoke({"messages": [HumanMessage("hello")]})
    assert len(result["messages"]) == 2
    assert "offline demo model" in result["messages"][-1].content


def test_empty_question_gets_a_clear_message_and_no_model_call() -> None:
    model = ScriptedChatModel([])
    result = build_graph(model=model).invoke({"messages": [HumanMessage("   ")]})
    assert model.calls == []
    assert result["stop_reason"] == "empty_question"
    assert "empty" in result["messages"][-1].content


def test_offline_model_gives_fresh_ids_every_call() -> None:
    saver = InMemorySaver()
    g = build_graph(saver)
    config = {"configurable": {"thread_id": "ids"}}
    for _ in range(2):
        g.invoke({"messages": [HumanMessage("计算 2 + 2")]}, config)
    ids = [m.id for m in g.get_state(config).values["messages"]]
    assert len(ids) == len(set(ids)) == 8


def test_stream_yields_tool_events_updates_and_tokens() -> None:
    custom, nodes, tokens, trace = [], [], [], []
    for mode, chunk in graph.stream(
        {"messages": [HumanMessage("计算 (1+2)*3")]}, stream_mode=["updates", "messages", "custom"]
    ):
        if mode == "custom" and chunk.get("type") == "tool_call":
            custom.append(chunk)
        elif mode == "custom":
            trace.append(chunk)
        elif mode == "updates":
            nodes.extend(chunk)
        else:
            tokens.append(chunk[0])
    assert [(e["tool"], e["status"]) for e in custom] == [("calculator", "executing"), ("calculator", "done")]
    assert custom[0]["call_id"] == custom[1]["call_id"] and custom[0]["type"] == "tool_call"
    assert custom[1]["result"] == "9"  # the done event previews the result (the live trace shows it)
    rounds = [e for e in trace if e["type"] == "model_round"]
    assert [r["round"] for r in rounds] == [1, 2] and rounds[0]["tool_calls"][0]["name"] == "calculator"
    assert "calculator" in rounds[0]["tools_offered"]
    assert nodes == [  # a calculation does not consult the knowledge base
        "load_memory",
        "agent",
        "tools",
        "agent",
        "update_memory",
    ]
    assert "".join(t.content for t in tokens if isinstance(t.content, str)).count("9") >= 1


def test_stream_reports_tool_errors() -> None:
    events = [
        c
        for m, c in graph.stream({"messages": [HumanMessage("计算 1/0")]}, stream_mode=["custom"])
        if m == "custom" and c.get("type") == "tool_call"
    ]
    assert events[-1]["status"] == "error" and "division by zero" in events[-1]["error"]


@pytest.mark.parametrize(
    "script_call, expected",
    [
        ({"name": "calculator", "args": {"expression": "9**9**9"}}, "too large"),
        ({"name": "calculator", "args": {"expression": "__import__('os')"}}, "not allowed"),
        ({"name": "calculator", "args": {"expression": "1+" * 5000 + "1"}}, "too long"),
        ({"name": "calculator", "args": {"expr": "1+1"}}, "missing required argument 'expression'"),
        ({"name": "no_such_tool", "args": {}}, "unknown tool 'no_such_tool'"),
    ],
)
def test_bad_tool_calls_become_tool_errors_and_the_loop_continues(
    script_call: dict[str, Any], expected: str
) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call(**script_call)]), "done"])
    result = build_graph(model=model).invoke({"messages": [HumanMessage("go")]})
    tool = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool.status == "error" and expected in tool.content.lower()
    assert result["messages"][-1].content == "done"
    seen = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert seen[-1].content == tool.content  # the model saw the error


def test_malformed_json_arguments_are_answered_with_an_error() -> None:
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "calculator",
                "args": '{"expression": "1+',
                "id": "call_bad",
                "error": "bad json",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = ScriptedChatModel([bad, "recovered"])
    result = build_graph(model=model).invoke({"messages": [HumanMessage("go")]})
    tool = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert tool.tool_call_id == "call_bad" and tool.status == "error" and "not valid JSON" in tool.content
    assert result["messages"][-1].content == "recovered"
    assert_tool_results_follow_calls(result["messages"])


class FakeKnowledge:
    def __init__(self) -> None:
        self.queries: list[tuple[str, str]] = []

    def search(self, query: str, *, user_id: str, groups: Sequence[str], top_k: int = 5) -> list[Passage]:
        self.queries.append((query, user_id))
        return [
            Passage(
                id="docs/a.md#0", text="kb-agent 默认使用 SQLite 保存线程。", source="docs/a.md", score=0.9
            )
        ]


class FakeMemory:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.updates: list[tuple[str, str | None, int]] = []

    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        return [MemoryRecord(id="m1", user_id=user_id, memory_type="semantic", content="用户喜欢简洁的回答")]

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        if self.fail:
            raise RuntimeError("extraction model timed out")
        self.updates.append((user_id, thread_id, len(messages)))
        return 1


def test_retrieved_passages_and_memories_reach_the_prompt_as_marked_data() -> None:
    knowledge, memory = FakeKnowledge(), FakeMemory()
    model = ScriptedChatModel(["ok"])
    g = build_graph(InMemorySaver(), model=model, knowledge=knowledge, memory=memory)
    config = {"configurable": {"thread_id": "t1", "user_id": "alice"}}
    result = g.invoke({"messages": [HumanMessage("线程存在哪里？")]}, config)
    system, question = model.calls[0][0].content, model.calls[0][1].content
    # After the question's own words, in its user message: the system message stays the same every turn.
    assert question.startswith("线程存在哪里？\n\n<用户长期记忆")
    assert "<检索资料" in question and "[docs/a.md#0] kb-agent 默认使用 SQLite" in question
    assert "<用户长期记忆" in question and "用户喜欢简洁的回答" in question
    assert "SQLite" not in system and "用户喜欢简洁的回答" not in system
    assert knowledge.queries == [("线程存在哪里？", "alice")]
    assert result["passages"][0]["id"] == "docs/a.md#0"
    assert result["memories"][0]["user_id"] == "alice"
    assert memory.updates == [("alice", "t1", 2)]


def test_memory_update_failure_keeps_the_answer() -> None:
    model = ScriptedChatModel(["the answer"])
    g = build_graph(InMemorySaver(), model=model, memory=FakeMemory(fail=True))
    config = {"configurable": {"thread_id": "t2"}}
    result = g.invoke({"messages": [HumanMessage("q")]}, config)
    assert result["messages"][-1].content == "the answer"
    assert g.get_state(config).values["messages"][-1].content == "the answer"


def test_user_id_comes_from_context_or_configurable() -> None:
    seen: list[str] = []

    def record(state: Any, runtime: Any) -> dict[str, Any]:
        seen.append(run_settings(runtime).user_id)
        return {}

    from langgraph.graph import START, StateGraph

    from nodes.context import Context, run_settings
    from nodes.state import State

    builder = StateGraph(State, context_schema=Context)
    builder.add_node("record", record)
    builder.add_edge(START, "record")
    g = builder.compile()
    g.invoke({"messages": []}, {"configurable": {"user_id": "bob"}})
    g.invoke({"messages": []}, context=Settings(user_id="carol"))
    g.invoke({"messages": []}, {"configurable": {"user_id": "bob"}}, context={"user_id": "dave"})
    assert seen == ["bob", "carol", "dave"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("question", ["计算 " + "1 + " * 50_000 + "1", "1 " * 100_000, "你好" * 50_000])
def test_a_huge_question_gets_a_clear_answer(question: str) -> None:
    result = graph.invoke({"messages": [HumanMessage(question)]})
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and final.content and not final.tool_calls
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert all(m.status == "error" and "too long" in m.content for m in tool_messages)


def test_a_tool_that_raises_or_hangs_becomes_an_error_and_the_loop_goes_on() -> None:
    import threading

    from tools.builtin import builtin_registry
    from tools.registry import ToolSpec

    release = threading.Event()
    registry = builtin_registry()
    empty = {"type": "object", "properties": {}}
    registry.register(
        ToolSpec.from_schema(
            name="hangs", description="never returns", parameters=empty, handler=lambda: release.wait(30)
        )
    )

    def boom() -> str:
        raise RuntimeError("disk on fire")

    registry.register(ToolSpec.from_schema(name="boom", description="raises", parameters=empty, handler=boom))
    calls = [tool_call("hangs"), tool_call("boom"), tool_call("calculator", {"expression": "6*7"})]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "finished"])
    try:
        result = build_graph(model=model, registry=registry).invoke(
            {"messages": [HumanMessage("go")]}, context=Settings(tool_timeout=0.3)
        )
    finally:
        release.set()
    tools = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tools] == [c["id"] for c in calls]
    assert "timed out after 0.3 s" in tools[0].content and tools[0].status == "error"
    assert "failed: disk on fire" in tools[1].content and "RuntimeError" not in tools[1].content and tools[1].status == "error"
    assert tools[2].content == "42" and tools[2].status == "success"
    assert result["messages"][-1].content == "finished"
