"""Who is calling a deployed LangGraph server, and which threads they may touch (``langgraph.json`` "auth").

With ``KB_AGENT_API_TOKENS`` set (JSON, inline or a file: ``{"<token>": {"user": "alice", "roles": ["admin"]}}``
or ``{"<token>": "alice"}``), every request needs ``Authorization: Bearer <token>``; the token decides the
user id and roles, and what a run's context says about them is ignored (see ``Context.from_runtime``).
Without it (a developer's ``langgraph dev``), the user is the ``x-kb-user`` header or ``default`` — threads
are still kept apart per user, but nothing is authenticated.

Threads, runs and crons are stamped with their owner and every read, search, update and run is filtered by
it, so one user can never list, read, continue or delete another's thread. LangGraph Studio's own user sees
everything (it is the developer).
"""

from __future__ import annotations

import functools
import hmac
import json
import os
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth

TOKENS_ENV = "KB_AGENT_API_TOKENS"
USER_HEADER = b"x-kb-user"
# Markers in the server's ``langgraph_auth_permissions``, read by ``Context.from_runtime``.
TOKEN_MARK = "kb-auth:token"  # authenticated: user and roles come from the token, not the run's context
HEADER_MARK = "kb-auth:header"  # development: the user named in the header
ROLE_PREFIX = "role:"

auth = Auth()


@functools.cache
def _tokens(raw: str) -> dict[str, dict[str, Any]]:
    text = raw.strip()
    if text and not text.startswith("{"):
        text = Path(text).expanduser().read_text(encoding="utf-8")
    table = json.loads(text) if text else {}
    if not isinstance(table, dict):
        raise ValueError(f'{TOKENS_ENV} must be a JSON object {{"<token>": {{"user": ..., "roles": [...]}}}}')
    users: dict[str, dict[str, Any]] = {}
    for token, who in table.items():
        entry = {"user": who} if isinstance(who, str) else dict(who)
        if not entry.get("user"):
            raise ValueError(f"{TOKENS_ENV}: a token has no user")
        users[str(token)] = {"user": str(entry["user"]), "roles": [str(r) for r in entry.get("roles", [])]}
    return users


def _header(headers: dict[bytes, bytes], name: bytes) -> str:
    value = headers.get(name) or headers.get(name.decode()) or b""  # type: ignore[call-overload]
    return value.decode() if isinstance(value, bytes) else str(value)


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    tokens = _tokens(os.environ.get(TOKENS_ENV, ""))
    if not tokens:
        user = _header(headers, USER_HEADER).strip()
        return {"identity": user or "default", "permissions": [HEADER_MARK] if user else []}
    scheme, _, token = _header(headers, b"authorization").partition(" ")
    for known, who in tokens.items():
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), known):
            return {
                "identity": who["user"],
                "permissions": [TOKEN_MARK, *(ROLE_PREFIX + r for r in who["roles"])],
            }
    raise Auth.exceptions.HTTPException(status_code=401, detail="missing or unknown bearer token")


def _stamp_and_filter(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Stamp a new resource with its owner; filter every access by it."""
    if isinstance(ctx.user, Auth.types.StudioUser):
        return None
    owner = ctx.user.identity
    if isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata["owner"] = owner  # in place: the server keeps a reference to this dict
    return {"owner": owner}


@auth.on.threads
async def threads_of_their_owner(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    return _stamp_and_filter(ctx, value)


@auth.on.crons
async def crons_of_their_owner(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    return _stamp_and_filter(ctx, value)
