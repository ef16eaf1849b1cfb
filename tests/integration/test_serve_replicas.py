"""Two ``kb-agent serve`` replicas on one Postgres, one Redis and one Chroma server.

A thread started through one continues through the other; an approval raised through one is resumed
through the other; a memory written through one is recalled through the other (long-term memory and the
knowledge base live on the Chroma server, ``KB_AGENT_CHROMA_URL``, as every replica of a deployment must).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

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


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, chroma_server: str) -> Iterator[list[ServeProcess]]:
    exe = server_kb_agent()
    tmp = tmp_path_factory.mktemp("serve-replicas")
    with private_redis(tmp) as redis_url, private_database() as database_url:
        env = serve_env(tmp / "home", database_url, redis_url)
        env["KB_AGENT_CHROMA_URL"] = chroma_server  # embedded Chroma is per machine; replicas share a server
        ingest_old_policy(tmp, env)
        servers = [ServeProcess(exe, env, tmp / f"replica-{i}.log") for i in range(2)]
        try:
            for srv in servers:
                srv.start()
            yield servers
        finally:
            for srv in servers:
                srv.stop()


def _clients(replicas: list[ServeProcess], token: str) -> list[SyncLangGraphClient]:
    return [
        get_sync_client(url=srv.url, timeout=60.0, headers={"Authorization": f"Bearer {token}"})
        for srv in replicas
    ]


def _ask(client: SyncLangGraphClient, thread_id: str, question: str) -> dict[str, Any]:
    result = client.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": question}]}
    )
    assert isinstance(result, dict) and "__error__" not in result, repr(result)
    return result


def test_a_thread_continues_on_the_other_replica(replicas: list[ServeProcess]) -> None:
    one, two = _clients(replicas, "tok-alice")
    thread_id = one.threads.create()["thread_id"]
    for turn in range(4):
        client = (one, two)[turn % 2]
        result = _ask(client, thread_id, f"计算 {200 + turn} × 3")
        assert str((200 + turn) * 3) in result["messages"][-1]["content"]
    for client in (one, two):
        humans = [
            m["content"]
            for m in client.threads.get_state(thread_id)["values"]["messages"]
            if m["type"] == "human"
        ]
        assert humans == [f"计算 {200 + t} × 3" for t in range(4)]
        assert [r["status"] for r in client.runs.list(thread_id)] == ["success"] * 4
    bob_two = _clients(replicas, "tok-bob")[1]
    assert thread_id not in {t["thread_id"] for t in bob_two.threads.search(limit=100)}


def test_an_approval_raised_on_one_is_resumed_on_the_other(replicas: list[ServeProcess]) -> None:
    one, two = _clients(replicas, "tok-root")
    thread_id = one.threads.create()["thread_id"]
    one.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": "删除文档 old-policy.md"}]}
    )
    pending = [
        i["value"] for task in two.threads.get_state(thread_id)["tasks"] for i in task.get("interrupts", [])
    ]
    assert len(pending) == 1 and pending[0]["tool"] == "delete_document", pending
    assert two.threads.get(thread_id)["status"] == "interrupted"
    two.runs.wait(thread_id, GRAPH_ID, command={"resume": {"approved": True}})
    messages = one.threads.get_state(thread_id)["values"]["messages"]
    tool = next(m for m in messages if m["type"] == "tool" and m["name"] == "delete_document")
    assert '"deleted": "old-policy.md"' in tool["content"], tool
    assert one.threads.get(thread_id)["status"] == "idle"


def test_a_memory_written_through_one_replica_is_recalled_through_the_other(
    replicas: list[ServeProcess],
) -> None:
    one, two = _clients(replicas, "tok-alice")
    said = _ask(one, one.threads.create()["thread_id"], "记住我喜欢喝乌龙茶")["messages"][-1]["content"]
    assert "记住" in said and "乌龙茶" in said, said
    asked = _ask(two, two.threads.create()["thread_id"], "我喜欢喝什么？")["messages"][-1]["content"]
    assert "乌龙茶" in asked, asked
    bob = _clients(replicas, "tok-bob")[0]
    other = _ask(bob, bob.threads.create()["thread_id"], "我喜欢喝什么？")["messages"][-1]["content"]
    assert "乌龙茶" not in other, other


def test_a_replica_with_other_settings_refuses_to_start_naming_them(replicas: list[ServeProcess]) -> None:
    peer = replicas[0]
    env = dict(peer.env, KB_AGENT_MAX_ROUNDS="3", KB_AGENT_TOP_K="2")
    done = subprocess.run(
        [str(peer.exe), "serve", "--port", str(peer.port + 1)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "settings KB_AGENT_MAX_ROUNDS, KB_AGENT_TOP_K" in lines[0], lines[0]
    assert "differs" in lines[0] and "graph version" not in lines[0]
    assert any(f":{srv.port} " in lines[0] for srv in replicas), lines[0]
