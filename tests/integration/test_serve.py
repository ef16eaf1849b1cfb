"""``kb-agent serve`` end to end: Aegra on a private Postgres and Redis, our auth, driven by ``langgraph-sdk``.

One server for the module (offline model, hashing embedder, tokens for alice, bob and root); the refusals
start their own short-lived processes. Skipped with the reason when the Python 3.12 server venv, Postgres or
redis-server is missing.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.fixtures.browser import Page
from tests.fixtures.serve import (
    REPO_ROOT,
    ServeProcess,
    ingest_old_policy,
    private_database,
    private_redis,
    serve_env,
    server_kb_agent,
)

pytestmark = pytest.mark.server

GRAPH_ID = "kb_agent"
CALC_QUESTION = "计算 123 × 456"
CALC_ANSWER = "56088"
PAGE_DOC = "parking.md"  # the chat page's approval is rejected: it stays (old-policy.md is deleted by a test)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A database and a Redis of the module's own, and the operator's environment for them."""
    exe = server_kb_agent()
    tmp = tmp_path_factory.mktemp("serve")
    with private_redis(tmp) as redis_url, private_database() as database_url:
        env = serve_env(tmp / "home", database_url, redis_url)
        (tmp / "docs").mkdir()
        (tmp / "docs" / PAGE_DOC).write_text("# Parking\n\nThe 2020 parking rules.\n", "utf-8")
        ingest_old_policy(tmp, env)  # the docs folder: the old policy and the chat page's document
        yield {"exe": exe, "tmp": tmp, "env": env, "database_url": database_url, "redis_url": redis_url}


@pytest.fixture(scope="module")
def server(stack: dict[str, Any]) -> Iterator[ServeProcess]:
    srv = ServeProcess(stack["exe"], stack["env"], stack["tmp"] / "server.log").start()
    print(f"\nkb-agent serve healthy after {srv.startup_seconds:.1f}s at {srv.url}")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def users(server: ServeProcess) -> Iterator[dict[str, SyncLangGraphClient]]:
    clients = {
        name: get_sync_client(url=server.url, timeout=60.0, headers={"Authorization": f"Bearer tok-{name}"})
        for name in ("alice", "bob", "root")
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()


def _ask(client: SyncLangGraphClient, thread_id: str, question: str, **kwargs: Any) -> dict[str, Any]:
    result = client.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": question}]}, **kwargs
    )
    assert isinstance(result, dict) and "__error__" not in result, repr(result)
    return result


def _interrupts(state: dict[str, Any]) -> list[Any]:
    return [i["value"] for task in state["tasks"] for i in task.get("interrupts", [])]


def test_requests_without_a_valid_token_are_401(server: ServeProcess) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "tok-alice"}):
        response = httpx.post(f"{server.url}/threads", json={}, headers=headers, timeout=30)
        assert response.status_code == 401, (headers, response.text)
    assert httpx.get(f"{server.url}/health", timeout=30).json()["status"] == "healthy"


def test_thread_run_and_state_read_back(users: dict[str, SyncLangGraphClient]) -> None:
    alice = users["alice"]
    thread = alice.threads.create()
    assert thread["metadata"]["owner"] == "alice"
    result = _ask(alice, thread["thread_id"], CALC_QUESTION)
    assert CALC_ANSWER in result["messages"][-1]["content"]
    _ask(alice, thread["thread_id"], "今天几号")
    state = alice.threads.get_state(thread["thread_id"])
    messages = state["values"]["messages"]
    assert [m["type"] for m in messages[:4]] == ["human", "ai", "tool", "ai"], messages
    assert messages[4]["content"] == "今天几号" and messages[-1]["type"] == "ai"
    assert all(m.get("response_metadata", {}).get("offline") for m in messages if m["type"] == "ai")
    assert [r["status"] for r in alice.runs.list(thread["thread_id"])] == ["success", "success"]


