"""End to end through ``langgraph dev``: the graph served by the LangGraph API server, driven by the SDK.

One server (``langgraph.json`` at the repo root, in-memory runtime, the server's own checkpointer) is
started for the module in a working directory of its own (``dev_config``: nothing an earlier server left in
``.langgraph_api`` is loaded) on a free loopback port; the tests talk to it over HTTP with ``langgraph_sdk``.
No model is configured, so the agent runs its offline deterministic model and nothing leaves loopback.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.fixtures.serve import dev_config, stop_group

pytestmark = pytest.mark.server

REPO_ROOT = Path(__file__).resolve().parents[2]
GRAPH_ID = "kb_agent"
STARTUP_TIMEOUT = 90.0
CALC_QUESTION = "计算 123 × 456"
CALC_ANSWER = "56088"


@dataclass
class Server:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]
    startup_seconds: float

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"<no log: {exc}>"
        return "\n".join(text.splitlines()[-lines:])


RELATIVE_HOME = Path(".kb-agent")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_env(home: Path) -> dict[str, str]:
    """The developer's environment minus anything that could pick a real model, trace, or phone home."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("KB_AGENT_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_"))
    }
    env.update(
        KB_AGENT_HOME=str(home),
        KB_AGENT_EMBEDDER="hashing",  # the knowledge base below is indexed with it (no model to load)
        KB_AGENT_USER_ROLES='{"root": ["admin"]}',  # the operator makes root an admin; a run cannot
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGGRAPH_NO_VERSION_CHECK="1",
        LANGSMITH_TRACING="false",
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
        PYTHONPATH=str(REPO_ROOT),  # the CLI runs from the server's working directory
    )
    return env


def _wait_until_up(server: Server, deadline: float) -> str | None:
    """None once ``GET /ok`` answers, else why it never did."""
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return f"server exited with code {server.proc.returncode} before answering /ok"
        try:
            if httpx.get(f"{server.url}/ok", timeout=2.0).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    return f"server did not answer GET /ok within {STARTUP_TIMEOUT:.0f}s"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    exe = Path(sys.executable).parent / "langgraph"
    tmp = tmp_path_factory.mktemp("langgraph-dev")
    log = tmp / "server.log"
    if not exe.exists():
        pytest.skip(f"langgraph CLI not found at {exe}; install langgraph-cli[inmem] into this venv")

    # A document for the approval test, ingested before the server opens the store (one writer at a time).
    docs = tmp / "docs"
    docs.mkdir()
    (docs / "old-policy.md").write_text("# Old policy\n\nThe 2019 travel policy, superseded.\n", "utf-8")
    # KB_AGENT_HOME as the README's setup has it: relative to the server's working directory (resolving it
    # asks for that directory, which the runtime's blocking-call guard refuses on the event loop)
    workdir = tmp / "langgraph-dev"
    workdir.mkdir()
    ingest = subprocess.run(
        [sys.executable, "-m", "cli", "ingest", str(docs)],
        cwd=workdir,
        env=_server_env(RELATIVE_HOME),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ingest.returncode == 0, ingest.stderr

    port = _free_port()
    cmd = [
        str(exe),
        "dev",
        "--config",
        str(dev_config(workdir)),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-browser",
        "--no-reload",
    ]
    started = time.monotonic()
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=_server_env(RELATIVE_HOME),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so it can be stopped as a whole
        )
    srv = Server(url=f"http://127.0.0.1:{port}", log=log, proc=proc, startup_seconds=0.0)
    try:
        problem = _wait_until_up(srv, started + STARTUP_TIMEOUT)
        if problem is not None:
            stop_group(proc)
            pytest.fail(f"{problem}\ncommand: {' '.join(cmd)}\n--- server log tail ---\n{srv.log_tail()}")
        srv.startup_seconds = time.monotonic() - started
        print(f"\nlanggraph dev answered /ok after {srv.startup_seconds:.1f}s at {srv.url}")
        yield srv
    finally:
        stop_group(proc)


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=server.url, timeout=60.0)
    try:
        yield sdk
    finally:
        sdk.close()


