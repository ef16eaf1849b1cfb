"""Long-term memory keeps working across a Postgres restart under a running ``kb-agent serve``.

Every Postgres-backed store borrows from the deployment's one pool, which checks a connection before
lending it: after the cluster comes back, the next write reconnects. The cluster is the test's own
(``private_postgres``); nothing of ours is restarted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from tests.fixtures.serve import (
    PrivatePostgres,
    ServeProcess,
    private_postgres,
    private_redis,
    serve_env,
    server_kb_agent,
)

pytestmark = pytest.mark.server

GRAPH_ID = "kb_agent"
# What a failed memory write must never show the user: the driver's exception classes.
DRIVER_WORDS = ("AdminShutdown", "OperationalError", "psycopg", "Traceback", "connection is closed")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, PrivatePostgres]]:
    exe = server_kb_agent()
    tmp = tmp_path_factory.mktemp("serve-memory-pg-restart")
    with private_postgres() as cluster, private_redis(tmp) as redis_url:
        srv = ServeProcess(exe, serve_env(tmp / "home", cluster.url, redis_url), tmp / "server.log").start()
        try:
            yield srv, cluster
        finally:
            srv.stop()


def _reply(client: SyncLangGraphClient, question: str) -> str:
    thread_id = client.threads.create()["thread_id"]
    result = client.runs.wait(
        thread_id, GRAPH_ID, input={"messages": [{"role": "user", "content": question}]}, raise_error=False
    )
    assert isinstance(result, dict), repr(result)
    if "__error__" in result:
        return f"run failed: {result['__error__']}"
    return str(result["messages"][-1]["content"])


def _recalled(client: SyncLangGraphClient, question: str, wanted: str, seconds: float) -> str:
    """The reply to ``question`` once it names ``wanted`` (memory is written in the background)."""
    deadline = time.monotonic() + seconds
    said = ""
    while time.monotonic() < deadline:
        said = _reply(client, question)
        if wanted in said:
            return said
        time.sleep(1.0)
    return said


@pytest.mark.timeout(600)
def test_a_memory_written_after_postgres_restarts_is_kept_and_recalled(
    stack: tuple[ServeProcess, PrivatePostgres],
) -> None:
    srv, cluster = stack
    alice = get_sync_client(url=srv.url, timeout=120.0, headers={"Authorization": "Bearer tok-alice"})
    try:
        said = _reply(alice, "记住我喜欢喝乌龙茶")
        assert "乌龙茶" in said and not any(w in said for w in DRIVER_WORDS), said
        assert "乌龙茶" in _recalled(alice, "我喜欢喝什么？", "乌龙茶", 60), srv.log_tail()

        cluster.ctl("stop", "-m", "fast")  # every pooled connection of the server is cut
        time.sleep(3.0)
        cluster.ctl("start")

        replies: list[str] = []
        for _ in range(3):  # a run cut by the restart itself may fail cleanly; the memory must not be lost
            said = _reply(alice, "Remember that I live in Hangzhou")
            replies.append(said)
            if "Hangzhou" in said and not said.startswith("run failed"):
                break
        assert not any(w in r for r in replies for w in DRIVER_WORDS), replies
        assert "Hangzhou" in replies[-1], (replies, srv.log_tail())
        recalled = _recalled(alice, "Where do I live?", "Hangzhou", 90)
        assert "Hangzhou" in recalled, (recalled, srv.log_tail())
        assert "乌龙茶" in _reply(alice, "我喜欢喝什么？")  # what was kept before the restart is still there
    finally:
        alice.close()