def test_runs_started_together_on_one_thread_run_one_after_another(
    users: dict[str, SyncLangGraphClient],
) -> None:
    """Aegra keeps a run's multitask_strategy but does not enforce it: runs of one thread created together
    (a double submit, a retry after a create whose answer was lost to a kill) executed at once, each from
    the same checkpoint, and the thread kept one branch: turns whose success the client saw were lost
    (found by the kill -9 test). Every run now holds its thread's lock from before it reads the state
    until its end is written, so all of them land, one after another."""
    alice = users["alice"]
    thread_id = alice.threads.create()["thread_id"]
    sums = [(1000 + 17 * i, 7) for i in range(6)]
    runs = [
        alice.runs.create(
            thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": f"计算 {a} × {b}"}]}
        )
        for a, b in sums
    ]
    for run in runs:
        alice.runs.join(thread_id, run["run_id"])
    assert {alice.runs.get(thread_id, r["run_id"])["status"] for r in runs} == {"success"}
    messages = alice.threads.get_state(thread_id)["values"]["messages"]
    for a, b in sums:
        at = [i for i, m in enumerate(messages) if m["type"] == "human" and m["content"] == f"计算 {a} × {b}"]
        assert len(at) == 1, (a, [m["content"] for m in messages])
        following = messages[at[0] + 1 : at[0] + 4]  # its tool call, the result, the answer: not interleaved
        assert [m["type"] for m in following] == ["ai", "tool", "ai"] and str(a * b) in following[-1][
            "content"
        ]


def test_a_client_that_lost_the_answer_to_create_finds_its_run_by_its_message_id(
    users: dict[str, SyncLangGraphClient],
) -> None:
    """What docs/server.md tells clients: a run whose ``runs.create`` answer was lost (a kill, a dropped
    connection) may exist all the same; before asking again, look for the question's own message id in the
    inputs of the thread's runs, and join that run."""
    alice = users["alice"]
    thread_id = alice.threads.create()["thread_id"]
    turn = f"turn-{uuid.uuid4().hex}"
    question = {"role": "user", "content": CALC_QUESTION, "id": turn}
    alice.runs.create(thread_id, GRAPH_ID, input={"messages": [question]})  # pretend the answer was lost
    mine = [
        run
        for run in alice.runs.list(thread_id)
        if any(m.get("id") == turn for m in ((run.get("input") or {}).get("messages") or []))
    ]
    assert len(mine) == 1
    alice.runs.join(thread_id, mine[0]["run_id"])
    assert alice.runs.get(thread_id, mine[0]["run_id"])["status"] == "success"
    messages = alice.threads.get_state(thread_id)["values"]["messages"]
    assert [m["id"] for m in messages if m["type"] == "human"] == [turn]
    assert CALC_ANSWER in messages[-1]["content"]
    assert users["bob"].runs.list(thread_id) == []  # another caller sees none of it


def test_stream_carries_custom_tool_events(users: dict[str, SyncLangGraphClient]) -> None:
    alice = users["alice"]
    thread_id = alice.threads.create()["thread_id"]
    parts = list(
        alice.runs.stream(
            thread_id,
            GRAPH_ID,
            input={"messages": [{"role": "user", "content": CALC_QUESTION}]},
            stream_mode=["updates", "custom"],
        )
    )
    assert "error" not in [p.event for p in parts], parts
    custom = [p.data for p in parts if p.event.split("|")[0] == "custom"]
    statuses = [e.get("status") for e in custom if isinstance(e, dict) and e.get("tool") == "calculator"]
    assert statuses[:1] == ["executing"] and "done" in statuses, custom
    nodes = {
        n for p in parts if p.event.split("|")[0] == "updates" and isinstance(p.data, dict) for n in p.data
    }
    assert {"agent", "tools"} <= nodes


def test_approval_interrupts_and_resumes(users: dict[str, SyncLangGraphClient]) -> None:
    root = users["root"]
    thread_id = root.threads.create()["thread_id"]
    root.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": "删除文档 old-policy.md"}]}
    )
    pending = _interrupts(root.threads.get_state(thread_id))
    assert len(pending) == 1 and pending[0]["tool"] == "delete_document", pending
    assert pending[0]["args"] == {"doc_id": "old-policy.md"}
    assert root.threads.get(thread_id)["status"] == "interrupted"
    root.runs.wait(thread_id, GRAPH_ID, command={"resume": {"approved": True}})
    messages = root.threads.get_state(thread_id)["values"]["messages"]
    tool = next(m for m in messages if m["type"] == "tool" and m["name"] == "delete_document")
    assert '"deleted": "old-policy.md"' in tool["content"], tool
    assert root.threads.get(thread_id)["status"] == "idle"