def _why(server: Server, message: str) -> str:
    return f"{message}\n--- server log tail ---\n{server.log_tail()}"


def _types(messages: list[dict[str, Any]]) -> list[str]:
    return [m["type"] for m in messages]


def _ask(client: SyncLangGraphClient, server: Server, thread_id: str, question: str) -> dict[str, Any]:
    result = client.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": question}]},
        context={"user_id": "alice"},
        raise_error=False,
    )
    assert isinstance(result, dict), _why(server, f"unexpected run result: {result!r}")
    assert "__error__" not in result, _why(server, f"run failed: {result['__error__']}")
    return result


def _assert_offline(server: Server, messages: list[dict[str, Any]]) -> None:
    """Guard: a real model would need the network; if one got configured, say where it came from."""
    for m in messages:
        if m["type"] == "ai":
            assert m.get("response_metadata", {}).get("offline") is True, _why(
                server,
                "the server did not use the offline model; is a model/endpoint/key set via "
                f"langgraph.json's env file (.env.example)? message: {m!r}",
            )


def test_assistant_registered(client: SyncLangGraphClient, server: Server) -> None:
    assistants = client.assistants.search(graph_id=GRAPH_ID)
    assert len(assistants) == 1, _why(server, f"expected one assistant for {GRAPH_ID}: {assistants!r}")
    assert assistants[0]["graph_id"] == GRAPH_ID


def test_thread_runs_and_state(client: SyncLangGraphClient, server: Server) -> None:
    thread_id = client.threads.create()["thread_id"]

    # 1st turn: the calculator round trip, answered in the final message.
    result = _ask(client, server, thread_id, CALC_QUESTION)
    final = result["messages"][-1]
    assert final["type"] == "ai", _why(server, f"last message is not the answer: {final!r}")
    assert CALC_ANSWER in final["content"], _why(server, f"answer lacks {CALC_ANSWER}: {final!r}")

    # The server's checkpointer kept the thread: human, ai(tool call), tool, ai — in that order.
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    assert _types(messages) == ["human", "ai", "tool", "ai"], _why(server, f"messages: {messages!r}")
    human, call, tool, answer = messages
    assert human["content"] == CALC_QUESTION
    assert [tc["name"] for tc in call["tool_calls"]] == ["calculator"], _why(server, repr(call))
    assert tool["tool_call_id"] == call["tool_calls"][0]["id"], _why(server, f"{call!r}\n{tool!r}")
    assert tool["name"] == "calculator"
    assert CALC_ANSWER in tool["content"]
    assert CALC_ANSWER in answer["content"]
    assert not answer.get("tool_calls")
    _assert_offline(server, messages)

    # 2nd turn on the same thread: appended after the first turn, not replacing it.
    _ask(client, server, thread_id, "今天几号")
    state = client.threads.get_state(thread_id)
    messages2 = state["values"]["messages"]
    assert [m["id"] for m in messages2[:4]] == [m["id"] for m in messages], _why(
        server, f"first turn lost from the thread: {_types(messages2)}"
    )
    assert len(messages2) > 4, _why(server, f"second turn missing: {_types(messages2)}")
    assert messages2[4]["type"] == "human" and messages2[4]["content"] == "今天几号"
    assert messages2[-1]["type"] == "ai" and messages2[-1]["content"], _why(server, repr(messages2[-1]))
    # Every tool message answers the ai message right before it.
    for i, m in enumerate(messages2):
        if m["type"] == "tool":
            prev = messages2[i - 1]
            assert prev["type"] in {"ai", "tool"}, _why(server, f"tool message #{i} after {prev['type']}")
            j = i - 1
            while messages2[j]["type"] == "tool":
                j -= 1
            assert m["tool_call_id"] in {tc["id"] for tc in messages2[j]["tool_calls"]}
    _assert_offline(server, messages2)

    # The run record shows the context as sent.
    runs = client.runs.list(thread_id)
    assert len(runs) == 2
    assert all(r["status"] == "success" for r in runs), _why(server, repr(runs))
    assert all(r["kwargs"].get("context") == {"user_id": "alice"} for r in runs), _why(
        server, repr([r["kwargs"] for r in runs])
    )


