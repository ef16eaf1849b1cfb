"""Who is calling a deployed LangGraph server, and what they may touch (``langgraph.json`` "auth").

With ``KB_AGENT_API_TOKENS`` set (JSON, inline or a file:
``{"<token>": {"user": "alice", "roles": ["user"], "groups": ["hr"]}}`` or ``{"<token>": "alice"}``), every
request needs ``Authorization: Bearer <token>``, LangGraph Studio's included (``disable_studio_auth``); the
token decides the user id, roles and document groups. Without it (a developer's ``langgraph dev``), the user
is the ``x-kb-user`` header or the run's ``user_id`` — threads are still kept apart per user, but nothing
is authenticated.

- Threads, runs and crons are stamped with their owner and every access is filtered by it.
- A run's ``context`` (and ``config.configurable``, which the server turns into the context) may set only
  the knobs of ``nodes.context.Context``, within the deployment's caps: anything else is a 403/422 that
  names the key, before the run is queued.
- A run's input messages must each coerce to a message (role user/assistant/system/tool, ...): anything
  else is a 422 before the run is queued, so nothing of it reaches the thread's checkpoint.
- A run the runtime starts on its own (a cron's, on ``langgraph dev``: created outside any request the edge
  passed) is checked the same way, starts only while its owner holds a token and has a free run slot
  (``graph.limits``), and otherwise is refused with a line in the log: that firing is skipped.
- Store items live under their owner's namespace (``(user_id, ...)``); assistants (whose config and
  context would apply to every run) are created, changed and deleted by admins only.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from langgraph_sdk import Auth

from graph.limits import THROUGH_EDGE, Alive, CallerLimits, process_limits
from nodes.context import (
    DEV_MARK,
    GROUP_PREFIX,
    HEADER_MARK,
    ROLE_PREFIX,
    TOKEN_MARK,
    ConfigError,
    ForbiddenSettingError,
    check_run_values,
)
from nodes.settings import Settings
from nodes.state import (
    ForbiddenStateError,
    InvalidInputError,
    MessageTooLongError,
    TooManyMessagesError,
    check_caller_command,
    check_input,
)
from nodes.tokens import CRON_ADMIN, TOKENS_ENV, held_by, token_table, tokens_configured
from tools.permissions import resolve_grant

__all__ = ["TOKENS_ENV", "Unauthenticated", "auth", "identify", "refusal"]

USER_HEADER = b"x-kb-user"
ASSISTANTS_PERMISSION = (
    "server:assistants"  # admins ("*") have it; grant it to other roles to manage assistants
)
CRONS_PERMISSION = "server:crons"  # admins have it: find and delete anyone's crons
MAX_HEADER = 4096
FIRED_RUN = "kb_agent_fired_run"  # stamped on a fired run's metadata: its new thread is found by it
NOT_YET_CREATED = 1.0  # seconds a fired run not found yet still counts (the runtime creates it right after us)

log = logging.getLogger("kb_agent.server")

auth = Auth()


def _header(headers: dict[Any, Any], name: bytes) -> str | None:
    """A header's text; None when absent, unreadable or absurdly long (the caller gets a 401, not a 500)."""
    value = headers.get(name)
    if value is None:
        value = headers.get(name.decode())
    if value is None:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    value = str(value)
    return value if len(value) <= MAX_HEADER else None


class Unauthenticated(Exception):
    """No valid credentials: the message says what to send."""


def identify(headers: dict[Any, Any]) -> Auth.types.MinimalUserDict:
    """The caller the headers name: the token's user, roles and groups (or the developer's header user
    when the deployment has no tokens). The server's routes and its edge (``graph.edge``) both ask here."""
    tokens = token_table()
    if not tokens:
        user = (_header(headers, USER_HEADER) or "").strip()
        if user:
            return {"identity": user[:200], "permissions": [HEADER_MARK]}
        return {"identity": "default", "permissions": [DEV_MARK]}
    header = _header(headers, b"authorization")
    if header is None:
        raise Unauthenticated("missing or unreadable Authorization header; send 'Authorization: Bearer <token>'")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("malformed Authorization header; send 'Authorization: Bearer <token>'")
    presented = token.strip().encode("utf-8")
    for known, who in tokens.items():
        if hmac.compare_digest(presented, known):
            marks = [TOKEN_MARK, *(ROLE_PREFIX + r for r in who["roles"])]
            marks += [GROUP_PREFIX + g for g in who["groups"]]
            return {"identity": who["user"], "permissions": marks}
    raise Unauthenticated("unknown bearer token")


@auth.authenticate
async def authenticate(headers: dict[bytes, bytes]) -> Auth.types.MinimalUserDict:
    try:
        return identify(headers)
    except Unauthenticated as exc:
        raise Auth.exceptions.HTTPException(status_code=401, detail=str(exc)) from None


def _owner(ctx: Auth.types.AuthContext) -> str:
    return str(ctx.user.identity)


