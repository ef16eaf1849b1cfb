"""graph/edge.py in front of a recording app: oversized bodies are 413s before they are read, a caller's
state writes touch messages only, an interrupted thread's state is not changed under the person deciding,
the event-protocol routes are closed and /metrics needs a token. (Live: test_server_security.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from graph import auth as server_auth
from graph.edge import Edge

TOKEN = {"Authorization": "Bearer t-1"}


class Inner:
    """The runtime behind the edge: records what reached it; a thread's status is what the test set."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.status = "idle"

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] == "GET" and scope["path"].startswith("/threads/"):
            answer = json.dumps({"thread_id": "t", "status": self.status}).encode()
        else:
            self.bodies.append((scope["path"], body))
            answer = b"{}"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})


@pytest.fixture
def inner(monkeypatch: pytest.MonkeyPatch) -> Inner:
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps({"t-1": "alice"}))
    for name in (
        "KB_AGENT_MAX_BODY_BYTES",
        "KB_AGENT_MAX_INPUT_MESSAGES",
        "KB_AGENT_MAX_MESSAGE_CHARS",
        "KB_AGENT_OPEN_ROUTES",
    ):
        monkeypatch.delenv(name, raising=False)
    return Inner()


def _call(inner: Inner, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=Edge(inner))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


def _state(values: Any, **extra: Any) -> dict[str, Any]:
    return {"json": {"values": values, **extra}, "headers": TOKEN}


def test_a_body_over_the_limit_is_413_before_it_is_read(inner: Inner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_BODY_BYTES", "1000")
    declared = _call(inner, "POST", "/threads/t/runs", content=b"x" * 1001, headers=TOKEN)
    assert declared.status_code == 413 and "max_body_bytes" in declared.text

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: refused once it passes the limit
        for _ in range(100):
            yield b"y" * 100

    streamed = _call(inner, "POST", "/runs/wait", content=chunks(), headers=TOKEN)
    assert streamed.status_code == 413
    assert inner.bodies == []
    fine = _call(inner, "POST", "/threads/t/runs", content=b"z" * 1000, headers=TOKEN)
    assert fine.status_code == 200 and inner.bodies == [("/threads/t/runs", b"z" * 1000)]


@pytest.mark.parametrize(
    ("values", "status", "named"),
    [
        ({"budget": {"turn": "q-X", "rounds": -1000, "tool_calls": -1000}}, 403, "budget"),
        ({"summary": 1}, 403, "summary"),
        ({"messages": [{"role": "user", "content": "hi"}], "stop_reason": "x"}, 403, "stop_reason"),
        ([{"messages": []}, {"passages": [{"text": "forged"}]}], 403, "passages"),
        ({"messages": [{"role": "robot", "content": "beep"}]}, 422, "messages[0]"),
        ({"messages": None}, 422, "messages"),
        ({"messages": [{"role": "user", "content": str(i)} for i in range(101)]}, 413, "101"),
        ({"messages": [{"role": "user", "content": "长" * 60_000}]}, 413, "at most 50,000"),
        ("messages", 422, "values"),
    ],
)  # fmt: skip
def test_a_state_write_may_change_the_messages_only(inner: Inner, values: Any, status: int, named: str) -> None:
    response = _call(inner, "POST", "/threads/t/state", **_state(values, as_node="update_memory"))
    assert response.status_code == status and named in response.json()["detail"], response.text
    assert inner.bodies == []


def test_a_command_in_a_state_write_or_new_thread_is_checked_too(inner: Inner) -> None:
    goto = _call(inner, "POST", "/threads/t/state", **_state(None, command={"goto": "tools"}))
    assert goto.status_code == 403 and "goto" in goto.text
    steps = {"supersteps": [{"updates": [{"values": {"budget": {}}, "as_node": "agent"}]}]}
    new = _call(inner, "POST", "/threads", json=steps, headers=TOKEN)
    assert new.status_code == 403 and "supersteps[0].updates[0].values" in new.text and "budget" in new.text
    assert inner.bodies == []


def test_messages_pass_through_unchanged(inner: Inner) -> None:
    values = {"messages": [{"role": "user", "content": "这份文件说了什么？"}]}
    response = _call(inner, "POST", "/threads/t/state", **_state(values, as_node="agent"))
    assert response.status_code == 200
    [(path, body)] = inner.bodies
    assert path == "/threads/t/state" and json.loads(body)["values"] == values
    plain = {"supersteps": [{"updates": [{"values": values, "as_node": "agent"}]}]}
    assert _call(inner, "POST", "/threads", json=plain, headers=TOKEN).status_code == 200


def test_an_interrupted_threads_state_is_not_changed(inner: Inner) -> None:
    inner.status = "interrupted"
    values = {"messages": [{"role": "assistant", "content": "", "id": "m1"}]}
    response = _call(inner, "POST", "/threads/t/state", **_state(values, as_node="agent"))
    assert response.status_code == 409 and "approval" in response.text
    assert inner.bodies == []


def test_the_event_protocol_routes_are_closed(inner: Inner) -> None:
    command = {"id": 1, "method": "run.start", "params": {"input": {"messages": []}}}
    response = _call(inner, "POST", "/threads/t/commands", json=command, headers=TOKEN)
    assert response.status_code == 403 and "/runs" in response.text
    assert _call(inner, "POST", "/threads/t/stream/events", json={}, headers=TOKEN).status_code == 403
    assert inner.bodies == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/internal/debug/thread/t"),
        ("POST", "/internal/truncate"),
        ("GET", "/deploy"),
        ("POST", "/deploy"),
        ("GET", "/deploy/x/stream"),
        ("POST", "/mcp"),
        ("GET", "/a2a/agent"),
        ("GET", "/profile"),
        ("GET", "/threadsX"),
        ("GET", "/%2e%2e/internal/truncate"),
    ],
)
def test_a_route_the_edge_does_not_know_is_404_for_every_caller(inner: Inner, method: str, path: str) -> None:
    """Deny by default: a runtime's own debug, truncate and deploy routes never reach it."""
    for headers in ({}, TOKEN):
        response = _call(inner, method, path, headers=headers, json={})
        assert response.status_code == 404, (path, response.text)
    assert inner.bodies == []