def test_a_message_of_an_unknown_role_is_refused_and_the_thread_stays_readable(
    users: dict[str, SyncLangGraphClient],
) -> None:
    alice = users["alice"]
    thread_id = alice.threads.create()["thread_id"]
    _ask(alice, thread_id, CALC_QUESTION)
    with pytest.raises(httpx.HTTPStatusError) as refused:
        alice.runs.wait(thread_id, GRAPH_ID, input={"messages": [{"role": "robot", "content": "x"}]})
    assert refused.value.response.status_code == 422
    assert "input.messages[0] is not a message" in refused.value.response.text
    assert "'robot'" in refused.value.response.text
    state = alice.threads.get_state(thread_id)  # was a 500: the bad input sat in the checkpoint
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai", "tool", "ai"]
    assert [r["status"] for r in alice.runs.list(thread_id)] == ["success"]
    assert "1000" in _ask(alice, thread_id, "计算 10 × 100")["messages"][-1]["content"]


def test_two_users_are_isolated(users: dict[str, SyncLangGraphClient]) -> None:
    alice, bob = users["alice"], users["bob"]
    thread_id = alice.threads.create()["thread_id"]
    _ask(alice, thread_id, CALC_QUESTION)
    assert thread_id not in {t["thread_id"] for t in bob.threads.search(limit=100)}
    assert bob.runs.list(thread_id) == []  # filtered by owner: none of alice's runs
    for attempt in (
        lambda: bob.threads.get(thread_id),
        lambda: bob.threads.get_state(thread_id),
        lambda: bob.runs.wait(thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": "hi"}]}),
        lambda: bob.threads.delete(thread_id),
    ):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            attempt()
        assert refused.value.response.status_code in (403, 404)
    with pytest.raises(httpx.HTTPStatusError) as spoofed:
        bob.runs.wait(
            bob.threads.create()["thread_id"],
            GRAPH_ID,
            input={"messages": [{"role": "user", "content": "hi"}]},
            context={"user_id": "alice"},
        )
    assert spoofed.value.response.status_code == 403
    assert len(alice.threads.get_state(thread_id)["values"]["messages"]) == 4


def _refusal(stack: dict[str, Any], env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(stack["exe"]), "serve", "--port", "1", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refuses_to_start_without_tokens(stack: dict[str, Any]) -> None:
    env = {k: v for k, v in stack["env"].items() if k != "KB_AGENT_API_TOKENS"}
    done = _refusal(stack, env)
    assert done.returncode == 1 and "KB_AGENT_API_TOKENS is not set" in done.stderr, done.stderr
    assert "--insecure-dev" in done.stderr


def test_postgres_down_at_start_is_one_line_and_exit_1(stack: dict[str, Any]) -> None:
    env = dict(stack["env"], KB_AGENT_DATABASE_URL="postgresql://postgres:postgres@127.0.0.1:9/nowhere")
    done = _refusal(stack, env)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "KB_AGENT_DATABASE_URL" in lines[0] and "postgres:postgres" not in lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("KB_AGENT_MAX_ROUNDS", "ten", "KB_AGENT_MAX_ROUNDS"),
        ("KB_AGENT_TOP_K", "0", "KB_AGENT_TOP_K"),
        ("KB_AGENT_MCP_CONFIG", "{broken}", "KB_AGENT_MCP_CONFIG"),
    ],
)
def test_a_setting_that_cannot_be_used_is_one_line_and_exit_1(
    stack: dict[str, Any], variable: str, value: str, named: str
) -> None:
    if variable == "KB_AGENT_MCP_CONFIG":
        path = stack["tmp"] / "broken-mcp.json"
        path.write_text(value, "utf-8")
        value = str(path)
    done = _refusal(stack, dict(stack["env"], **{variable: value}))
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert named in lines[0] and "Traceback" not in done.stderr


