"""``kb-agent serve``'s checks before anything listens, and the start-up auth self-check, without Aegra."""

from __future__ import annotations

import asyncio
import importlib.util
from typing import Any

import pytest

from cli import serve
from cli.server_app import SelfCheckedApp


def test_refuses_without_tokens_unless_insecure_dev(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KB_AGENT_API_TOKENS", raising=False)
    with pytest.raises(serve.ServeError, match=r"KB_AGENT_API_TOKENS is not set.*--insecure-dev"):
        serve.check_tokens(insecure_dev=False)
    assert serve.check_tokens(insecure_dev=True) is False
    monkeypatch.setenv("KB_AGENT_API_TOKENS", '{"t": "alice"}')
    assert serve.check_tokens(insecure_dev=False) is True
    monkeypatch.setenv("KB_AGENT_API_TOKENS", '{"t": {"roles": ["user"]}}')
    with pytest.raises(serve.ServeError, match=r"cannot be read: .*no user"):
        serve.check_tokens(insecure_dev=False)


def test_database_setting_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_DATABASE_URL", "")
    with pytest.raises(serve.ServeError, match="KB_AGENT_DATABASE_URL is not set"):
        serve.check_database()
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed")
    monkeypatch.setenv("KB_AGENT_DATABASE_URL", "postgresql://u:secret@127.0.0.1:9/db")
    with pytest.raises(
        serve.ServeError, match=r"cannot reach Postgres at KB_AGENT_DATABASE_URL \(127.0.0.1:9/db\)"
    ) as exc:
        serve.check_database()
    assert "secret" not in str(exc.value)


def test_workers_need_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KB_AGENT_REDIS_URL", raising=False)
    with pytest.raises(serve.ServeError, match="--workers 2 needs KB_AGENT_REDIS_URL"):
        serve.check_redis(2)
    assert serve.check_redis(1) == ""


def test_the_runtime_environment_is_derived_from_ours(tmp_path: Any) -> None:
    env = serve.runtime_environment(
        database_url="postgresql://x/db", redis_url="redis://r:6379/0", config=tmp_path, authenticated=True
    )
    assert env["DATABASE_URL"] == "postgresql://x/db" and env["AEGRA_CONFIG"] == str(tmp_path)
    assert env["REDIS_BROKER_ENABLED"] == "true" and env["REDIS_URL"] == "redis://r:6379/0"
    assert env["KB_AGENT_SERVE_SELF_CHECK"] == "401"
    env = serve.runtime_environment(database_url="d", redis_url="", config=tmp_path, authenticated=False)
    assert env["REDIS_BROKER_ENABLED"] == "false" and env["KB_AGENT_SERVE_SELF_CHECK"] == "off"


def _app(status: int) -> Any:
    """An ASGI app answering every request with ``status``, with a lifespan that starts fine."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def _startup(app: SelfCheckedApp) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "lifespan.shutdown"}

    async def send(message: Any) -> None:
        sent.append(dict(message))

    asyncio.run(app({"type": "lifespan"}, receive, send))
    return sent


def test_a_server_that_answers_without_a_token_refuses_to_start() -> None:
    sent = _startup(SelfCheckedApp(_app(200), require_auth=True))
    assert sent[0]["type"] == "lifespan.startup.failed"
    assert "got HTTP 200, not 401" in sent[0]["message"]


def test_a_server_that_answers_401_starts() -> None:
    assert _startup(SelfCheckedApp(_app(401), require_auth=True))[0]["type"] == "lifespan.startup.complete"
    assert _startup(SelfCheckedApp(_app(200), require_auth=False))[0]["type"] == "lifespan.startup.complete"


class _Heartbeat:
    """Records what the app asked of the replica's heartbeat."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")


def test_the_replica_row_lives_while_serving_and_goes_when_refusing_or_stopping() -> None:
    serving, refusing = _Heartbeat(), _Heartbeat()
    _startup(SelfCheckedApp(_app(401), require_auth=True, heartbeat=serving))  # type: ignore[arg-type]
    assert serving.calls == ["start", "stop"]  # beat while up, row removed at the clean shutdown
    _startup(SelfCheckedApp(_app(200), require_auth=True, heartbeat=refusing))  # type: ignore[arg-type]
    assert refusing.calls[0] == "stop" and "start" not in refusing.calls  # never beat, row removed
