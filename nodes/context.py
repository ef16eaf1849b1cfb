"""What one run's caller may choose (the graph's ``context_schema``), and how a run's settings are decided.

A LangGraph server hands every field of a run's ``context`` to the graph, and any HTTP caller can send one.
So ``Context`` holds only per-run knobs that cannot reach a secret, a path, a URL or someone else's data,
each checked against the deployment's caps (``nodes.settings.Settings``): a caller may lower a budget,
never raise it. Anything else in a run's context is refused with a ``ConfigError`` that names the key.

Identity (user, roles, document groups) comes from the server's authenticated user
(``runtime.server_info.user``, set by every LangGraph-compatible runtime), never from the run. The
in-process developer is trusted: ``graph.invoke(..., context=Settings(...))`` sets everything, and
``build_graph(settings=...)`` fixes a graph's deployment.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langgraph.config import get_config
from langgraph.runtime import Runtime

from nodes.settings import ENV_PREFIX, OFFLINE_MODEL, ConfigError, Settings
from nodes.tokens import held_by, tokens_configured
from tools.permissions import user_groups

__all__ = [
    "OFFLINE_MODEL",
    "ConfigError",
    "Context",
    "ForbiddenSettingError",
    "Identity",
    "RunContext",
    "check_run_values",
    "context_schema",
    "resolve_run",
    "run_settings",
]

# Marks in the authenticated user's permissions, written by graph/auth.py.
TOKEN_MARK = "kb-auth:token"  # authenticated by a bearer token: user, roles and groups come from it
HEADER_MARK = "kb-auth:header"  # development, no tokens: the user named in the x-kb-user header
DEV_MARK = "kb-auth:anonymous"  # development, no tokens, no header: the run may name its user
ROLE_PREFIX = "role:"
GROUP_PREFIX = "group:"

MAX_TEXT = 200  # longest string a caller may send in a knob (model names, time zones, user ids)
# Keys a LangGraph client may put in ``config.configurable``; the server mirrors them into the context.
LANGGRAPH_KEYS = frozenset({"thread_id", "checkpoint_id", "checkpoint_ns"})
# Knobs a caller may only lower (the deployment's value is the cap).
LOWER_ONLY = ("max_rounds", "max_tool_calls", "max_tokens", "max_seconds", "tool_timeout")


class ForbiddenSettingError(ConfigError):
    """A run tried to set what only the operator may set (a URL, a path, a role, a group, a key name…)."""


def _knob(description: str) -> Any:
    return field(default=None, metadata={"description": description})


@dataclass(kw_only=True, init=False)
class Context:
    """Per-run choices a caller may make; every field left empty takes the deployment's value."""

    model: str | None = _knob(
        "Chat model for this run: the configured one, 'offline', or one the operator allows."
    )
    temperature: float | None = _knob("Sampling temperature (0–2).")
    max_rounds: int | None = _knob("Model calls this turn (at most the deployment's).")
    max_tool_calls: int | None = _knob("Tool calls this turn (at most the deployment's).")
    max_tokens: int | None = _knob("Model tokens this turn (at most the deployment's).")
    max_seconds: float | None = _knob("Wall time of this turn in seconds (at most the deployment's).")
    tool_timeout: float | None = _knob("Seconds one tool call may take (at most the deployment's).")
    top_k: int | None = _knob("Passages given to the model per search (at most the deployment's max_top_k).")
    timezone: str | None = _knob("IANA time zone for dates, e.g. Asia/Shanghai.")
    rewrite_query: bool | None = _knob("Rewrite follow-up questions into standalone queries.")
    decompose_query: bool | None = _knob("Split complex questions into sub-queries.")
    cross_language: bool | None = _knob(
        "Also search the question in the knowledge base's other language (one model call; off saves it)."
    )
    user_id: str | None = _knob(
        "Who is asking, for in-process runs and unauthenticated development servers; a token decides it otherwise."
    )

    def __init__(self, **values: Any) -> None:
        checked = check_run_values(values)
        for f in fields(self):
            setattr(self, f.name, checked.get(f.name))

    def chosen(self) -> dict[str, Any]:
        """The knobs this run set (the rest take the deployment's values)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


def context_schema(deployment: Settings) -> type[Context]:
    """The graph's ``context_schema`` for ``deployment``: :class:`Context` whose values are also held to the
    deployment's caps. LangGraph builds it from a run's ``context`` before the first step, so a run a caller
    may not make is refused before anything of it is written; its JSON schema is Context's own."""

    def __init__(self: Context, **values: Any) -> None:
        Context.__init__(self, **values)
        _check_caps(self.chosen(), deployment)

    return type("Context", (Context,), {"__init__": __init__, "__module__": __name__, "__doc__": Context.__doc__})