def test_refuses_to_serve_when_the_auth_does_not_load(stack: dict[str, Any]) -> None:
    """Aegra fails open on a wrong auth path; the self-check at start turns that into a refusal."""
    spec = json.loads((REPO_ROOT / "langgraph.json").read_text("utf-8"))
    spec["dependencies"] = [str(REPO_ROOT)]
    spec["graphs"] = {GRAPH_ID: str(REPO_ROOT / "graph" / "server.py") + ":graph"}
    spec["auth"]["path"] = str(REPO_ROOT / "graph" / "no_such_auth.py") + ":auth"
    spec["http"]["app"] = str(REPO_ROOT / "graph" / "edge.py") + ":app"
    config = stack["tmp"] / "wrong-auth" / "langgraph.json"
    config.parent.mkdir(exist_ok=True)
    config.write_text(json.dumps(spec), "utf-8")
    srv = ServeProcess(stack["exe"], stack["env"], stack["tmp"] / "wrong-auth.log")
    srv.start("--config", str(config), wait=False)
    assert srv.proc is not None
    try:
        code = srv.proc.wait(timeout=90)
    finally:
        srv.stop()
    log = Path(srv.log).read_text("utf-8", errors="replace")
    assert code != 0 and "refuses to serve" in log, log[-3000:]


def test_the_edge_holds_on_this_runtime_too(server: ServeProcess, users: dict[str, SyncLangGraphClient]) -> None:
    """Aegra loads the same edge (langgraph.json "http"): state writes change messages only, the event
    protocol cannot start a run past the checks, oversized bodies are 413s, /metrics needs a token."""
    alice = users["alice"]
    thread_id = alice.threads.create()["thread_id"]
    _ask(alice, thread_id, CALC_QUESTION)
    before = alice.threads.get_state(thread_id)
    forged = {"turn": "q-X", "rounds": -1000, "tool_calls": -1000, "tokens": -1e9, "started_at": 4e9}
    for values, named in (({"budget": forged}, "budget"), ({"summary": 1}, "summary")):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            alice.threads.update_state(thread_id, values, as_node="update_memory")
        assert refused.value.response.status_code == 403 and named in refused.value.response.text
    with pytest.raises(httpx.HTTPStatusError) as refused:
        alice.runs.wait(thread_id, GRAPH_ID, command={"update": {"budget": forged}})
    assert refused.value.response.status_code == 403
    headers = {"Authorization": "Bearer tok-alice"}
    start = {"id": 1, "method": "run.start", "params": {
        "assistant_id": GRAPH_ID, "input": {"messages": [{"role": "robot", "content": "x"}]},
        "config": {"configurable": {"data_dir": "/tmp"}}}}  # fmt: skip
    response = httpx.post(f"{server.url}/threads/{thread_id}/commands", json=start, headers=headers, timeout=30)
    assert response.status_code == 403, response.text
    big = {"assistant_id": GRAPH_ID, "input": {"messages": [{"role": "user", "content": "x" * 2_000_000}]}}
    response = httpx.post(f"{server.url}/threads/{thread_id}/runs/wait", json=big, headers=headers, timeout=30)
    assert response.status_code == 413, response.text
    after = alice.threads.get_state(thread_id)
    assert after["values"] == before["values"] and len(alice.runs.list(thread_id)) == 1
    assert httpx.get(f"{server.url}/metrics", timeout=30).status_code == 401
    assert httpx.get(f"{server.url}/docs", timeout=30).status_code == 401
    assert httpx.get(f"{server.url}/health", timeout=30).status_code == 200


