"""The chat page at ``/ui``: static files shipped in the package, and the few routes the LangGraph API lacks.

The page talks to the same LangGraph API as any client (threads, streamed runs, state, resume) with the
caller's bearer token. What it needs beyond that is served here, behind the same :func:`graph.auth.identify`:
the caller's identity, a cited passage (only if the caller's groups may read it), the caller's own
memories (list, delete, confirm or drop the pending ones) and a rating of an answer the agent recorded in
one of the caller's threads. Every route answers for the caller alone: there is no user parameter.

The edge (``graph.edge``) hands ``/ui`` requests here, with a function that asks the server itself as the
caller (so a thread that is not theirs is "not found" here exactly as it is on the API).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from graph.services import services_for
from graph.ui_documents import DOCUMENT_ROUTES
from graph.ui_http import (
    MAX_REASON,
    SECURITY_HEADERS,
    AskServer,
    Refusal,
    caller_settings,
    guarded,
    json_response,
    needs,
    read_body,
)
from nodes.settings import Settings
from stores.feedback import RATINGS, answer_digest
from tools.permissions import grant_for

STATIC = Path(__file__).with_name("ui_static")
JS, CSS, SVG = "text/javascript", "text/css", "image/svg+xml"
FILES = {
    "app.js": JS,
    "dom.js": JS,
    "i18n.js": JS,
    "markdown.js": JS,
    "messages.js": JS,
    "side.js": JS,
    "threads.js": JS,
    "documents.js": JS,
    "layout.js": JS,
    "app.css": CSS,
    "icon.svg": SVG,
    # third-party, copied unchanged from npm (vendor/vendor.json: versions, sources, digests, licences)
    "vendor/markdown-it.js": JS,
    "vendor/purify.js": JS,
}


async def page(request: Request) -> Response:
    return FileResponse(
        STATIC / "index.html", media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in FILES:
        return json_response({"detail": "not found"}, 404)
    kind = FILES[name] if name.endswith(".svg") else f"{FILES[name]}; charset=utf-8"
    return FileResponse(STATIC / name, media_type=kind, headers=SECURITY_HEADERS)


async def me(request: Request) -> Response:
    """Who the page is signed in as; ``signed_in`` false (not a 401) when the token is missing or wrong, so
    the page asks for one without an error in the browser's console."""
    try:
        settings = caller_settings(request)
    except Refusal as refused:
        if refused.status != 401:
            raise
        return json_response({"signed_in": False, "detail": refused.detail})
    grant = grant_for(settings)
    return json_response(
        {
            "signed_in": True,
            "user": settings.user_id,
            "roles": list(grant.roles),
            "groups": list(settings.group_list),
            "memory": grant.allows("memory:read"),
            "feedback": grant.allows("feedback:write"),
            "documents": grant.allows("kb:read"),
            "change_documents": grant.allows("kb:admin"),
        }
    )


async def passage(request: Request) -> Response:
    """One cited chunk's text, if the caller's groups may read it (else the same 404 as a missing one)."""
    settings = caller_settings(request)
    chunk_id = request.path_params["chunk_id"]

    def read() -> list[Any]:
        kb = services_for(settings).knowledge()
        return [] if kb is None else kb.get([chunk_id], groups=settings.group_list)

    found = await run_in_threadpool(read)
    if not found:
        return json_response({"detail": f"no passage {chunk_id!r} you may read"}, 404)
    p = found[0]
    meta = p.get("metadata") or {}
    return json_response(
        {
            "id": p.get("id", chunk_id),
            "source": p.get("source", ""),
            "title": str(meta.get("title") or ""),
            "heading": str(meta.get("section") or ""),
            "text": p.get("text", ""),
        }
    )


def _memories(settings: Settings) -> Any:
    return services_for(settings).memory_store(settings)


async def memories(request: Request) -> Response:
    settings = caller_settings(request)
    needs(settings, "memory:read")

    def read() -> dict[str, Any]:
        from stores.memory.history import memory_kind
        from stores.memory.pending import pending

        store = _memories(settings)
        kept = [
            {
                "id": m["id"],
                "content": m.get("content", ""),
                "type": m.get("memory_type", ""),
                "kind": memory_kind(m),  # "fact" or "history": the page lists them apart
                "updated_at": m.get("updated_at", ""),
            }
            for m in store.list(settings.user_id, limit=200)
        ]
        held = [
            {
                "id": e.id,
                "content": e.new_content or "",
                "type": e.memory_type or "",
                "reason": e.reason or "",
            }
            for e in pending(store, settings.user_id)
        ]
        return {"memories": kept, "pending": held}

    return json_response(await run_in_threadpool(read))


