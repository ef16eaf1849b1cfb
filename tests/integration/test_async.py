"""``ainvoke``/``astream`` run the same loop, with an async checkpointer and async tools."""

from __future__ import annotations

import asyncio
import shutil
import threading
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from graph import build_graph
from graph.services import RunMemory, open_memory
from models import ScriptedChatModel, tool_call
from nodes.settings import Settings
from stores.checkpoint import open_async_checkpointer
from tools import clock
from tools.builtin import builtin_registry
from tools.registry import ToolSpec


def test_ainvoke_and_astream_with_the_async_sqlite_checkpointer(tmp_path: Path) -> None:
    async def scenario() -> tuple[list, list]:
        async with open_async_checkpointer(tmp_path) as saver:
            graph = build_graph(saver)
            config = {"configurable": {"thread_id": "async"}}
            await graph.ainvoke({"messages": [HumanMessage("计算 123 × 456")]}, config)
            events = [
                chunk
                async for mode, chunk in graph.astream(
                    {"messages": [HumanMessage("今天几号")]}, config, stream_mode=["custom", "updates"]
                )
                if mode == "custom" and chunk.get("type") == "tool_call"  # the trace events are other types
            ]
            state = await graph.aget_state(config)
            return state.values["messages"], events

    messages, events = asyncio.run(scenario())
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert "56088" in messages[3].content
    assert [(e["tool"], e["status"]) for e in events] == [
        ("get_current_date", "executing"),
        ("get_current_date", "done"),
    ]


def test_async_tools_run_concurrently_under_ainvoke() -> None:
    registry = builtin_registry()
    running, peak = 0, 0

    async def wait(seconds: float) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(seconds)
        running -= 1
        return f"waited {seconds}"

    registry.register(
        ToolSpec.from_schema(
            name="wait",
            description="waits",
            parameters={
                "type": "object",
                "properties": {"seconds": {"type": "number"}},
                "required": ["seconds"],
            },
            handler=wait,
        )
    )
    calls = [tool_call("wait", {"seconds": 0.05 * (3 - i)}) for i in range(3)]
    model = ScriptedChatModel([AIMessage("", tool_calls=calls), "done"])
    result = asyncio.run(
        build_graph(model=model, registry=registry).ainvoke({"messages": [HumanMessage("go")]})
    )
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == [c["id"] for c in calls]  # call order, not finish order
    assert peak == 3


# -- the same conversation through invoke and ainvoke -------------------------------------------------
TURNS = [
    "记住：我喜欢简短的回答，我平时查薪资制度",  # the remember tool; recalled by the turns after it
    "高级工程师的年薪范围是多少？",  # the knowledge base: passages and citations
    "计算 123 × 456，然后把结果除以 8",  # two tool rounds
    "我喜欢什么样的回答？",  # answered from the recalled memory, with its id
    "What does an agent do with tools?",
    "今天几号？",
]
STREAM = ["custom", "updates"]


def _message(m: BaseMessage) -> tuple[Any, ...]:
    calls = [(c["name"], c["args"]) for c in getattr(m, "tool_calls", [])]
    return (m.type, m.text, calls, getattr(m, "name", None), getattr(m, "status", None))


def _event(e: dict[str, Any]) -> tuple[Any, ...]:
    """A custom stream event without what differs from run to run (durations, ids, and the tokens: the
    offline model counts the random tool-call ids too)."""
    kind = e["type"]
    if kind == "tool_call":
        return (kind, e["tool"], e["status"], e.get("result"))
    if kind == "model_round":
        return (kind, e["round"], tuple(e["tools_offered"]), str(e["tool_calls"]))
    if kind == "passages":
        return (kind, tuple((p["id"], p["score"]) for p in e["passages"]))
    return (kind, tuple(m["content"] for m in e["memories"]))


def _summary(chunks: list[tuple[str, Any]], state: dict[str, Any]) -> dict[str, Any]:
    budget = {k: v for k, v in state["budget"].items() if k not in ("started_at", "turn", "tokens", "admitted")}
    return {
        "events": [_event(c) for mode, c in chunks if mode == "custom"],
        "nodes": [next(iter(c)) for mode, c in chunks if mode == "updates"],
        "messages": [_message(m) for m in state["messages"]],
        "passages": [(p["id"], p.get("score")) for p in state["passages"]],
        "memories": [m["content"] for m in state["memories"]],
        "budget": budget,
        "stop_reason": state["stop_reason"],
    }


CONFIG = {"configurable": {"thread_id": "same", "user_id": "u"}}


class FrozenClock(datetime):
    @classmethod
    def now(cls, tz: tzinfo | None = None) -> FrozenClock:
        return cls(2026, 12, 2, 3, 4, 5, tzinfo=tz or UTC)