def test_the_chat_page_works_on_this_runtime_too(server: ServeProcess, browser: Any, tmp_path: Path) -> None:
    """The same page, served by the same edge in front of Aegra: sign in, ask, watch the tool line and the
    streamed answer, then approve a deletion as an admin."""
    tab = Page(browser, server.url, tmp_path)
    try:
        page = tab.sign_in("tok-alice")
        tab.ask(CALC_QUESTION)
        assert page.get_attribute("#log .tool[data-tool=calculator]", "data-status") == "done"
        assert CALC_ANSWER in page.inner_text("#log .message.ai >> nth=-1")
        assert int(page.evaluate("document.body.dataset.streamed || '0'")) >= 1
        # the list is refreshed after the answer is drawn: wait for it (the page may lag under load)
        page.wait_for_function("q => document.getElementById('threads').innerText.includes(q)", arg=CALC_QUESTION)
        tab.shot("serve-calculation")
        assert tab.errors() == [], tab.console
    finally:
        tab.close()
    tab = Page(browser, server.url, tmp_path)
    try:
        page = tab.sign_in("tok-root")
        tab.ask(f"删除文档 {PAGE_DOC}")
        page.wait_for_selector("#approval:not([hidden])")
        assert json.loads(page.inner_text("#approval-args")) == {"doc_id": PAGE_DOC}
        page.fill("#approval-reason", "keep it for the audit")
        page.click("#reject")
        page.wait_for_function(
            "() => document.querySelector('#log .tool[data-tool=delete_document]')?.dataset.status === 'approval_denied'"
        )
        page.wait_for_selector("#send:not([disabled])")
        line = page.inner_text("#log .tool[data-tool=delete_document]")
        assert "rejected" in line and "keep it for the audit" in line, line
        assert page.is_hidden("#approval")
        tab.shot("serve-rejected")
        assert tab.errors() == [], tab.console
    finally:
        tab.close()


def test_an_admin_removes_another_users_cron_and_nobody_else_can(
    server: ServeProcess, users: dict[str, SyncLangGraphClient]
) -> None:
    """Aegra keeps crons by their creator; an administrator (server:crons) still removes anyone's, say the
    cron of a user whose token was withdrawn."""
    alice, root = users["alice"], users["root"]
    question = {"messages": [{"role": "user", "content": CALC_QUESTION}]}
    before = {c["cron_id"] for c in alice.crons.search(limit=100)}
    alice.crons.create(GRAPH_ID, schedule="0 0 1 1 *", input=question)  # Aegra answers with its first run
    (cron,) = [c for c in alice.crons.search(limit=100) if c["cron_id"] not in before]
    refused = httpx.delete(
        f"{server.url}/runs/crons/{cron['cron_id']}", headers={"Authorization": "Bearer tok-bob"}
    )
    assert refused.status_code in (403, 404), refused.text
    assert cron["cron_id"] in {c["cron_id"] for c in alice.crons.search(limit=100)}
    root.crons.delete(cron["cron_id"])
    assert cron["cron_id"] not in {c["cron_id"] for c in alice.crons.search(limit=100)}
    missing = httpx.delete(
        f"{server.url}/runs/crons/{cron['cron_id']}", headers={"Authorization": "Bearer tok-root"}
    )
    assert missing.status_code == 404


def test_a_crons_run_has_its_owners_rights_not_the_deployments_defaults(server: ServeProcess) -> None:
    """The run Aegra starts when a cron is created gets the roles of the owner's token: a reader's cron cannot
    keep a memory (the deployment's default role could), and the reply does not promise it. (Later firings,
    which Aegra starts as a bare user id, are resolved by ``nodes.context.rights_now``: unit-tested.)"""
    rita = get_sync_client(url=server.url, timeout=60.0, headers={"Authorization": "Bearer tok-rita"})
    try:
        question = {"messages": [{"role": "user", "content": "记住我喜欢喝绿茶"}]}
        thread_id = rita.threads.create()["thread_id"]
        fired = rita.crons.create_for_thread(thread_id, GRAPH_ID, schedule="0 0 1 1 *", input=question)
        rita.runs.join(thread_id, fired["run_id"])  # Aegra fires a new cron's first run at once
        messages = rita.threads.get_state(thread_id)["values"]["messages"]
    finally:
        rita.close()
    assert not [m for m in messages if m["type"] == "tool" and m.get("name") == "remember"], messages
    reply = messages[-1]["content"]
    assert messages[-1]["type"] == "ai" and "不能" in reply and "会在回答之后" not in reply, reply