def _stamp_and_filter(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Stamp a new resource with its owner; filter every access by it (Studio's user is no exception)."""
    owner = _owner(ctx)
    if isinstance(value, dict):
        metadata = value.setdefault("metadata", {})
        if metadata is None:
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata["owner"] = owner  # in place: the server keeps a reference to this dict
    return {"owner": owner}


def _check_run_payload(ctx: Auth.types.AuthContext, context: Any, configurable: Any) -> None:
    """Refuse a run whose context or configurable sets anything but the caller's knobs, within the caps."""
    settings = Settings.current()
    authenticated = TOKEN_MARK in ctx.permissions or HEADER_MARK in ctx.permissions
    for where, values in (("context", context), ("config.configurable", configurable or None)):
        if values is None:
            continue
        try:
            checked = check_run_values(values, settings, configurable=True)
        except ForbiddenSettingError as exc:
            raise Auth.exceptions.HTTPException(status_code=403, detail=f"{where}: {exc}") from None
        except ConfigError as exc:
            raise Auth.exceptions.HTTPException(status_code=422, detail=f"{where}: {exc}") from None
        if authenticated and checked.get("user_id") not in (None, _owner(ctx)):
            raise Auth.exceptions.HTTPException(
                status_code=403,
                detail=f"{where}: user_id is decided by your credentials ({_owner(ctx)!r}), not by the run",
            )


def refusal(exc: InvalidInputError) -> Auth.exceptions.HTTPException:
    """The status of a refused input or state write: 403 for a channel the caller may not write, 413 for
    too many messages or one too long, else 422."""
    too_large = isinstance(exc, TooManyMessagesError | MessageTooLongError)
    status = 403 if isinstance(exc, ForbiddenStateError) else 413 if too_large else 422
    return Auth.exceptions.HTTPException(status_code=status, detail=str(exc))


def _check_run_input(value: Any, command: Any = None) -> None:
    """Refuse, before the run is queued, input messages that would not coerce (LangGraph saves input before
    coercing it; the thread would stay unreadable), too many of them, and a command that writes anything
    but messages or routes the graph: a resume is the only thing a command may carry besides messages."""
    settings = Settings.current()
    max_messages, max_chars = settings.max_input_messages, settings.max_message_chars
    try:
        check_input(value, max_messages, max_chars=max_chars)
        check_caller_command(command, max_messages, max_chars=max_chars)
    except InvalidInputError as exc:
        raise refusal(exc) from None


def _check_webhook(webhook: Any) -> None:
    """A run's webhook makes the server call a URL the caller chose when the run ends: refused unless its
    host is one the operator lists (``KB_AGENT_WEBHOOK_HOSTS``), whatever the runtime's own policy."""
    if webhook in (None, ""):
        return
    allowed = Settings.current().webhook_host_list
    host = urlsplit(webhook).hostname if isinstance(webhook, str) else None
    if not allowed:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="webhook: this server calls no webhooks (the operator lists hosts in KB_AGENT_WEBHOOK_HOSTS)"
        )
    if host is None or host.lower() not in allowed or urlsplit(webhook).scheme not in ("https", "http"):
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"webhook: {str(host)[:100]!r} is not a host this server calls ({', '.join(allowed)})"
        )


# Keys the server itself puts in a run's configurable before the handlers see it.
_SERVER_KEYS = (
    "langgraph_",
    "__",
    "x-",
    "user-agent",
    "thread_id",
    "checkpoint",
    "run_id",
    "assistant_id",
    "graph_id",
    "cron_id",
)


