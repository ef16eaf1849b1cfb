"""The MCP bridge against real server processes (``tests/fixtures/mcp_server.py``), stdio and streamable HTTP.

No MCP mocks: every test starts FastMCP servers and talks to them through the tool platform (the executor,
the graph). Server processes are counted through the PID file the fixture appends to on start.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from graph.builder import build_graph
from models.scripted import ScriptedChatModel, tool_call
from tests.fixtures.tool_rounds import Call, Calls
from tools.builtin import builtin_registry
from tools.mcp import MCPManager, register_mcp_tools
from tools.mcp_config import load_mcp_config, parse_mcp_config
from tools.permissions import EVERYTHING
from tools.registry import ToolContext, ToolRegistry

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_server.py"
PID_ENV = "MCP_FIXTURE_PID_FILE"
CTX = ToolContext(user_id="tester", grant=EVERYTHING)  # the embedding application acts with every right
STARTUP = 60.0  # generous: the test machine is shared and a FastMCP process takes ~2 s to import

pytestmark = pytest.mark.timeout(120)


def stdio_server(pid_file: Path | None = None, *flags: str, **options: Any) -> dict[str, Any]:
    """A config entry that starts the fixture over stdio with this interpreter."""
    env = {PID_ENV: str(pid_file)} if pid_file else {}
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": [str(SERVER), *flags],
        "env": env,
        **options,
    }


def pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HTTPServer:
    """The fixture as a streamable-HTTP server on a free loopback port, stoppable and restartable."""

    def __init__(self, pid_file: Path) -> None:
        self.port = free_port()
        self.pid_file = pid_file
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        env = {**os.environ, PID_ENV: str(self.pid_file)}
        cmd = [sys.executable, str(SERVER), "--transport", "streamable-http", "--port", str(self.port)]
        self.process = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the HTTP fixture server exited with {self.process.returncode}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"the HTTP fixture server did not listen on {self.port} within {STARTUP} s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HTTPServer]:
    server = HTTPServer(tmp_path_factory.mktemp("http") / "pids")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, http_server: HTTPServer) -> Iterator[MCPManager]:
    """One stdio and one HTTP server for the tests that only read (no kills, no restarts)."""
    pid_file = tmp_path_factory.mktemp("stdio") / "pids"
    config = parse_mcp_config(
        {
            "servers": {
                "local": stdio_server(pid_file, approval=["fail"], timeout=30),
                "remote": {"transport": "streamable_http", "url": http_server.url, "permissions": ["net:x"]},
            }
        }
    )
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        yield manager


@pytest.fixture(scope="module")
def shared_registry(shared: MCPManager) -> ToolRegistry:
    registry = builtin_registry()
    register_mcp_tools(registry, shared)
    return registry


def run_one(registry: ToolRegistry, name: str, args: dict[str, Any], **executor: Any) -> Any:
    """One call through the executor's sync entry point (a fresh ``asyncio.run`` each time)."""
    [outcome] = Calls(registry, **executor).run([Call("c1", name, args)], CTX)
    return outcome


# -- listing -----------------------------------------------------------------------------------------


def test_both_transports_list_their_tools_as_specs(shared: MCPManager, shared_registry: ToolRegistry) -> None:
    assert shared.errors == {}
    # Same tools on both servers: every clashing name is prefixed by its server, none is dropped.
    for tool in ("echo", "add", "fail", "slow", "whoami", "seen"):
        assert f"local_{tool}" in shared_registry and f"remote_{tool}" in shared_registry
        assert tool not in shared_registry
    echo = shared_registry.get("local_echo")
    assert echo.source == "mcp:local" and echo.permissions == ("mcp:local",)
    assert echo.timeout == 30.0 and not echo.requires_approval
    assert echo.parameters["type"] == "object" and echo.parameters["required"] == ["text"]
    assert echo.description == "Return the text unchanged."
    assert shared_registry.get("local_fail").requires_approval
    remote = shared_registry.get("remote_add")
    assert remote.source == "mcp:remote" and remote.permissions == ("net:x",) and remote.timeout is None


def test_a_name_taken_by_a_local_tool_is_prefixed(http_server: HTTPServer) -> None:
    config = parse_mcp_config(
        {"servers": {"web": {"transport": "http", "url": http_server.url, "prefix": "w"}}}
    )
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        names = [s.name for s in manager.tool_specs(existing_names=["echo", "calculator"])]
    assert "w_echo" in names and "echo" not in names
    assert "add" in names  # no clash, no prefix


# -- calling -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["local", "remote"])
def test_executor_runs_mcp_tools_from_sync_and_async_code(shared_registry: ToolRegistry, server: str) -> None:
    executor = Calls(shared_registry)
    calls = [
        Call("a", f"{server}_add", {"a": 2, "b": 40}),
        Call("b", f"{server}_echo", {"text": "héllo"}),
        Call("c", "calculator", {"expression": "6*7"}),
    ]
    sync = executor.run(calls, CTX)
    assert [(o.status, o.content) for o in sync] == [
        ("success", "42"),
        ("success", "héllo"),
        ("success", "42"),
    ]

    async def from_a_loop() -> list[Any]:
        return await executor.arun(calls, CTX)

    assert [o.content for o in asyncio.run(from_a_loop())] == ["42", "héllo", "42"]


