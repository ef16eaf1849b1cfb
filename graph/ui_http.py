"""What every ``/ui`` route shares: the page's security headers, JSON answers, the caller's settings from
their token, and refusals (a status and a sentence for the person) turned into one JSON answer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.auth import Unauthenticated, identify
from nodes.context import ConfigError, resolve_run
from nodes.settings import Settings
from tools.permissions import grant_for

# No inline script or style, nothing from elsewhere, no framing: text from documents, tools and models is
# put on the page as text (never HTML), and this is the second wall should that ever slip.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
MAX_REASON = 2000

AskServer = Callable[[Request, str, str], Awaitable[tuple[int, Any]]]


class Refusal(Exception):
    """A request a route answers with ``status`` and a sentence for the person (never a traceback)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


def json_response(value: Any, status: int = 200) -> JSONResponse:
    """JSON with the page's security headers: every answer of ``/ui`` carries them."""
    return JSONResponse(value, status_code=status, headers=SECURITY_HEADERS)


def caller_settings(request: Request) -> Settings:
    """The settings a run of this caller would get: the deployment's, with the token's user, roles, groups."""
    try:
        user = identify(dict(request.headers.raw))
    except Unauthenticated as exc:
        raise Refusal(401, str(exc)) from None
    try:
        return resolve_run(None, {}, Settings.current(), user=user).settings
    except ConfigError as exc:  # e.g. a user who holds no token any more
        raise Refusal(403, str(exc)) from None


def guarded(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with its :class:`Refusal` turned into a JSON answer."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Refusal as refused:
            return json_response({"detail": refused.detail}, refused.status)

    return answer


def needs(settings: Settings, permission: str) -> None:
    """Refuse (403) a caller whose roles do not grant ``permission``: the same grants a tool call needs."""
    if not grant_for(settings).allows(permission):
        raise Refusal(403, f"your roles do not grant {permission}")


async def read_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (empty when there is no body), or a 422 that says what is wrong."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise Refusal(422, "the body must be JSON") from None
    if not isinstance(body, dict):
        raise Refusal(422, "the body must be a JSON object")
    return body
