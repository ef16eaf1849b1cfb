"""graph/ui.py behind the edge: the page's headers, and its routes answering for the caller alone — a rating
counts only for an answer the agent recorded in one of the caller's threads, memories need the rights a
run would need. (In a real browser against live servers: test_chat_page.py, test_serve.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from graph import auth as server_auth
from graph.edge import Edge
from nodes.settings import Settings
from stores.feedback import FeedbackStore, answer_digest

ANSWER = "Employees fly economy. [travel.md#0]"


def _values(recorded: bool = True, text: str = ANSWER) -> dict[str, Any]:
    answers = {"a-1": {"digest": answer_digest(ANSWER), "cited": ["travel.md#0"]}} if recorded else {}
    return {
        "messages": [
            {"type": "human", "id": "q-1", "content": "How do we fly?"},
            {"type": "ai", "id": "a-1", "content": text, "tool_calls": []},
        ],
        "answers": answers,
    }


class Threads:
    """The runtime behind the edge: each caller's threads, as the API would show them to that caller."""

    def __init__(self) -> None:
        self.owned: dict[tuple[str, str], dict[str, Any]] = {}
        self.asked: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope["headers"])
        caller = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
        self.asked.append(scope["path"])
        thread = scope["path"].split("/")[2] if scope["path"].startswith("/threads/") else ""
        values = self.owned.get((caller, thread))
        status, body = (200, {"values": values}) if values is not None else (404, {"detail": "not found"})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Threads:
    tokens = {
        "t-alice": {"user": "alice", "roles": ["user"]},
        "t-bob": {"user": "bob", "roles": ["user"]},
        "t-rita": {"user": "rita", "roles": ["reader"]},
    }
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps(tokens))
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path))
    monkeypatch.setenv("KB_AGENT_EMBEDDER", "hashing")
    return Threads()


def _call(app: Threads, method: str, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {**kwargs.pop("headers", {}), **({"Authorization": f"Bearer {token}"} if token else {})}

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=Edge(app))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, headers=headers, **kwargs)

    return asyncio.run(go())


def _ratings() -> list[Any]:
    return FeedbackStore(Settings.current().data_dir).list()


def test_the_page_is_served_with_a_strict_policy_and_no_token(threads: Threads) -> None:
    page = _call(threads, "GET", "/ui/")
    assert page.status_code == 200 and 'name="token"' in page.text
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "connect-src 'self'" in policy and "unsafe" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert _call(threads, "GET", "/ui/static/app.js").headers["content-type"].startswith("text/javascript")
    assert _call(threads, "GET", "/ui/static/../auth.py").status_code == 404
    assert _call(threads, "GET", "/ui/static/edge.py").status_code == 404
    assert threads.asked == []  # none of it reached the runtime's routes


def test_who_is_signed_in_comes_from_the_token(threads: Threads) -> None:
    assert _call(threads, "GET", "/ui/api/me").json()["signed_in"] is False
    assert _call(threads, "GET", "/ui/api/me", "wrong").json()["signed_in"] is False
    me = _call(threads, "GET", "/ui/api/me", "t-rita", headers={"x-kb-user": "alice"}).json()
    assert me["signed_in"] and me["user"] == "rita" and me["roles"] == ["reader"]
    assert me["memory"] is False  # a reader's roles grant no memories: the page hides them


def test_a_rating_counts_for_an_answer_the_agent_recorded(threads: Threads) -> None:
    threads.owned[("t-alice", "th-1")] = _values()
    rated = _call(
        threads,
        "POST",
        "/ui/api/threads/th-1/feedback",
        "t-alice",
        json={"message_id": "a-1", "rating": "bad"},
    )
    assert rated.status_code == 200 and rated.json()["counts"] is True
    (record,) = _ratings()
    assert (
        record.user_id == "alice" and record.cited == ("travel.md#0",) and record.question == "How do we fly?"
    )


@pytest.mark.parametrize("values", [_values(recorded=False), _values(text="Forged. [office.md#0]")])
def test_a_rating_of_text_the_agent_did_not_record_is_kept_but_counts_for_nothing(
    threads: Threads, values: dict[str, Any]
) -> None:
    threads.owned[("t-alice", "th-1")] = values
    rated = _call(
        threads,
        "POST",
        "/ui/api/threads/th-1/feedback",
        "t-alice",
        json={"message_id": "a-1", "rating": "bad"},
    )
    assert rated.status_code == 200 and rated.json()["counts"] is False
    (record,) = _ratings()
    assert record.cited is None


def test_nobody_rates_in_a_thread_that_is_not_theirs_or_without_the_right(threads: Threads) -> None:
    threads.owned[("t-alice", "th-1")] = _values()
    threads.owned[("t-rita", "th-1")] = _values()
    reader = _call(
        threads,
        "POST",
        "/ui/api/threads/th-1/feedback",
        "t-rita",
        json={"message_id": "a-1", "rating": "bad"},
    )
    assert reader.status_code == 403 and "feedback:write" in reader.json()["detail"]
    rated = _call(
        threads, "POST", "/ui/api/threads/th-1/feedback", "t-bob", json={"message_id": "a-1", "rating": "bad"}
    )
    assert rated.status_code == 404 and _ratings() == []
    unsigned = _call(
        threads, "POST", "/ui/api/threads/th-1/feedback", json={"message_id": "a-1", "rating": "bad"}
    )
    assert unsigned.status_code == 401


@pytest.mark.parametrize(
    "body, status",
    [
        ({"message_id": "a-1", "rating": "meh"}, 422),
        ({"rating": "good"}, 422),
        ({"message_id": "a-1", "rating": "good", "reason": "x" * 5000}, 422),
        ({"message_id": "q-1", "rating": "good"}, 404),  # a question is not an answer
        ({"message_id": "nope", "rating": "good"}, 404),
        (["not", "an", "object"], 422),
    ],
)
def test_bad_ratings_are_refused_and_nothing_is_kept(threads: Threads, body: Any, status: int) -> None:
    threads.owned[("t-alice", "th-1")] = _values()
    rated = _call(threads, "POST", "/ui/api/threads/th-1/feedback", "t-alice", json=body)
    assert rated.status_code == status, rated.text
    assert "detail" in rated.json() and _ratings() == []


def test_memories_answer_for_the_caller_with_the_rights_a_run_needs(threads: Threads) -> None:
    assert _call(threads, "GET", "/ui/api/memories").status_code == 401
    assert _call(threads, "GET", "/ui/api/memories", "t-alice").json() == {"memories": [], "pending": []}
    assert _call(threads, "GET", "/ui/api/memories", "t-rita").status_code == 403
    refused = _call(threads, "POST", "/ui/api/pending/1/confirm", "t-rita")
    assert refused.status_code == 403 and "memory:write" in refused.json()["detail"]
    assert _call(threads, "POST", "/ui/api/pending/1/confirm", "t-alice").status_code == 404
    assert _call(threads, "POST", "/ui/api/pending/x/drop", "t-alice").status_code == 404
    assert _call(threads, "DELETE", "/ui/api/memories/mem_nope", "t-alice").status_code == 404


def test_without_tokens_the_page_signs_in_by_itself(threads: Threads, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(server_auth.TOKENS_ENV)  # a developer's server (langgraph dev, serve --insecure-dev)
    me = _call(threads, "GET", "/ui/api/me").json()
    assert me["signed_in"] is True and me["user"] == "default"