_KNOBS = {f.name: f for f in fields(Context)}
_KNOB_TYPES = {
    "model": str,
    "timezone": str,
    "user_id": str,
    "temperature": float,
    "max_seconds": float,
    "tool_timeout": float,
    "max_rounds": int,
    "max_tool_calls": int,
    "max_tokens": int,
    "top_k": int,
    "rewrite_query": bool,
    "decompose_query": bool,
    "cross_language": bool,
}
_OPERATOR_ONLY = set(Settings.model_fields) - set(_KNOBS)


def _refuse_unknown(key: str) -> ConfigError:
    if key in _OPERATOR_ONLY or key in {"api_key", "roles", "groups"}:
        env = ENV_PREFIX + ("HOME" if key == "data_dir" else key.upper())
        return ForbiddenSettingError(
            f"{key!r} is a deployment setting ({env}) that only the operator may set; a run's context may set "
            f"only: {', '.join(_KNOBS)}"
        )
    return ConfigError(
        f"{str(key)[:60]!r} is not a run setting; a run's context may set only: {', '.join(_KNOBS)}"
    )


def _check_value(key: str, value: Any) -> Any:
    typ = _KNOB_TYPES[key]
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r:.60}")
        return value
    if typ is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {type(value).__name__}")
        if len(value) > MAX_TEXT:
            raise ConfigError(f"{key} is {len(value)} characters long; at most {MAX_TEXT} are accepted")
        value = value.strip()
        if key == "timezone" and value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ConfigError(
                    f"timezone {value!r} is not an IANA time zone (e.g. Asia/Shanghai)"
                ) from None
        return value or None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key} must be a number, got {value!r:.60}")
    if typ is int:
        if value != int(value):
            raise ConfigError(f"{key} must be a whole number, got {value!r}")
        value = int(value)
        if value < 1:
            raise ConfigError(f"{key} must be at least 1, got {value}")
        return value
    value = float(value)
    if key == "temperature":
        if not 0 <= value <= 2:
            raise ConfigError(f"temperature must be between 0 and 2, got {value}")
    elif value <= 0:
        raise ConfigError(f"{key} must be positive, got {value}")
    return value


def check_run_values(
    values: Any, settings: Settings | None = None, *, configurable: bool = False
) -> dict[str, Any]:
    """Validate what a run's caller sent; with ``settings``, also hold it to the deployment's caps.

    ``configurable=True`` tolerates LangGraph's own keys (``thread_id``…), which clients put there. Raises
    ``ConfigError`` (``ForbiddenSettingError`` for operator-only keys) naming the first offending key.
    """
    if not isinstance(values, Mapping):
        raise ConfigError(f"a run's context must be an object of settings, got {type(values).__name__}")
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if configurable and key in LANGGRAPH_KEYS:
            continue
        if not isinstance(key, str) or key not in _KNOBS:
            raise _refuse_unknown(key)
        if value is None:
            continue
        checked[key] = _check_value(key, value)
    if settings is not None:
        _check_caps(checked, settings)
    return checked