async def forget(request: Request) -> Response:
    """Delete one of the caller's memories (anyone may have their own memories forgotten)."""
    settings = caller_settings(request)
    memory_id = request.path_params["memory_id"]

    def delete() -> Any:
        store = _memories(settings)
        if store.get(settings.user_id, memory_id) is None:
            raise Refusal(404, f"you have no memory {memory_id!r}")
        return store.manage(settings.user_id, "DELETE", memory_id=memory_id, source="ui")

    entry = await run_in_threadpool(delete)
    return json_response({"status": entry.status, "id": memory_id})


async def resolve_pending(request: Request) -> Response:
    """Confirm (written as the caller's own request: needs memory:write) or drop a pending memory."""
    from stores.memory import pending

    settings = caller_settings(request)
    action = request.path_params["action"]
    if action not in ("confirm", "drop"):
        return json_response({"detail": "not found"}, 404)
    if action == "confirm":
        needs(settings, "memory:write")
    try:
        pending_id = int(request.path_params["pending_id"])
    except ValueError:
        raise Refusal(404, "pending memory ids are numbers") from None

    def resolve() -> Any:
        try:
            return getattr(pending, action)(_memories(settings), settings.user_id, pending_id)
        except pending.PendingMemoryError as exc:
            raise Refusal(404, str(exc)) from None

    entry = await run_in_threadpool(resolve)
    return json_response({"status": entry.status, "id": pending_id})


def rated_answer(values: dict[str, Any], message_id: str) -> tuple[str | None, str, list[str] | None]:
    """(question, answer text, cited chunks) of the answer ``message_id`` in a thread's state values.
    ``cited`` is None unless the agent recorded that answer unchanged (only then does a rating count)."""
    messages = values.get("messages") or []
    question: str | None = None
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("type") == "human" and isinstance(message.get("content"), str):
            question = message["content"]
        if message.get("id") == message_id and message.get("type") == "ai":
            text = message.get("content")
            if not isinstance(text, str) or not text:
                break
            record = (values.get("answers") or {}).get(message_id)
            if not (isinstance(record, dict) and record.get("digest") == answer_digest(text)):
                return question, text, None  # rated, but not an answer the agent recorded citing
            return question, text, [str(c) for c in record.get("cited") or []]
    raise Refusal(404, f"no answer {message_id!r} in this thread")


def feedback_route(ask_server: AskServer) -> Callable[[Request], Awaitable[Response]]:
    async def feedback(request: Request) -> Response:
        """Rate one answer of one of the caller's threads (read from the thread as the caller)."""
        settings = caller_settings(request)
        needs(settings, "feedback:write")
        body = await read_body(request)
        rating, message_id, reason = body.get("rating"), body.get("message_id"), body.get("reason")
        if rating not in RATINGS:
            raise Refusal(422, f"rating must be one of {', '.join(RATINGS)}")
        if not isinstance(message_id, str) or not message_id:
            raise Refusal(422, "message_id: the id of the answer you rate")
        if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
            raise Refusal(422, f"reason: text of at most {MAX_REASON} characters")
        thread_id = request.path_params["thread_id"]
        status, state = await ask_server(request, "GET", f"/threads/{thread_id}/state")
        if status != 200 or not isinstance(state, dict):
            raise Refusal(404, f"no thread {thread_id!r} of yours")
        question, answer, cited = rated_answer(state.get("values") or {}, message_id)
        record: dict[str, Any] = {
            "user_id": settings.user_id,
            "thread_id": thread_id,
            "rating": rating,
            "reason": reason,
        }
        record.update(question=question, answer=answer, cited=cited)
        # Opening the services resolves the data dir (a relative one asks for the working directory) and
        # may open stores: file work that the server's event loop must not wait on.
        feedback_id = await run_in_threadpool(lambda: services_for(settings).feedback().add(**record))
        return json_response({"feedback_id": feedback_id, "rating": rating, "counts": cited is not None})

    return feedback


def ui_app(ask_server: AskServer) -> Starlette:
    """The ``/ui`` app; ``ask_server(request, method, path)`` asks the server's API as the request's caller."""
    routes = [
        Route("/ui", lambda request: RedirectResponse("/ui/", status_code=308)),
        Route("/ui/", page),
        Route("/ui/static/{name:path}", static),
        Route("/ui/api/me", guarded(me)),
        Route("/ui/api/passages/{chunk_id:path}", guarded(passage)),
        Route("/ui/api/memories", guarded(memories)),
        Route("/ui/api/memories/{memory_id}", guarded(forget), methods=["DELETE"]),
        Route("/ui/api/pending/{pending_id}/{action}", guarded(resolve_pending), methods=["POST"]),
        Route("/ui/api/threads/{thread_id}/feedback", guarded(feedback_route(ask_server)), methods=["POST"]),
        *DOCUMENT_ROUTES,
    ]
    return Starlette(routes=routes)
