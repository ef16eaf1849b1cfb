"""The server's edge: what every HTTP request meets before the LangGraph routes (``langgraph.json`` "http").

Both runtimes (``langgraph dev`` / LangGraph API, and Aegra behind ``kb-agent serve``) load ``app`` from
here and put :class:`Edge` in front of all their routes. The auth handlers (``graph.auth``) see a run's
payload but not every request's body, so what must hold for any request is checked here, once:

- a request body larger than ``max_body_bytes`` is a 413 before it is read whole;
- a caller's thread-state write (``POST /threads/{id}/state``, a new thread's ``supersteps``) may change
  the messages only, with messages that coerce, and never while the thread waits for an approval (the
  pending call would change under the person deciding);
- the event-protocol routes (``/threads/{id}/commands``, ``/threads/{id}/stream/events``) start runs
  without the checks of the runs API, so they are closed;
- ``/metrics`` and the API docs need a valid token unless the operator opened them (``open_routes``);
- with tokens, each caller has a request rate and a number of runs in flight, queued beyond
  (``graph.limits``); a new cron counts as a run-creating request (Aegra starts its first run at once);
- ``/ui`` is the chat page (``graph.ui``), served here so both runtimes have it on the API's own origin;
- ``GET /health`` is answered here: every dependency checked at once, each within a deadline
  (``graph.health``);
- only the routes under ``KNOWN_ROOTS`` are forwarded: anything else a runtime serves (langgraph dev's
  ``/internal/…`` debug and truncate routes, ``/deploy``) is a 404 for every caller.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from graph.auth import Unauthenticated, identify, refusal
from graph.limits import THROUGH_EDGE, Busy, created_runs, process_limits
from graph.ui_http import SECURITY_HEADERS
from nodes.settings import OPENABLE_ROUTES, Settings
from nodes.state import InvalidInputError, check_caller_command, check_caller_update
from nodes.tokens import tokens_configured

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STATE_WRITE = re.compile(r"/threads/(?P<thread>[^/]+)/state/?")
THREADS = re.compile(r"/threads/?")
EVENT_PROTOCOL = re.compile(r"/threads/[^/]+/(?:commands|stream/events)/?")
RUN_CREATE = re.compile(r"/(?:threads/[^/]+/)?runs(?:/(?P<kind>wait|stream|batch))?/?")
CRON_CREATE = re.compile(r"/(?:threads/[^/]+/)?runs/crons/?")
HEALTH = ("/ok", "/health", "/ready", "/live", "/info")
# The first segment of every route the edge forwards: the LangGraph API both runtimes share (what the SDK,
# Studio and the chat page call), health and metadata, the API docs, the chat page. Anything else a
# runtime serves (langgraph dev's /internal/… and /deploy, /mcp, /a2a, profilers) is not ours to expose.
KNOWN_ROOTS = frozenset(
    {"", "assistants", "threads", "runs", "store", "ok", "health", "ready", "live", "info", "metrics", "docs", "redoc",
     "openapi.json", "ui"}
)
UI = re.compile(r"/ui(?:/.*)?")
UPLOAD = "/ui/api/documents"
BODY_METHODS = ("POST", "PUT", "PATCH")
FORWARDED = (b"authorization", b"x-kb-user")


class Refused(Exception):
    """A request the edge answers itself."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def secured(send: Send) -> Send:
    """``send`` with the page's security headers added to the response's start, where it has not set them:
    every answer of the chat page's origin carries them, its 404s, 405s, redirects and the edge's own."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            present = {bytes(name).lower() for name, _ in headers}
            headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
            message = {**message, "headers": headers}
        await send(message)

    return sending


async def _answer(send: Send, status: int, detail: str, retry_after: int | None = None) -> None:
    await _json(send, status, {"detail": detail}, retry_after)


async def _json(send: Send, status: int, value: Any, retry_after: int | None = None) -> None:
    send = secured(send)
    body = json.dumps(value, ensure_ascii=False).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {bytes(k).lower(): bytes(v) for k, v in scope.get("headers") or ()}


def _forwarded(scope: Scope) -> dict[str, str]:
    """The headers that say who is calling, to ask the server itself on the caller's behalf."""
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in _headers(scope).items() if k in FORWARDED}


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The whole body, refused as soon as it passes ``limit`` (a body without a length is not read on)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refused(400, "the client went away before sending the whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"request body larger than {limit} bytes (max_body_bytes)")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the inner app the body already read, then waits as the original would."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _check_state_write(payload: Any, settings: Settings) -> None:
    """A caller's state write: messages only, that coerce (``graph.auth.refusal`` maps the error)."""
    if not isinstance(payload, dict):
        return  # not JSON the route takes: it answers with its own 422
    limit = settings.max_message_chars
    check_caller_update(payload.get("values"), settings.max_input_messages, max_chars=limit)
    check_caller_command(payload.get("command"), settings.max_input_messages, max_chars=limit)


def _check_new_thread(payload: Any, settings: Settings) -> None:
    """A new thread's ``supersteps`` are state writes too."""
    steps = payload.get("supersteps") if isinstance(payload, dict) else None
    if not isinstance(steps, list):
        return
    for s, step in enumerate(steps):
        updates = step.get("updates") if isinstance(step, dict) else None
        for u, update in enumerate(updates if isinstance(updates, list) else []):
            if not isinstance(update, dict):
                continue
            where = f"supersteps[{s}].updates[{u}]"
            limit = settings.max_message_chars
            check_caller_update(update.get("values"), settings.max_input_messages, f"{where}.values", max_chars=limit)
            check_caller_command(
                update.get("command"), settings.max_input_messages, f"{where}.command", max_chars=limit
            )


class Edge:
    """ASGI middleware in front of every route of the server (see the module docstring)."""

    kb_agent_edge = True  # found by ``has_edge`` even when a runtime loaded this file under another name

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.limits = process_limits()  # shared with the runs the runtime starts itself (a cron's)
        self.limits.ask = self._ask
        self._ui: ASGIApp | None = None

    @property
    def ui(self) -> ASGIApp:
        """The chat page's app, made on first use (it imports Starlette and the services)."""
        if self._ui is None:
            from graph.ui import ui_app

            self._ui = ui_app(self._ask_as_caller)
        return self._ui

    async def _ask(
        self, headers: dict[str, str], path: str, method: str = "GET", body: Any = None
    ) -> tuple[int, Any]:
        """Ask the server's own API with a caller's credentials: (status, JSON body or None)."""
        import httpx  # the server's runtimes ship it

        transport = httpx.ASGITransport(app=self.app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
            response = await client.request(method, path, headers=headers, json=body)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    async def _ask_as_caller(self, request: Any, method: str, path: str) -> tuple[int, Any]:
        """What the chat page's routes ask of the API, as the caller of ``request``."""
        forwarded = {k: v for k, v in request.headers.items() if k.encode("latin-1") in FORWARDED}
        return await self._ask(forwarded, path, method)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # the lifespan starts the runtime's own tasks (crons)
            await self.app(scope, receive, send)
            return
        passed = THROUGH_EDGE.set(True)  # runs created while serving this request passed the edge
        try:
            await self._serve(scope, receive, send)
        finally:
            THROUGH_EDGE.reset(passed)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "websocket" and (EVENT_PROTOCOL.fullmatch(path) or not known_route(path)):
            await send({"type": "websocket.close", "code": 1008, "reason": "closed: use /threads/{id}/runs"})
            return
        if scope["type"] == "http" and not known_route(path):
            await _answer(send, 404, "Not Found")  # deny by default: only the routes the edge knows go on
            return
        if scope["type"] == "http" and path == "/health" and scope.get("method") in ("GET", "HEAD"):
            from graph.health import health

            status, report = await health(Settings.current(), lambda route: self._ask({}, route))
            await _json(send, status, report)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            receive, body = await self._check(scope, receive)
            user = self._caller(scope)
            slots = await self._limit(scope, user, body)
        except Refused as refused:
            await _answer(send, refused.status, refused.detail, refused.retry_after)
            return
        if UI.fullmatch(path):
            await self.ui(scope, receive, secured(send))
            return
        if not slots or user is None:
            await self.app(scope, receive, send)
            return
        await self._run(scope, receive, send, user, slots)

    def _caller(self, scope: Scope) -> str | None:
        """Whom the limits count this request against (None: unauthenticated, the route answers 401)."""
        try:
            return str(identify(_headers(scope))["identity"])
        except Unauthenticated:
            return None

    async def _limit(self, scope: Scope, user: str | None, body: bytes | None) -> int:
        """Apply the caller's rate; for a run-creating request, take its run slots (how many)."""
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if user is None or path in HEALTH or not tokens_configured():
            return 0  # without tokens nobody is told apart (a developer's server): no per-caller limits
        settings = Settings.current()
        try:
            self.limits.take_request(user, settings.requests_per_minute)
            created = RUN_CREATE.fullmatch(path) if method == "POST" else None
            if created is None and not (method == "POST" and CRON_CREATE.fullmatch(path)):
                return 0
            need = 1
            if created is not None and created["kind"] == "batch":
                try:
                    batch = json.loads(body or b"[]")
                except ValueError:
                    batch = []
                need = max(1, len(batch)) if isinstance(batch, list) else 1
            await self.limits.acquire(user, need, settings.runs_per_user, settings.run_queue_per_user)
        except Busy as busy:
            raise Refused(429, busy.detail, busy.retry_after) from None
        return need

    async def _run(self, scope: Scope, receive: Receive, send: Send, user: str, slots: int) -> None:
        """Pass a run-creating request on, holding its slots: until the response ends for a waiting or
        streaming request, until the runs end for background ones (tracked from the response)."""
        created = RUN_CREATE.fullmatch(scope.get("path", ""))
        background = created is None or created["kind"] in (None, "batch")  # a cron answers with its first run
        status, chunks, located = 0, [], []

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message.get("status", 0))
                located.extend(run_location(message.get("headers") or ()))
            elif message["type"] == "http.response.body" and background and status == 200:
                chunks.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            runs = created_runs(b"".join(chunks)) if background else located
            if status == 200 and runs:
                # A waiting or streaming request can end (the caller hung up) while its run goes on: it
                # counts until the runtime says it ended, like a background run.
                headers = _forwarded(scope)
                self.limits.track(user, [functools.partial(self._still_running, headers, t, r) for t, r in runs])
            self.limits.release(user, slots)

    async def _check_cron_count(self, scope: Scope, cap: int) -> None:
        """Refuse a new cron past the caller's ``crons_per_user``: each fires runs for as long as it exists.
        Counted by the runtime's own search as the caller (it finds their crons only); a count that cannot be
        read refuses rather than lets the cron through."""
        status, found = await self._ask(_forwarded(scope), "/runs/crons/search", "POST", {"limit": cap + 1})
        if status in (401, 403):
            return  # the runtime refuses the caller anyway, with its own reason
        if status != 200 or not isinstance(found, list):
            raise Refused(503, "cannot count your scheduled runs right now; try again")
        if len(found) >= cap:
            raise Refused(
                403, f"you have {len(found)} scheduled runs, the most allowed (crons_per_user={cap}); delete one first"
            )

    async def _still_running(self, headers: dict[str, str], thread_id: str, run_id: str) -> bool:
        """Whether a background run is pending or running, asked of the server itself as its caller."""
        status, run = await self._ask(headers, f"/threads/{thread_id}/runs/{run_id}")
        return status == 200 and isinstance(run, dict) and run.get("status") in ("pending", "running")

    async def _check(self, scope: Scope, receive: Receive) -> tuple[Receive, bytes | None]:
        """Refuse what the edge refuses; else the ``receive`` the inner app should read the body from, and
        the body (None when the request has none)."""
        settings = Settings.current()
        path, method = scope.get("path", ""), scope.get("method", "GET")
        headers = _headers(scope)
        if EVENT_PROTOCOL.fullmatch(path) and method == "POST":
            raise Refused(403, "this route is closed here; start and resume runs with POST /threads/{id}/runs")
        if path.rstrip("/") in OPENABLE_ROUTES and path.rstrip("/") not in settings.open_route_list:
            try:
                identify(headers)
            except Unauthenticated as exc:
                raise Refused(401, f"{exc} (or open {path} with KB_AGENT_OPEN_ROUTES)") from None
        if method not in BODY_METHODS:
            return receive, None
        if method == "POST" and CRON_CREATE.fullmatch(path):
            await self._check_cron_count(scope, settings.crons_per_user)
        limit = settings.max_body_bytes
        if method == "POST" and path == UPLOAD:  # a document added from the page: as large as ingest takes
            limit = max(limit, round(settings.max_file_mb * 1024 * 1024))
        try:
            declared = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            raise Refused(400, "unreadable Content-Length header") from None
        if declared > limit:
            raise Refused(413, f"request body of {declared} bytes is larger than {limit} (max_body_bytes)")
        body = await _read_body(receive, limit)
        state_write = STATE_WRITE.fullmatch(path) if method == "POST" else None
        if state_write or (method == "POST" and THREADS.fullmatch(path)):
            try:
                payload = json.loads(body) if body else None
            except ValueError:
                payload = None  # the route answers malformed JSON itself
            try:
                if state_write:
                    _check_state_write(payload, settings)
                else:
                    _check_new_thread(payload, settings)
            except InvalidInputError as exc:
                refused = refusal(exc)
                raise Refused(refused.status_code, str(refused.detail)) from None
            if state_write and await self._waits_for_approval(scope, state_write["thread"]):
                raise Refused(
                    409,
                    "this thread waits for an answer to a pending approval; resume it with your decision "
                    "before changing its state",
                )
        return _replay(body, receive), body

    async def _waits_for_approval(self, scope: Scope, thread_id: str) -> bool:
        """Ask the server itself, as the caller, whether the thread is paused on an interrupt (a thread that
        is not found or not theirs: the route itself answers that)."""
        status, thread = await self._ask(_forwarded(scope), f"/threads/{thread_id}")
        return status == 200 and isinstance(thread, dict) and thread.get("status") == "interrupted"


RUN_LOCATION = re.compile(r"/threads/(?P<thread>[^/]+)/runs/(?P<run>[^/?]+)")


def run_location(headers: Any) -> list[tuple[str, str]]:
    """``(thread_id, run_id)`` of the run a streaming or waiting response names (``Content-Location``)."""
    for name, value in headers:
        if bytes(name).lower() == b"content-location":
            found = RUN_LOCATION.fullmatch(bytes(value).decode("latin-1"))
            return [(found["thread"], found["run"])] if found else []
    return []


def known_route(path: str) -> bool:
    """Whether ``path`` is under one of the roots the edge forwards (``KNOWN_ROOTS``)."""
    return path.lstrip("/").split("/", 1)[0] in KNOWN_ROOTS


def has_edge(app: Any) -> bool:
    """Whether ``app`` (a Starlette/FastAPI app) already puts the edge in front of its routes."""
    return any(getattr(m.cls, "kb_agent_edge", False) for m in getattr(app, "user_middleware", []))


def _app() -> Any:
    """The app whose middleware the runtimes put in front of their routes. Aegra takes only a FastAPI
    app (and then serves its docs from it); the LangGraph API takes any Starlette app and serves its own."""
    if "aegra_api" in sys.modules:
        from fastapi import FastAPI

        edge_app: Any = FastAPI(title="kb-agent")
    else:
        from starlette.applications import Starlette

        edge_app = Starlette()
    edge_app.add_middleware(Edge)
    return edge_app


app = _app()
