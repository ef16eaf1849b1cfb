"""MCP servers as the application sees them: declared in ``KB_AGENT_MCP_CONFIG``, then the same platform
as local tools — the offline model calls them through the graph, permissions, approvals, streaming events
and ``kb-agent tools list|call``. Real FastMCP processes over stdio (``tests/fixtures/mcp_server.py``).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from typer.testing import CliRunner

from cli.app import app
from graph import build_graph
from graph.builder import app_registry
from graph.services import ROOT
from nodes.settings import Settings
from tools.mcp_config import MCPConfigError

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py"

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def mcp_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two servers: ``fx`` (everyone, ``add`` needs approval) and ``ops`` (needs the net:ops scope)."""
    config = {
        "servers": {
            "fx": {
                "transport": "stdio",
                "command": sys.executable,
                "args": [str(SERVER), "--name", "fx"],
                "approval": ["add"],
            },
            "ops": {
                "transport": "stdio",
                "command": sys.executable,
                "args": [str(SERVER), "--name", "ops"],
                "permissions": ["net:ops"],
            },
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    monkeypatch.setenv("KB_AGENT_MCP_CONFIG", str(path))
    try:
        yield path
    finally:
        ROOT.mcp(str(path)).close()


def _tool_results(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_the_app_registry_holds_both_servers_prefixed_on_clash(mcp_config: Path) -> None:
    registry = app_registry(Settings())
    names = set(registry.names())
    assert {"fx_echo", "ops_echo", "fx_add", "ops_add"} <= names  # same tool names on two servers
    assert registry.get("fx_add").requires_approval and not registry.get("fx_echo").requires_approval
    assert registry.get("ops_echo").permissions == ("net:ops",)
    assert registry.get("fx_echo").source == "mcp:fx"


def test_the_offline_model_calls_an_mcp_tool_via_invoke_and_ainvoke(mcp_config: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    result = graph.invoke({"messages": [HumanMessage('调用工具 fx_echo {"text": "你好 MCP"}')]}, config)
    [echo] = _tool_results(result["messages"])
    assert echo.name == "fx_echo" and echo.status == "success" and echo.content == "你好 MCP"
    assert "你好 MCP" in result["messages"][-1].content

    async def go() -> dict[str, Any]:
        return await graph.ainvoke(
            {"messages": [HumanMessage('call tool fx_echo with {"text": "async"}')]},
            {"configurable": {"thread_id": "t2"}},
        )

    assert _tool_results(asyncio.run(go())["messages"])[0].content == "async"


def test_mcp_calls_stream_the_same_events_as_local_tools(mcp_config: Path) -> None:
    graph = build_graph(InMemorySaver())
    events = [
        chunk
        for chunk in graph.stream(
            {"messages": [HumanMessage('调用工具 fx_echo {"text": "e"}')]},
            {"configurable": {"thread_id": "s"}},
            stream_mode="custom",
        )
    ]
    calls = [e for e in events if e.get("type") == "tool_call"]
    assert [e["status"] for e in calls] == ["executing", "done"]
    assert all(e["source"] == "mcp:fx" and e["tool"] == "fx_echo" for e in calls)


def test_an_mcp_tool_marked_for_approval_pauses_the_graph(mcp_config: Path) -> None:
    graph = build_graph(InMemorySaver())
    config = {"configurable": {"thread_id": "a"}}
    paused = graph.invoke({"messages": [HumanMessage('调用工具 fx_add {"a": 2, "b": 40}')]}, config)
    [pending] = paused["__interrupt__"]
    assert pending.value["tool"] == "fx_add" and pending.value["source"] == "mcp:fx"
    assert pending.value["args"] == {"a": 2, "b": 40}
    done = graph.invoke(Command(resume={"approved": True}), config)
    assert _tool_results(done["messages"])[0].content == "42"


def test_a_server_scope_is_a_permission(mcp_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = build_graph(InMemorySaver())
    denied = graph.invoke(
        {"messages": [HumanMessage('调用工具 ops_echo {"text": "x"}')]}, {"configurable": {"thread_id": "p"}}
    )
    assert _tool_results(denied["messages"]) == []  # not offered to the model at all
    assert "ops_echo" in denied["messages"][-1].content
    monkeypatch.setenv("KB_AGENT_ROLE_PERMISSIONS", json.dumps({"operator": ["net:*"]}))
    granted = graph.invoke(
        {"messages": [HumanMessage('调用工具 ops_echo {"text": "x"}')]},
        {"configurable": {"thread_id": "q"}},
        context=Settings(roles="user,operator"),
    )
    assert _tool_results(granted["messages"])[0].content == "x"


def test_cli_tools_list_and_call(mcp_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["tools", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {r["name"]: r for r in json.loads(listed.output)}
    assert rows["fx_echo"]["source"] == "mcp:fx" and rows["fx_echo"]["allowed"] is True
    assert rows["ops_echo"]["allowed"] is False and rows["fx_add"]["approval"] is True

    ok = runner.invoke(app, ["tools", "call", "fx_echo", "--args", '{"text": "cli"}'])
    assert ok.exit_code == 0 and ok.output.strip() == "cli"
    bad = runner.invoke(app, ["tools", "call", "fx_add", "--args", '{"a": "two", "b": 1}'])
    assert bad.exit_code == 2 and "is not of type 'integer'" in bad.output
    denied = runner.invoke(app, ["tools", "call", "ops_echo", "--args", '{"text": "x"}'])
    assert denied.exit_code == 4 and "net:ops" in denied.output
    approved = runner.invoke(app, ["tools", "call", "fx_add", "--args", '{"a": 1, "b": 2}'], input="y\n")
    assert approved.exit_code == 0 and approved.output.strip().endswith("3")
    failing = runner.invoke(app, ["tools", "call", "fx_fail"])
    assert failing.exit_code == 1


def test_a_broken_mcp_config_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    monkeypatch.setenv("KB_AGENT_MCP_CONFIG", str(path))
    result = CliRunner().invoke(app, ["tools", "list"])
    assert result.exit_code == 1 and "not valid JSON" in result.output and "Traceback" not in result.output
    # Building the application's tools refuses it too, naming the setting: nothing starts on half a config.
    with pytest.raises(MCPConfigError, match="KB_AGENT_MCP_CONFIG"):
        app_registry(Settings())