@pytest.mark.parametrize("path", ["/", "/ok", "/info", "/assistants/search", "/runs/crons/search", "/store/items"])
def test_the_api_routes_still_reach_the_runtime(inner: Inner, path: str) -> None:
    assert _call(inner, "POST", path, json={}, headers=TOKEN).status_code == 200
    assert inner.bodies and inner.bodies[-1][0] == path


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/openapi.json", "/redoc"])
def test_server_pages_need_a_token_unless_opened(
    inner: Inner, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        response = _call(inner, "GET", path, headers=headers)
        assert response.status_code == 401 and "KB_AGENT_OPEN_ROUTES" in response.text
    assert _call(inner, "GET", path, headers=TOKEN).status_code == 200
    monkeypatch.setenv("KB_AGENT_OPEN_ROUTES", f"{path},/metrics")
    assert _call(inner, "GET", path).status_code == 200


def test_an_unknown_open_route_is_a_setting_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from nodes.context import ConfigError
    from nodes.settings import Settings

    with pytest.raises(ConfigError, match="OPEN_ROUTES"):
        Settings(open_routes="/threads")


def test_the_app_the_runtimes_load_carries_the_edge() -> None:
    from starlette.applications import Starlette

    from graph.edge import app, has_edge

    assert has_edge(app) and not has_edge(Starlette()) and not has_edge(object())


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/ui/no-such-file.js", 404),
        ("DELETE", "/ui", 405),
        ("GET", "/internal/truncate", 404),
        ("POST", "/threads", 413),
    ],
)
def test_every_answer_of_ours_carries_the_security_headers(
    inner: Inner, monkeypatch: pytest.MonkeyPatch, method: str, path: str, status: int
) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_BODY_BYTES", "100")
    response = _call(inner, method, path, headers=TOKEN, content=b"x" * (200 if status == 413 else 0))
    assert response.status_code == status, response.text
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_health_is_answered_by_the_edge_with_each_check(inner: Inner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_CHROMA_URL", "http://127.0.0.1:1")
    response = _call(inner, "GET", "/health")
    assert response.status_code == 503 and response.json()["status"] == "unhealthy"
    assert response.json()["checks"]["runtime"] == "ok" and response.json()["checks"]["chroma"].startswith("down")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    monkeypatch.delenv("KB_AGENT_CHROMA_URL")
    assert _call(inner, "GET", "/health").json() == {"status": "healthy", "checks": {"runtime": "ok"}}