def test_graph_invoke_and_ainvoke_call_an_mcp_tool(shared_registry: ToolRegistry) -> None:
    def model() -> ScriptedChatModel:
        call = tool_call("local_echo", {"text": "from the graph"})
        return ScriptedChatModel([AIMessage("", tool_calls=[call]), "done"])

    def tool_messages(result: dict[str, Any]) -> list[ToolMessage]:
        return [m for m in result["messages"] if isinstance(m, ToolMessage)]

    graph = build_graph(registry=shared_registry, model=model(), knowledge=None)
    result = graph.invoke({"messages": [("user", "echo something")]})
    [message] = tool_messages(result)
    assert (message.content, message.status, message.name) == ("from the graph", "success", "local_echo")
    assert result["messages"][-1].content == "done"

    graph = build_graph(registry=shared_registry, model=model(), knowledge=None)
    result = asyncio.run(graph.ainvoke({"messages": [("user", "echo something")]}))
    [message] = tool_messages(result)
    assert (message.content, message.status) == ("from the graph", "success")


def test_a_tool_error_reaches_the_model_as_an_error_message(shared_registry: ToolRegistry) -> None:
    outcome = run_one(shared_registry, "remote_fail", {})
    assert outcome.status == "error"
    assert "failed on purpose" in outcome.content and "'fail'" in outcome.content


def test_arguments_that_break_the_schema_never_reach_the_server(shared_registry: ToolRegistry) -> None:
    before = run_one(shared_registry, "remote_seen", {}).content
    bad = run_one(shared_registry, "remote_add", {"a": "two", "b": 1})
    assert (
        bad.status == "error" and "invalid arguments" in bad.content and "a: 'two' is not of type 'integer'" in bad.content
    )
    extra = run_one(shared_registry, "remote_add", {"a": 1, "b": 2, "c": 3})
    assert extra.status == "error" and "unexpected argument" in extra.content
    assert run_one(shared_registry, "remote_seen", {}).content == before  # the server saw neither call


def test_non_text_content_is_described_and_structured_results_kept(shared_registry: ToolRegistry) -> None:
    odd = run_one(shared_registry, "local_odd", {})
    assert odd.status == "success"
    assert odd.content.splitlines() == ["a picture:", "[image: image/png, 66 bytes, not shown]", "the note"]
    structured = run_one(shared_registry, "local_structured", {})
    assert json.loads(structured.content) == {"answer": 42, "unit": "none"}