def _check_caps(values: Mapping[str, Any], settings: Settings) -> None:
    for key in LOWER_ONLY:
        if key in values and values[key] > getattr(settings, key):
            raise ConfigError(
                f"{key}={values[key]} is above this deployment's limit of {getattr(settings, key)}; "
                "a run may only lower it"
            )
    if "top_k" in values and values["top_k"] > settings.max_top_k:
        raise ConfigError(f"top_k={values['top_k']} is above this deployment's limit of {settings.max_top_k}")
    if "model" in values and not settings.allows_model(values["model"]):
        raise ConfigError(
            f"model {values['model']!r} is not offered by this deployment; ask the operator to add it to "
            f"{ENV_PREFIX}ALLOWED_MODELS"
        )


@dataclass(frozen=True)
class Identity:
    """Who a server says is calling: their id and the roles and groups their credentials carry."""

    user_id: str
    roles: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    authenticated: bool = True  # False: a development server without tokens (the run may name its user)
    named_by_header: bool = False
    by_token: bool = False  # the rights came from a bearer token (else the runtime named the user alone: a cron)


def _attribute(user: Any, name: str) -> Any:
    value = getattr(user, name, None)
    if value is None:
        try:
            value = user[name]
        except (KeyError, TypeError, IndexError):
            return None
    return value


def server_identity(runtime: Runtime[Any] | None) -> Identity | None:
    """The authenticated user of a server run (``runtime.server_info.user``), None in-process."""
    info = getattr(runtime, "server_info", None) if runtime is not None else None
    user = getattr(info, "user", None) if info is not None else None
    if user is not None:
        return identity_of(user, {})
    try:  # a runtime that sets only langgraph-api's configurable keys
        configurable = get_config().get("configurable", {})
    except RuntimeError:
        return None
    return identity_of(None, configurable)


def identity_of(user: Any, configurable: Mapping[str, Any]) -> Identity | None:
    """The identity a server authenticated: its user object, else langgraph-api's configurable keys."""
    if user is not None:
        identity = _attribute(user, "identity")
        permissions = _attribute(user, "permissions") or ()
    else:
        identity = configurable.get("langgraph_auth_user_id")
        permissions = configurable.get("langgraph_auth_permissions") or ()
    if not identity:
        return None
    marks = tuple(str(p) for p in permissions)
    return Identity(
        user_id=str(identity),
        roles=tuple(m.removeprefix(ROLE_PREFIX) for m in marks if m.startswith(ROLE_PREFIX)),
        groups=tuple(m.removeprefix(GROUP_PREFIX) for m in marks if m.startswith(GROUP_PREFIX)),
        authenticated=DEV_MARK not in marks,
        named_by_header=HEADER_MARK in marks,
        by_token=TOKEN_MARK in marks,
    )


def rights_now(who: Identity) -> Identity:
    """``who`` with the rights their tokens grant *now*, on a deployment with tokens.

    A run's identity was captured when it was requested; a cron's, when the cron was created (or, on a
    runtime that fires crons as a bare user id, not at all). So a run keeps only the roles and groups the
    user still holds, takes those every token of theirs grants when the runtime named the user alone, and
    does not run once they hold no token.
    """
    if not tokens_configured():
        return who
    held = held_by(who.user_id)
    if held is None:
        raise ForbiddenSettingError(
            f"{who.user_id!r} holds no token any more: runs on their behalf (say, a scheduled one) do not run"
        )
    if who.by_token:
        roles = tuple(r for r in who.roles if r in held.any_role)
        groups = tuple(g for g in who.groups if g in held.any_group)
    else:
        roles, groups = tuple(sorted(held.every_role)), tuple(sorted(held.every_group))
    if (roles, groups) == (who.roles, who.groups):
        return who
    return dataclasses.replace(who, roles=roles, groups=groups)


def _configured_user() -> str | None:
    try:
        user = get_config().get("configurable", {}).get("user_id")
    except RuntimeError:  # called outside a run
        return None
    return str(user) if user else None