def _caller_configurable(kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """What the caller put in ``config.configurable`` (the server mirrors the context there too)."""
    config = kwargs.get("config") or {}
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(configurable, dict):
        return None
    return {k: v for k, v in configurable.items() if not str(k).startswith(_SERVER_KEYS)}


@auth.on.threads
async def threads_of_their_owner(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    return _stamp_and_filter(ctx, value)


@auth.on.threads.create_run
async def runs_with_checked_context(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    # langgraph-api nests the run's payload under "kwargs"; Aegra (kb-agent serve) passes it flat.
    kwargs = value.get("kwargs") if isinstance(value.get("kwargs"), dict) else value
    fired = not THROUGH_EDGE.get()
    context = kwargs.get("context")
    if fired and isinstance(context, dict):  # the runtime copied the cron's configurable (cron_id, ...) there
        context = {k: v for k, v in context.items() if not str(k).startswith(_SERVER_KEYS)} or None
    _check_run_payload(ctx, context, _caller_configurable(kwargs))
    _check_run_input(kwargs.get("input"), kwargs.get("command"))
    _check_webhook(kwargs.get("webhook"))
    filters = _stamp_and_filter(ctx, value)
    if fired:
        await _admit_fired_run(_owner(ctx), value)
    return filters


async def _admit_fired_run(owner: str, value: dict[str, Any]) -> None:
    """A run the runtime starts on its own (a cron's) counts against its owner's runs in flight, like one
    they asked for: it starts in a free slot, while they hold a token, or not at all (this firing is skipped,
    and the log says why). Without tokens nobody is told apart, as at the edge."""
    if not tokens_configured():
        return
    cron = _cron_of(value)
    try:
        holds = held_by(owner) is not None
    except (OSError, ValueError):  # a token table that cannot be read: nobody is let in, no cron fires
        holds = False
    if not holds:
        log.warning("scheduled run of %r (cron %s) not started: they hold no token any more", owner, cron)
        raise Auth.exceptions.HTTPException(status_code=403, detail=f"{owner!r} holds no token any more")
    limits, limit = process_limits(), Settings.current().runs_per_user
    if not await limits.admit(owner, limit):
        detail = (
            f"{owner!r} has {limits.in_flight(owner)} runs in flight, the most allowed (runs_per_user={limit}); "
            f"this firing of cron {cron} is skipped, the next one starts if a slot is free"
        )
        log.warning("scheduled run not started: %s", detail)
        raise Auth.exceptions.HTTPException(status_code=429, detail=detail)
    thread_id = value.get("thread_id")
    run_id = str(value.get("run_id"))
    metadata = value.get("metadata")
    if isinstance(metadata, dict):
        metadata[FIRED_RUN] = run_id  # in place, like the owner: a new thread carries it
    limits.track(owner, [_fired_run_alive(limits, owner, str(thread_id) if thread_id else None, run_id)])
    limits.release(owner, 1)


def _cron_of(value: dict[str, Any]) -> str:
    kwargs: Any = value.get("kwargs") if isinstance(value.get("kwargs"), dict) else value
    config = kwargs.get("config")
    configurable = config.get("configurable") if isinstance(config, dict) else None
    return str(configurable.get("cron_id") or "?") if isinstance(configurable, dict) else "?"


def _fired_run_alive(limits: CallerLimits, owner: str, thread_id: str | None, run_id: str) -> Alive:
    """Whether a fired run is still pending or running, asked of the runtime as its owner (with a token of
    theirs: nothing is asked that the owner could not ask). A run of a cron without a thread is found by
    the mark its new thread carries; one not found yet counts for a second (it is being created)."""
    born = time.monotonic()

    async def alive() -> bool:
        token = next((t.decode() for t, who in token_table().items() if who["user"] == owner), None)
        if token is None or limits.ask is None:
            return False  # the run does not run for an owner without a token
        headers = {"authorization": f"Bearer {token}"}
        thread = thread_id
        if thread is None:
            status, found = await limits.ask(headers, "/threads/search", "POST", {"metadata": {FIRED_RUN: run_id}, "limit": 1})
            if status == 200 and isinstance(found, list) and found and isinstance(found[0], dict):
                thread = str(found[0].get("thread_id"))
            else:
                return time.monotonic() - born < NOT_YET_CREATED
        status, run = await limits.ask(headers, f"/threads/{thread}/runs/{run_id}", "GET", None)
        if status == 404:
            return time.monotonic() - born < NOT_YET_CREATED
        return status == 200 and isinstance(run, dict) and run.get("status") in ("pending", "running")

    return alive


@auth.on.crons
async def crons_of_their_owner(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
    """Crons are their owner's; an administrator may also find and delete anyone's (say, a cron whose owner
    lost their token, which no longer runs). Each fired run acts with the owner's rights at that time."""
    if ctx.action in ("read", "search", "delete") and _may(ctx, CRONS_PERMISSION):
        CRON_ADMIN.set(True)
        return None
    payload = value.get("payload") if isinstance(value, dict) else None
    if not isinstance(payload, dict) and isinstance(value, dict):
        payload = value  # Aegra passes a cron's run fields flat, langgraph-api under "payload"
    if isinstance(payload, dict):
        _check_run_payload(ctx, payload.get("context"), _caller_configurable(payload))
        _check_run_input(payload.get("input"), payload.get("command"))
        _check_webhook(payload.get("webhook") or (value.get("webhook") if isinstance(value, dict) else None))
    return _stamp_and_filter(ctx, value)


def _may(ctx: Auth.types.AuthContext, permission: str) -> bool:
    settings = Settings.current()
    roles = [p.removeprefix(ROLE_PREFIX) for p in ctx.permissions if p.startswith(ROLE_PREFIX)]
    grant = resolve_grant(
        user_id=_owner(ctx),
        roles=roles,
        default_roles=settings.default_roles,
        user_roles_json=settings.user_roles,
        role_permissions_json=settings.role_permissions,
    )
    return grant.allows(permission)


@auth.on.assistants
async def assistants_by_admins(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Anyone may read and search assistants; creating, changing or deleting one is for admins."""
    if ctx.action in ("read", "search"):
        return None
    if not _may(ctx, ASSISTANTS_PERMISSION):
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"only an administrator may {ctx.action} assistants"
        )
    return None


@auth.on.store()
async def store_items_of_their_owner(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Store items live under ``(<user id>, ...)``: nobody reads or writes another user's namespace."""
    namespace = tuple(value.get("namespace") or ()) if isinstance(value, dict) else ()
    if not namespace or str(namespace[0]) != _owner(ctx):
        raise Auth.exceptions.HTTPException(
            status_code=403,
            detail=f"store namespaces must start with your user id ({_owner(ctx)!r})",
        )
    return None
