"""Requests always carry a well-formed tool-call sequence, whatever the thread holds."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph import build_graph
from models import ScriptedChatModel, tool_call
from nodes import prompts
from nodes.history import INTERRUPTED, request, wire_history


def test_well_formed_history_is_unchanged() -> None:
    call = tool_call("calculator", {"expression": "1+1"}, id="c1")
    history = [
        HumanMessage("q"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("2", tool_call_id="c1"),
        AIMessage("2"),
    ]
    assert wire_history(history) == history


def test_missing_results_are_filled_in_call_order() -> None:
    calls = [tool_call("a", id="c1"), tool_call("b", id="c2")]
    history = [
        HumanMessage("q"),
        AIMessage("", tool_calls=calls),
        ToolMessage("ok", tool_call_id="c2"),
        HumanMessage("again"),
    ]
    wired = wire_history(history)
    assert [getattr(m, "tool_call_id", m.type) for m in wired] == ["human", "ai", "c1", "c2", "human"]
    assert wired[2].content == INTERRUPTED and wired[2].status == "error"
    assert wired[3].content == "ok"


def test_orphan_tool_results_are_dropped() -> None:
    history = [ToolMessage("stray", tool_call_id="gone"), HumanMessage("q")]
    assert [m.type for m in wire_history(history)] == ["human"]


def test_unparseable_arguments_are_sent_as_an_empty_object() -> None:
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "calculator", "args": '{"x": ', "id": "b1", "error": "bad", "type": "invalid_tool_call"}
        ],
    )
    wired = wire_history([HumanMessage("q"), bad, ToolMessage("Error", tool_call_id="b1")])
    assert wired[1].invalid_tool_calls[0]["args"] == "{}"
    assert bad.invalid_tool_calls[0]["args"] == '{"x": '  # the state keeps what the model said


def test_a_turn_after_a_crashed_turn_sends_a_repaired_history() -> None:
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "crashed"}}
    dangling = AIMessage("", tool_calls=[tool_call("calculator", {"expression": "2+2"}, id="lost")])
    build_graph(saver).update_state(
        config, {"messages": [HumanMessage("计算 2+2"), dangling]}, as_node="agent"
    )
    model = ScriptedChatModel(["fine"])
    graph = build_graph(saver, model=model)
    graph.update_state(config, {"messages": [HumanMessage("hello")]}, as_node="update_memory")
    result = graph.invoke({"messages": [HumanMessage("next question")]}, config)
    sent = model.calls[0]
    assert [getattr(m, "tool_call_id", m.type) for m in sent[1:]] == ["human", "ai", "lost", "human", "human"]
    assert result["messages"][-1].content == "fine"


REMAINING = {"rounds": 9, "tool_calls": 19, "tokens": 199_000, "seconds": 299.0}
PASSAGES = [{"id": "a.md#0", "text": "Threads are kept in SQLite."}]


def test_request_gives_the_turns_blocks_to_the_current_question_only() -> None:
    call = tool_call("calculator", {"expression": "1+1"}, id="c1")
    thread = [
        HumanMessage("first question"),
        AIMessage("first answer"),
        HumanMessage("where are threads kept?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("2", tool_call_id="c1"),
    ]
    sent = request(thread, remaining=REMAINING, passages=PASSAGES)
    assert [m.type for m in sent] == ["system", "human", "ai", "human", "ai", "tool", "human"]
    assert sent[1].content == "first question" and sent[5].content == "2"
    assert sent[3].content.startswith("where are threads kept?\n\n<retrieved_passages")
    assert "SQLite" in sent[3].content and "SQLite" not in sent[6].content
    assert sent[6].content == prompts.budget_note("en", REMAINING)


def test_request_adds_text_parts_to_a_multipart_question() -> None:
    question = HumanMessage(content=[{"type": "text", "text": "where are threads kept?"}])
    [_, sent] = request([question], remaining=REMAINING, passages=PASSAGES)
    parts = sent.content
    assert parts[0] == question.content[0] and len(parts) == 3
    assert "SQLite" in parts[1]["text"] and "Budget left" in parts[2]["text"]