def test_context_reaches_the_graph(client: SyncLangGraphClient, server: Server) -> None:
    """``context`` is applied inside the run, not just stored: one model call allowed, the turn stops."""
    thread_id = client.threads.create()["thread_id"]
    result = client.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": CALC_QUESTION}]},
        context={"user_id": "alice", "max_rounds": 1},
        raise_error=False,
    )
    assert isinstance(result, dict) and "__error__" not in result, _why(server, repr(result))
    assert result.get("stop_reason") == "rounds", _why(server, f"max_rounds=1 ignored: {result!r}")


def test_stream_custom_tool_events(client: SyncLangGraphClient, server: Server) -> None:
    thread_id = client.threads.create()["thread_id"]
    events: list[tuple[str, Any]] = []
    for part in client.runs.stream(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": CALC_QUESTION}]},
        context={"user_id": "alice"},
        stream_mode=["updates", "custom"],
    ):
        events.append((part.event, part.data))

    kinds = [event for event, _ in events]
    assert "error" not in kinds, _why(server, f"stream error: {events!r}")
    custom = [data for event, data in events if event.split("|")[0] == "custom"]
    calc = [e for e in custom if isinstance(e, dict) and e.get("type") == "tool_call"]
    statuses = [e.get("status") for e in calc if e.get("tool") == "calculator"]
    assert "executing" in statuses, _why(server, f"no executing event; custom events: {custom!r}")
    assert "done" in statuses, _why(server, f"no done event; custom events: {custom!r}")
    assert statuses.index("executing") < statuses.index("done")

    updates = [data for event, data in events if event.split("|")[0] == "updates"]
    nodes = [node for update in updates if isinstance(update, dict) for node in update]
    assert "tools" in nodes and "agent" in nodes, _why(server, f"update nodes: {nodes!r}")


def test_approval_pauses_the_run_and_resumes_through_the_api(
    client: SyncLangGraphClient, server: Server
) -> None:
    """delete_document waits for a person via the standard interrupt; rejecting, then approving, resumes."""
    thread_id = client.threads.create()["thread_id"]
    admin = {
        "user_id": "root"
    }  # no tokens (development): the run names its user; the operator's table decides roles
    client.runs.wait(
        thread_id,
        GRAPH_ID,
        input={"messages": [{"role": "user", "content": "删除文档 old-policy.md"}]},
        context=admin,
        raise_error=False,
    )
    state = client.threads.get_state(thread_id)
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert len(interrupts) == 1, _why(server, f"no pending approval: {state!r}")
    payload = interrupts[0]["value"]
    assert payload["kind"] == "tool_approval" and payload["tool"] == "delete_document"
    assert payload["args"] == {"doc_id": "old-policy.md"} and "old-policy.md" in payload["description"]
    assert client.threads.get(thread_id)["status"] == "interrupted"

    # Not an approval: the run pauses again and says what was wrong.
    client.runs.wait(thread_id, GRAPH_ID, command={"resume": "sure"}, context=admin, raise_error=False)
    state = client.threads.get_state(thread_id)
    again = [i["value"] for task in state["tasks"] for i in task.get("interrupts", [])]
    assert again and "not an approval" in again[0]["error"], _why(server, repr(state))

    client.runs.wait(
        thread_id, GRAPH_ID, command={"resume": {"approved": True}}, context=admin, raise_error=False
    )
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    tool = next(m for m in messages if m["type"] == "tool" and m["name"] == "delete_document")
    assert '"deleted": "old-policy.md"' in tool["content"], _why(server, repr(tool))
    assert client.threads.get(thread_id)["status"] == "idle"

    # The document is gone for the server's retrievers too.
    stats = _ask(client, server, thread_id, "知识库里有多少文档？")
    assert "0 篇文档" in stats["messages"][-1]["content"], _why(server, repr(stats["messages"][-1]))


