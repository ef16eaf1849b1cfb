"""``GET /health`` on both runtimes: every dependency of the deployment checked at once, each within its own
deadline, so the answer comes within seconds whatever is down and says which part is.

Checked: that the runtime answers (``/ok`` or ``/live``), each Postgres database the settings name,
the Chroma server, Redis. A check that does not answer within ``DEADLINE`` counts as down: a load balancer
asking must not wait for a connection pool's own minute-long timeout, and a dependency that is back is
seen as back at the next ask, since nothing is cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from nodes.settings import Settings
from stores.postgres import is_postgres, postgres_address

DEADLINE = 2.0  # seconds per check; all run at once
Ask = Callable[[str], Awaitable[tuple[int, Any]]]  # path -> (status, JSON) from the runtime behind the edge


async def _runtime(ask: Ask) -> str:
    """The runtime answers at all: ``/ok`` (langgraph dev), else ``/live`` (Aegra). Not the runtime's own
    ``/health``: Aegra's waits on its connection pool's timeout, which is what this route must not do; the
    databases are checked here directly instead."""
    status, _ = await ask("/ok")
    if status == 404:
        status, _ = await ask("/live")
    if status != 200:
        raise RuntimeError(f"answered {status}")
    return "ok"


async def _postgres(url: str) -> str:
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, connect_timeout=max(1, int(DEADLINE)), autocommit=True)
    async with conn:
        await conn.execute("SELECT 1")
    return "ok"


async def _chroma(url: str) -> str:
    import httpx

    async with httpx.AsyncClient(timeout=DEADLINE) as client:
        response = await client.get(url.rstrip("/") + "/api/v2/heartbeat")
    if response.status_code != 200:
        raise RuntimeError(f"heartbeat answered {response.status_code}")
    return "ok"


async def _redis(url: str) -> str:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname or "localhost", parts.port or 6379)
    try:
        if parts.password:
            user = f"{parts.username} " if parts.username else ""
            writer.write(f"AUTH {user}{parts.password}\r\n".encode())
            await reader.readline()
        writer.write(b"PING\r\n")
        await writer.drain()
        answer = await reader.readline()
    finally:
        writer.close()
    if not answer.startswith(b"+PONG"):
        raise RuntimeError(f"answered {answer[:40]!r}")
    return "ok"


async def _within(check: Awaitable[str]) -> str:
    try:
        return await asyncio.wait_for(check, DEADLINE)
    except TimeoutError:
        return f"down: no answer within {DEADLINE:g} s"
    except Exception as exc:  # whatever the client raises, the dependency is not usable: say so in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"down: {first[:200]}"


async def health(settings: Settings, ask: Ask) -> tuple[int, dict[str, Any]]:
    """(status code, body): 200 ``{"status": "healthy", ...}`` when every check passed, else 503 naming
    the parts that are down."""
    checks: dict[str, Awaitable[str]] = {"runtime": _runtime(ask)}
    for url in dict.fromkeys(u for u in (settings.checkpoint_url, settings.database_url) if is_postgres(u)):
        checks[f"postgres {postgres_address(url)}"] = _postgres(url)
    if settings.chroma_url:
        checks["chroma"] = _chroma(settings.chroma_url)
    if settings.redis_url:
        checks["redis"] = _redis(settings.redis_url)
    results = await asyncio.gather(*(_within(check) for check in checks.values()))
    found = dict(zip(checks, results, strict=True))
    healthy = all(result == "ok" for result in found.values())
    return (200 if healthy else 503), {"status": "healthy" if healthy else "unhealthy", "checks": found}