def test_a_call_past_its_timeout_fails_and_the_session_keeps_working(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = parse_mcp_config({"servers": {"fx": stdio_server(pid_file, timeout=0.5)}})
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        registry = ToolRegistry(manager.tool_specs())
        started = time.monotonic()
        hung = run_one(registry, "slow", {"seconds": 30})
        assert hung.status == "error" and "timed out after 0.5 s" in hung.content
        assert time.monotonic() - started < 5
        for text in ("after", "the timeout"):
            assert run_one(registry, "echo", {"text": text}).content == text
        assert len(pids(pid_file)) == 1


# -- one process, restarts ---------------------------------------------------------------------------


def test_one_server_process_serves_twenty_calls(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = parse_mcp_config({"servers": {"fx": stdio_server(pid_file)}})
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        registry = ToolRegistry(manager.tool_specs())
        answers = {run_one(registry, "whoami", {}).content for _ in range(20)}
        assert len(pids(pid_file)) == 1
        assert answers == {str(pids(pid_file)[0])}
    assert not alive(pids(pid_file)[0])  # close() ended the server process


def test_a_killed_server_fails_that_call_and_is_restarted_on_the_next(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = parse_mcp_config({"servers": {"fx": stdio_server(pid_file)}})
    killed: list[int] = []

    def kill_then_ask(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        pid = int([m for m in messages if isinstance(m, ToolMessage)][-1].content)  # whoami's answer
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        return AIMessage("", tool_calls=[tool_call("echo", {"text": "still there?"})])

    # Different calls in a row: the turn budget stops a third identical call before it runs.
    script: list[Any] = [
        AIMessage("", tool_calls=[tool_call("whoami")]),
        kill_then_ask,
        AIMessage("", tool_calls=[tool_call("whoami")]),
        "the server came back",
    ]
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        registry = builtin_registry()
        register_mcp_tools(registry, manager)
        graph = build_graph(registry=registry, model=ScriptedChatModel(script), knowledge=None)
        result = graph.invoke({"messages": [HumanMessage("who are you?")]})
    first, lost, second = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert first.status == "success" and int(first.content) == killed[0]
    assert lost.status == "error"
    assert "MCP server 'fx' is not available" in lost.content and "restarted on the next call" in lost.content
    assert second.status == "success" and int(second.content) != killed[0]
    assert pids(pid_file) == [killed[0], int(second.content)]
    assert result["messages"][-1].content == "the server came back"


def test_a_stopped_http_server_fails_the_call_and_is_reconnected_after(tmp_path: Path) -> None:
    server = HTTPServer(tmp_path / "pids")
    server.start()
    try:
        config = parse_mcp_config({"servers": {"web": {"transport": "streamable_http", "url": server.url}}})
        with MCPManager(config, connect_timeout=10) as manager:
            registry = ToolRegistry(manager.tool_specs())
            assert run_one(registry, "echo", {"text": "up"}).content == "up"
            server.stop()
            down = run_one(registry, "echo", {"text": "down"}, timeout=20)
            assert down.status == "error" and "MCP server 'web' is not available" in down.content
            server.start()
            assert run_one(registry, "echo", {"text": "back"}, timeout=30).content == "back"
    finally:
        server.stop()


# -- bad servers and bad config ------------------------------------------------------------------------


def test_a_server_that_crashes_on_start_is_reported_and_the_others_load(tmp_path: Path) -> None:
    config = parse_mcp_config(
        {"servers": {"broken": stdio_server(None, "--crash-on-start"), "good": stdio_server(tmp_path / "p")}}
    )
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        specs = manager.tool_specs()
        assert {s.source for s in specs} == {"mcp:good"} and "echo" in [s.name for s in specs]
        assert set(manager.errors) == {"broken"}
        assert "MCP server 'broken'" in manager.errors["broken"]
        assert "the process exited" in manager.errors["broken"]
        # A call can still name the broken server: it fails with the same reason, it does not hang.
        with pytest.raises(Exception, match="not available: it closed the connection"):
            manager.call("broken", "echo", {"text": "x"}, timeout=STARTUP)


def test_a_server_that_never_lists_its_tools_is_bounded_by_connect_timeout(tmp_path: Path) -> None:
    config = parse_mcp_config(
        {"servers": {"stuck": stdio_server(None, "--hang-on-list"), "good": stdio_server(tmp_path / "p")}}
    )
    # Long enough for a loaded machine to start both processes, short enough to keep the test quick.
    with MCPManager(config, connect_timeout=8) as manager:
        started = time.monotonic()
        specs = manager.tool_specs()
        elapsed = time.monotonic() - started
    assert elapsed < 8 + 3
    assert {s.source for s in specs} == {"mcp:good"}
    assert manager.errors == {"stuck": "MCP server 'stuck' did not answer tools/list within 8 s"}


def test_a_tool_with_a_non_object_schema_is_skipped_not_the_server(tmp_path: Path) -> None:
    config = parse_mcp_config({"servers": {"odd": stdio_server(None, "--bad-listing")}})
    with MCPManager(config, connect_timeout=STARTUP) as manager:
        specs = manager.tool_specs()
    assert [s.name for s in specs] == ["echo"] and manager.errors == {}
    assert "not a JSON Schema of type 'object'" in manager.skipped["odd/broken"]


def test_config_file_to_tools_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"fx": stdio_server(None, approval=True)}}))
    with MCPManager.from_config(path, connect_timeout=STARTUP) as manager:
        specs = manager.tool_specs()
    assert specs and all(s.requires_approval for s in specs)


def test_closed_manager_refuses_calls_plainly(tmp_path: Path) -> None:
    config = parse_mcp_config({"servers": {"fx": stdio_server(None)}})
    manager = MCPManager(config, connect_timeout=STARTUP)
    registry = ToolRegistry(manager.tool_specs())
    manager.close()
    manager.close()  # twice is fine
    outcome = run_one(registry, "echo", {"text": "x"})
    assert outcome.status == "error" and "closed" in outcome.content


def test_closing_the_manager_during_a_call_gives_that_call_an_error(tmp_path: Path) -> None:
    config = parse_mcp_config({"servers": {"fx": stdio_server(None)}})
    manager = MCPManager(config, connect_timeout=STARTUP)
    registry = ToolRegistry(manager.tool_specs())
    box: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: box.update(outcome=run_one(registry, "slow", {"seconds": 30})))
    worker.start()
    time.sleep(0.5)
    manager.close()
    worker.join(timeout=20)
    outcome = box["outcome"]  # an outcome, not a cancelled turn
    assert outcome.status == "error" and "closed during the call" in outcome.content


def test_bad_config_files_fail_before_any_server_starts(tmp_path: Path) -> None:
    from tools.mcp_config import MCPConfigError

    cases: dict[str, Callable[[Path], None]] = {
        "not valid JSON": lambda p: p.write_text('{"servers": {'),
        'needs "command"': lambda p: p.write_text('{"servers": {"x": {"transport": "stdio"}}}'),
    }
    for expected, write in cases.items():
        path = tmp_path / "bad.json"
        write(path)
        with pytest.raises(MCPConfigError, match=expected):
            load_mcp_config(path)