def test_threads_are_owned_on_the_server(server: Server) -> None:
    """graph/auth.py: a thread is stamped with its creator; another user cannot read, run or find it."""
    alice = get_sync_client(url=server.url, timeout=60.0, headers={"x-kb-user": "alice"})
    bob = get_sync_client(url=server.url, timeout=60.0, headers={"x-kb-user": "bob"})
    try:
        thread_id = alice.threads.create()["thread_id"]
        with pytest.raises(
            httpx.HTTPStatusError
        ) as spoofed:  # the header named alice: a run cannot change it
            alice.runs.wait(
                thread_id,
                GRAPH_ID,
                input={"messages": [{"role": "user", "content": CALC_QUESTION}]},
                context={"user_id": "mallory"},
            )
        assert spoofed.value.response.status_code == 403 and "user_id" in spoofed.value.response.text
        alice.runs.wait(
            thread_id,
            GRAPH_ID,
            input={"messages": [{"role": "user", "content": CALC_QUESTION}]},
            raise_error=False,
        )
        state = alice.threads.get_state(thread_id)
        assert CALC_ANSWER in state["values"]["messages"][-1]["content"], _why(server, repr(state))
        assert alice.threads.get(thread_id)["metadata"]["owner"] == "alice"
        assert thread_id in {t["thread_id"] for t in alice.threads.search(limit=100)}
        assert thread_id not in {t["thread_id"] for t in bob.threads.search(limit=100)}
        for attempt in (
            lambda: bob.threads.get(thread_id),
            lambda: bob.threads.get_state(thread_id),
            lambda: bob.runs.wait(
                thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": "hi"}]}
            ),
        ):
            with pytest.raises(httpx.HTTPStatusError) as refused:
                attempt()
            assert refused.value.response.status_code in (403, 404), _why(server, repr(refused.value))
        assert len(alice.threads.get_state(thread_id)["values"]["messages"]) == 4  # bob changed nothing
    finally:
        alice.close()
        bob.close()


def test_the_runtimes_own_routes_are_404_for_everyone(server: Server) -> None:
    """langgraph dev also serves /internal/debug/thread/{id} (any thread, raw), /internal/truncate (wipes
    every thread) and /deploy: the edge forwards only the API's routes."""
    alice = get_sync_client(url=server.url, timeout=60.0, headers={"x-kb-user": "alice"})
    try:
        thread_id = alice.threads.create()["thread_id"]
        for headers in ({}, {"x-kb-user": "alice"}):
            for method, path in (
                ("GET", f"/internal/debug/thread/{thread_id}"),
                ("POST", "/internal/truncate"),
                ("GET", "/deploy"),
                ("POST", "/deploy"),
            ):
                response = httpx.request(method, f"{server.url}{path}", headers=headers, json={}, timeout=30)
                assert response.status_code == 404, (method, path, response.status_code, response.text[:200])
        assert alice.threads.get(thread_id)["thread_id"] == thread_id  # nothing was truncated
        for hook in ("http://169.254.169.254/latest/meta-data", "https://93.184.216.34/hook", "https://example.org/hook"):
            with pytest.raises(httpx.HTTPStatusError) as refused:  # no webhook hosts listed: none are called
                alice.runs.create(thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": "hi"}]}, webhook=hook)
            response = refused.value.response  # the runtime refuses private ranges itself (422), we the rest
            assert response.status_code in (403, 422) and "webhook" in response.text.lower(), response.text
        assert alice.runs.list(thread_id) == []
    finally:
        alice.close()


def test_no_request_above_made_a_blocking_call_on_the_event_loop(server: Server) -> None:
    caught = [line for line in server.log.read_text("utf-8", "replace").splitlines() if "BlockingError" in line]
    assert caught == [], "\n".join(caught)
