"""The chat page's routes never block the server's event loop: each one is called with the deployment's
home relative to the working directory (``KB_AGENT_HOME=./.kb-agent``, the README's setup) and with
blockbuster's guard on, as ``langgraph dev`` turns it on. Opening the stores, resolving the data dir
(``os.getcwd``) and every file they touch belong in the thread pool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph import auth as server_auth
from graph.edge import Edge
from stores.embeddings import HashingEmbedder
from stores.feedback import answer_digest
from stores.knowledge.knowledge_base import KnowledgeBase

blockbuster = pytest.importorskip("blockbuster")

# What langgraph dev's guard lets through (langgraph-runtime-inmem turns these off: file reads and writes,
# stat, listdir, os.path, lock waits); everything else blockbuster watches, os.getcwd included, raises.
ALLOWED = (
    "os.stat",
    "os.listdir",
    "os.remove",
    "io.BufferedReader.read",
    "io.BufferedWriter.write",
    "io.TextIOWrapper.read",
    "io.TextIOWrapper.write",
    "threading.Lock.acquire",
)


def runtime_guard() -> Any:
    """blockbuster configured as the server's runtime configures it for its event loop."""
    guard = blockbuster.BlockBuster(excluded_modules=[])
    for name in [*ALLOWED, *(f for f in guard.functions if f.startswith("os.path."))]:
        guard.functions.pop(name, None)
    return guard

ANSWER = "Employees fly economy. [travel.md#0]"
STATE = {
    "values": {
        "messages": [
            {"type": "human", "id": "q-1", "content": "How do we fly?"},
            {"type": "ai", "id": "a-1", "content": ANSWER, "tool_calls": []},
        ],
        "answers": {"a-1": {"digest": answer_digest(ANSWER), "cited": ["travel.md#0"]}},
    }
}


async def _threads(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The runtime behind the edge: alice's one thread, as the API would show it to her."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(STATE).encode()})


@pytest.fixture
def relative_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "travel.md").write_text("# Travel policy\n\nEmployees fly economy.\n", "utf-8")
    kb = KnowledgeBase(tmp_path / ".kb-agent", embedder=HashingEmbedder())
    kb.ingest([docs])
    kb.close()
    tokens = {"t-alice": {"user": "alice", "roles": ["user"]}, "t-root": {"user": "root", "roles": ["admin"]}}
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps(tokens))
    monkeypatch.setenv("KB_AGENT_HOME", ".kb-agent")
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    yield


REQUESTS = [
    ("GET", "/ui/api/me", "t-alice", None),
    ("GET", "/ui/api/overview", "t-alice", None),
    ("GET", "/ui/api/passages/travel.md%230", "t-alice", None),
    ("GET", "/ui/api/documents", "t-alice", None),
    ("GET", "/ui/api/memories", "t-alice", None),
    ("POST", "/ui/api/threads/th-1/feedback", "t-alice", {"message_id": "a-1", "rating": "bad", "reason": "old"}),
    ("POST", "/ui/api/documents?name=visa.md", "t-root", b"# Visa\n\nBooked by the travel desk.\n"),
    ("DELETE", "/ui/api/documents/visa.md", "t-root", None),
    ("GET", "/ui/api/trash", "t-root", None),
    ("POST", "/ui/api/trash/1/restore", "t-root", None),
]


@pytest.mark.usefixtures("relative_home")
def test_no_route_of_the_page_blocks_the_event_loop() -> None:
    async def go() -> list[tuple[str, int, str]]:
        guard = runtime_guard()
        answers = []
        transport = httpx.ASGITransport(app=Edge(_threads))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            guard.activate()
            try:
                for method, path, token, body in REQUESTS:
                    kwargs: dict[str, Any] = {"headers": {"Authorization": f"Bearer {token}"}}
                    if isinstance(body, bytes):
                        kwargs["content"] = body
                    elif body is not None:
                        kwargs["json"] = body
                    answer = await client.request(method, path, **kwargs)
                    answers.append((path, answer.status_code, answer.text[:300]))
            finally:
                guard.deactivate()
        return answers

    answers = asyncio.run(go())
    assert [status for _, status, _ in answers] == [200] * len(REQUESTS), answers