def test_invoke_and_ainvoke_give_the_same_answers_citations_events_and_state(
    kb_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every node through both drivers: memory recall/update, retrieval, summary check, tools, answers.

    Each path gets its own copy of the data dir (same knowledge base, no memories), so both start equal;
    the date tool reads a frozen clock.
    """
    monkeypatch.setattr(clock, "datetime", FrozenClock)
    twin = kb_home.with_name("home-async")
    shutil.copytree(kb_home, twin)

    def sync_run() -> list[dict[str, Any]]:
        ctx, config, seen = Settings(model="offline", data_dir=str(kb_home)), CONFIG, []
        graph = build_graph(InMemorySaver(), memory=RunMemory())
        for question in TURNS:
            chunks = list(
                graph.stream({"messages": [HumanMessage(question)]}, config, stream_mode=STREAM, context=ctx)
            )
            assert open_memory(ctx).drain(10)
            seen.append(_summary(chunks, graph.get_state(config).values))
        return seen

    async def async_run() -> list[dict[str, Any]]:
        ctx, config, seen = Settings(model="offline", data_dir=str(twin)), CONFIG, []
        graph = build_graph(InMemorySaver(), memory=RunMemory())
        for question in TURNS:
            chunks = [
                c
                async for c in graph.astream(
                    {"messages": [HumanMessage(question)]}, config, stream_mode=STREAM, context=ctx
                )
            ]
            assert await asyncio.to_thread(open_memory(ctx).drain, 10)
            seen.append(_summary(chunks, (await graph.aget_state(config)).values))
        return seen

    blocking, awaited = sync_run(), asyncio.run(async_run())
    assert awaited == blocking
    kinds = {e[0] for turn in blocking for e in turn["events"]}
    assert kinds == {"tool_call", "model_round", "passages", "memories_recalled"}  # every event was compared
    assert any(turn["passages"] for turn in blocking) and any(turn["memories"] for turn in blocking)
    assert "7011" in blocking[2]["messages"][-1][1]
    assert "简短" in blocking[3]["messages"][-1][1]


def test_an_approval_interrupt_pauses_and_resumes_the_same_under_ainvoke() -> None:
    """A high-impact call pauses the async tools node before anything runs; the answer resumes it."""
    ran: list[str] = []
    registry = builtin_registry()
    registry.register(
        ToolSpec.from_schema(
            name="wipe",
            description="wipes",
            parameters={"type": "object", "properties": {}},
            handler=lambda: ran.append("wipe") or "wiped",
            requires_approval=True,
        )
    )

    async def scenario(approve: bool) -> tuple[Any, dict[str, Any]]:
        model = ScriptedChatModel([AIMessage("", tool_calls=[tool_call("wipe", {})]), "ok"])
        graph = build_graph(InMemorySaver(), model=model, registry=registry, knowledge=None)
        config = {"configurable": {"thread_id": f"approve-{approve}"}}
        paused = await graph.ainvoke({"messages": [HumanMessage("wipe it")]}, config)
        assert ran == []
        done = await graph.ainvoke(Command(resume={"approved": approve}), config)
        return paused["__interrupt__"][0].value, done

    request, done = asyncio.run(scenario(False))
    assert request["tool"] == "wipe" and ran == []
    assert "rejected" in next(m for m in done["messages"] if isinstance(m, ToolMessage)).content
    _, done = asyncio.run(scenario(True))
    assert (
        ran == ["wipe"] and next(m for m in done["messages"] if isinstance(m, ToolMessage)).content == "wiped"
    )


def test_a_hung_blocking_tool_times_out_under_ainvoke_and_the_next_calls_still_run() -> None:
    """The hung handler keeps its daemon worker; the turn goes on and a second turn's calls get others."""
    release = threading.Event()
    registry = builtin_registry()
    registry.register(
        ToolSpec.from_schema(
            name="hangs",
            description="never returns",
            parameters={"type": "object", "properties": {}},
            handler=lambda: release.wait(30),
        )
    )
    calls = [tool_call("hangs"), tool_call("calculator", {"expression": "6*7"})]
    model = ScriptedChatModel(
        [AIMessage("", tool_calls=calls), "first done", AIMessage("", tool_calls=calls), "second done"]
    )
    graph = build_graph(InMemorySaver(), model=model, registry=registry, knowledge=None)
    config = {"configurable": {"thread_id": "hung"}}

    async def two_turns() -> list[Any]:
        ctx = Settings(tool_timeout=0.3)
        first = await graph.ainvoke({"messages": [HumanMessage("go")]}, config, context=ctx)
        second = await graph.ainvoke({"messages": [HumanMessage("again")]}, config, context=ctx)
        return [first, second]

    try:
        results = asyncio.run(two_turns())
    finally:
        release.set()
    for result, answer in zip(results, ["first done", "second done"], strict=True):
        hung, calculated = [m for m in result["messages"] if isinstance(m, ToolMessage)][-2:]
        assert "timed out after 0.3 s" in hung.content and hung.status == "error"
        assert calculated.content == "42" and calculated.status == "success"
        assert result["messages"][-1].content == answer
