"""The ASGI app ``kb-agent serve`` runs: Aegra's LangGraph-compatible server, refusing to serve without auth.

Aegra (``aegra-api``) reads ``langgraph.json`` and loads our ``graph/auth.py`` on the first request. When
that path is wrong, or the auth section is missing, it falls back to "no auth" and answers unauthenticated
requests as an anonymous user: it fails open. So before uvicorn accepts a single connection, this wrapper
sends the app a request without a token and one with a token nobody holds; unless both are a 401, startup
fails and the process exits. In ``--insecure-dev`` mode (no tokens, by the operator's choice) the check is
skipped and a warning is logged instead.

Imported only by uvicorn inside the server interpreter (Python >= 3.12 with ``.[server]`` installed):
``aegra_api`` is imported inside ``create_app``, so the rest of kb-agent never needs it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SELF_CHECK_ENV = (
    "KB_AGENT_SERVE_SELF_CHECK"  # set by `kb-agent serve`: "401" (tokens) or "off" (--insecure-dev)
)
REPLICA_ENV = "KB_AGENT_SERVE_REPLICA_ID"  # set by `kb-agent serve`: this replica's row in the replicas table
PROBE_PATH = "/threads/search"  # authenticated, read-only: a fail-open server answers it with 200 and no harm
BAD_TOKEN = "kb-agent-self-check-not-a-token"

log = logging.getLogger("kb_agent.serve")


class SelfCheckFailed(RuntimeError):
    """The server answered an unauthenticated request: its auth did not load, so it must not serve."""


async def probe_auth(app: ASGIApp) -> str | None:
    """None when requests without a valid token get 401, else what happened (the reason not to serve)."""
    import httpx  # the server interpreter has it (aegra-api depends on it)

    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://self-check") as client:
        for label, headers in (
            ("without a token", {}),
            ("with an unknown token", {"Authorization": f"Bearer {BAD_TOKEN}"}),
        ):
            response = await client.post(PROBE_PATH, json={"limit": 1}, headers=headers)
            if response.status_code != 401:
                return (
                    f"a request {label} got HTTP {response.status_code}, not 401: the auth of langgraph.json "
                    '(graph/auth.py) did not load, and the runtime fails open. Check the "auth" path in the '
                    "config and KB_AGENT_API_TOKENS"
                )
    return None


class ReplicaHeartbeat:
    """Keep this replica's row fresh while it serves, and remove it on a clean shutdown (``stores.replicas``)."""

    def __init__(self, replica_id: str, database_url: str) -> None:
        self.replica_id = replica_id
        self.database_url = database_url
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._beat, name="kb-agent-replica-heartbeat", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        from stores.replicas import HEARTBEAT, ReplicaRegistry

        while not self.stopped.wait(HEARTBEAT):
            try:
                registry = ReplicaRegistry(self.database_url)
                try:
                    registry.heartbeat(self.replica_id)
                finally:
                    registry.close()
            except Exception:  # Postgres away for a while: the next beat tries again
                log.warning("replica heartbeat failed", exc_info=True)

    def stop(self) -> None:
        from stores.replicas import ReplicaRegistry

        self.stopped.set()
        try:
            registry = ReplicaRegistry(self.database_url)
            try:
                registry.leave(self.replica_id)
            finally:
                registry.close()
        except Exception:  # its row expires on its own
            log.warning("could not remove this replica's row", exc_info=True)


class SelfCheckedApp:
    """Pass everything through, but fail the lifespan startup when the auth probe does not get its 401s."""

    def __init__(
        self, inner: ASGIApp, *, require_auth: bool, heartbeat: ReplicaHeartbeat | None = None
    ) -> None:
        self.inner = inner
        self.require_auth = require_auth
        self.heartbeat = heartbeat

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.inner(scope, receive, send)
            return

        async def checked_send(message: Message) -> None:
            if message.get("type") == "lifespan.startup.complete":
                problem = await self._check()
                if problem:
                    if self.heartbeat is not None:
                        self.heartbeat.stop()  # a replica that never served leaves no row behind
                    await send({"type": "lifespan.startup.failed", "message": problem})
                    return
                if self.heartbeat is not None:
                    self.heartbeat.start()
            elif message.get("type") == "lifespan.shutdown.complete" and self.heartbeat is not None:
                self.heartbeat.stop()
            await send(message)

        await self.inner(scope, receive, checked_send)

    async def _check(self) -> str | None:
        if not self.require_auth:
            log.warning("kb-agent serve --insecure-dev: no tokens, requests are not authenticated")
            return None
        try:
            problem = await probe_auth(self.inner)
        except Exception as exc:  # a crash of the probe is as bad as a fail-open answer
            problem = f"the auth self-check could not run ({type(exc).__name__}: {exc})"
        if problem:
            log.error("kb-agent serve refuses to serve: %s", problem)
            return f"kb-agent serve refuses to serve: {problem}"
        log.info("kb-agent serve: auth self-check passed (requests without a valid token get 401)")
        return None


def warm_model_client() -> None:
    """Build the deployment's model client before serving.

    Importing langchain-openai and building its client (two SSL contexts) costs about a second of CPU; on
    first use it landed on the first runs, all stalled behind it (bench/README.md, "where the CPU goes").
    """
    try:
        from graph.services import ROOT
        from nodes.settings import Settings

        settings = Settings.current()
        if not settings.uses_offline_model:
            ROOT.chat_models(settings)  # the runs get this same client
    except Exception:  # a bad model setting is reported by the run that uses it, with its own message
        log.warning("could not prepare the model client at start", exc_info=True)


def create_app() -> SelfCheckedApp:
    """uvicorn's factory (``cli.server_app:create_app``): Aegra's app behind the auth self-check, faster waits."""
    from aegra_api.main import app as aegra_app
    from aegra_api.services.executor import executor

    from cli import aegra_adapter

    aegra_adapter.install(executor)  # durable run ends, one run per thread, prompt waits (see the module)
    warm_model_client()

    replica_id, database_url = os.environ.get(REPLICA_ENV, ""), os.environ.get("DATABASE_URL", "")
    heartbeat = ReplicaHeartbeat(replica_id, database_url) if replica_id and database_url else None
    from graph.edge import Edge, has_edge

    # A config without our "http" app would serve without the edge's checks: put it in front here.
    inner = aegra_app if has_edge(aegra_app) else Edge(aegra_app)
    return SelfCheckedApp(
        inner, require_auth=os.environ.get(SELF_CHECK_ENV, "401") != "off", heartbeat=heartbeat
    )