@dataclass(frozen=True)
class RunContext:
    """One run's settings once resolved: the deployment's within the caller's checked knobs, with the
    caller's identity applied (user, roles, groups). Never built from a caller's input alone."""

    settings: Settings

    @property
    def user_id(self) -> str:
        return self.settings.user_id


def resolve_run(
    context: Any, configurable: Mapping[str, Any], deployment: Settings | None = None, user: Any = None
) -> RunContext:
    """Resolve and check a run's ``context`` once: ``configurable`` is the run's config (the in-process
    caller's ``user_id``; a server's authenticated user under ``langgraph_auth_user``, or ``user``)."""
    if isinstance(context, RunContext):
        return context
    user = user if user is not None else configurable.get("langgraph_auth_user")
    if user is not None and _attribute(user, "identity") is None:
        user = None
    who = identity_of(user, configurable)
    configured = configurable.get("user_id")
    return RunContext(_resolve(context, deployment, who, str(configured) if configured else None))


def run_settings(runtime: Runtime[Any] | None, deployment: Settings | None = None) -> Settings:
    """The settings one run works with: the deployment, the caller's checked knobs, the caller's identity
    (a server's authenticated user, else the in-process caller's ``user_id``).

    Every node asks; the work is done once per (deployment, knobs, identity) and kept, so all the nodes of
    a run read the same object. A ``Settings`` object as the run's context comes from in-process code and
    is taken whole.
    """
    context = runtime.context if runtime is not None else None
    if isinstance(context, RunContext):
        return context.settings
    return _resolve(context, deployment, server_identity(runtime), _configured_user())


def _resolve(context: Any, deployment: Settings | None, who: Identity | None, configured_user: str | None) -> Settings:
    base = deployment if deployment is not None else Settings.current()
    if isinstance(context, Settings):
        base, knobs = context, {}
    elif isinstance(context, Context):
        knobs = context.chosen()
    elif context is None:
        knobs = {}
    else:
        knobs = check_run_values(context)
    if who is None:
        return _in_process(base, tuple(sorted(knobs.items())), configured_user)
    if who.authenticated and not who.named_by_header:
        who = rights_now(who)
    if knobs.get("user_id") and who.authenticated and knobs["user_id"] != who.user_id:
        raise ForbiddenSettingError(
            f"user_id is decided by the caller's credentials ({who.user_id!r}), not by the run"
        )
    return _for_server_user(base, tuple(sorted(knobs.items())), who)


def _checked(base: Settings, knobs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    values = dict(knobs)
    _check_caps(values, base)
    return values


@functools.lru_cache(maxsize=512)
def _in_process(base: Settings, knobs: tuple[tuple[str, Any], ...], configured_user: str | None) -> Settings:
    """Every node resolves the same run's settings: done once per (deployment, knobs, user)."""
    values = _checked(base, knobs)
    user = values.pop("user_id", None) or configured_user or base.user_id
    extra = user_groups(base.user_groups).get(user, ())
    groups = ",".join(dict.fromkeys([*base.group_list[1:], *extra])) if extra else base.groups
    return _replace(base, values, user_id=user, groups=groups)


@functools.lru_cache(maxsize=512)
def _for_server_user(base: Settings, knobs: tuple[tuple[str, Any], ...], who: Identity) -> Settings:
    values = _checked(base, knobs)
    user = who.user_id
    if not who.authenticated:  # development without tokens: nothing is verified anyway
        user = values.get("user_id") or _configured_user() or user
    values.pop("user_id", None)
    groups = who.groups or user_groups(base.user_groups).get(user, ())
    # Roles and groups of the in-process operator (KB_AGENT_ROLES/GROUPS) never reach a server caller.
    return _replace(base, values, user_id=user, roles=",".join(who.roles), groups=",".join(groups))


def _replace(base: Settings, values: dict[str, Any], **identity: Any) -> Settings:
    changes = {k: v for k, v in {**values, **identity}.items() if getattr(base, k) != v}
    if not changes:
        return base
    resolved = base.replace(**changes)
    return resolved
