"""``ainvoke``/``astream`` run the same loop, with an async checkpointer and async tools."""

from __future__ import annotations

import asyncio
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from graph import build_graph
from models import ScriptedChatModel, tool_call
from stores.checkpoint import open_async_checkpointer
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
        ToolSpec(
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
