"""``GET /health``: every dependency checked at once within a deadline, the parts that are down named."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pytest

from graph.health import DEADLINE, health
from nodes.settings import Settings


async def _runtime_ok(path: str) -> tuple[int, Any]:
    return 200, {"status": "healthy"}


def _run(settings: Settings, ask: Any = _runtime_ok) -> tuple[int, dict[str, Any]]:
    return asyncio.run(health(settings, ask))


def test_a_deployment_with_nothing_to_reach_is_healthy_when_its_runtime_is() -> None:
    assert _run(Settings()) == (200, {"status": "healthy", "checks": {"runtime": "ok"}})


def test_the_runtime_is_asked_its_ok_route_else_its_liveness_route() -> None:
    asked: list[str] = []

    async def aegra(path: str) -> tuple[int, Any]:
        asked.append(path)
        return (404, None) if path == "/ok" else (200, {"status": "alive"})

    assert _run(Settings(), aegra)[0] == 200 and asked == ["/ok", "/live"]


def test_each_dependency_that_is_down_is_named_and_the_answer_is_503() -> None:
    settings = Settings(
        checkpoint_url="postgresql://u:secret@127.0.0.1:1/db",
        chroma_url="http://127.0.0.1:1",
        redis_url="redis://127.0.0.1:1/0",
    )
    status, body = _run(settings)
    assert status == 503 and body["status"] == "unhealthy"
    checks = body["checks"]
    assert checks["runtime"] == "ok"
    assert set(checks) == {"runtime", "postgres 127.0.0.1:1/db", "chroma", "redis"}
    assert all(checks[name].startswith("down: ") for name in checks if name != "runtime")
    assert "secret" not in str(body)  # the address, never the password


def test_a_check_that_hangs_is_down_after_its_deadline_and_the_others_still_answer() -> None:
    async def hung(path: str) -> tuple[int, Any]:
        await asyncio.sleep(60)
        return 200, None

    started = time.monotonic()
    status, body = _run(Settings(), hung)
    assert status == 503 and body["checks"]["runtime"] == f"down: no answer within {DEADLINE:g} s"
    assert time.monotonic() - started < DEADLINE + 3  # a deadline, not a benchmark


def test_redis_that_answers_pong_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> tuple[int, dict[str, Any]]:
        async def pong(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while line := await reader.readline():
                writer.write(b"+OK\r\n" if line.startswith(b"AUTH") else b"+PONG\r\n")
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(pong, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await health(Settings(redis_url=f"redis://:pw@127.0.0.1:{port}/0"), _runtime_ok)

    status, body = asyncio.run(go())
    assert status == 200 and body["checks"]["redis"] == "ok"


@pytest.mark.skipif(not os.environ.get("KB_TEST_POSTGRES_URL"), reason="KB_TEST_POSTGRES_URL is not set")
def test_a_reachable_postgres_is_up() -> None:
    status, body = _run(Settings(checkpoint_url=os.environ["KB_TEST_POSTGRES_URL"]))
    assert status == 200, body

