"""Who may run which tool: roles grant permissions, tools declare the permissions they need.

A tool lists what it needs (``kb:read``, ``kb:admin``, ``feedback:write``, ``mcp:<server>``…); the caller's
roles come from the run context and map to granted patterns (``kb:*``, ``*``). A call runs only when every
permission the tool needs matches a granted pattern. The check happens in the platform before the handler,
so a denied call never reaches the tool, and the model is told plainly that it was denied.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from tools.registry import RunSettings, ToolError, ToolSpec

# Out of the box a user reads the knowledge base, gives feedback, manages their own memories and may use the
# MCP servers the operator configured; only an admin changes the knowledge base.
DEFAULT_ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "user": ("kb:read", "feedback:write", "memory:read", "memory:write", "mcp:*"),
    "reader": ("kb:read",),
    "admin": ("*",),
}


class PermissionDeniedError(ToolError):
    """The caller's roles do not grant what the tool needs; the handler was not called."""


class PermissionConfigError(ValueError):
    """A role or user-role setting that cannot be read; the message names the setting."""


@dataclass(frozen=True)
class Grant:
    """What one caller may do: their roles and the permission patterns those roles grant."""

    roles: tuple[str, ...]
    patterns: tuple[str, ...]

    def allows(self, needed: str) -> bool:
        return any(fnmatchcase(needed, pattern) for pattern in self.patterns)

    def missing(self, spec: ToolSpec) -> list[str]:
        """The permissions ``spec`` needs that this grant lacks (empty: allowed)."""
        return [p for p in spec.permissions if not self.allows(p)]

    def permits(self, spec: ToolSpec) -> bool:
        return not self.missing(spec)

    def check(self, spec: ToolSpec) -> None:
        """Raise :class:`PermissionDeniedError` with a message the model (and the user) can act on."""
        missing = self.missing(spec)
        if missing and self is NOBODY:
            raise PermissionDeniedError(
                f"permission denied: tool {spec.name!r} needs {', '.join(missing)}, and this call has no "
                "resolved caller, so nothing is granted; call it from a run, or pass the caller's grant"
            )
        if missing:
            roles = ", ".join(self.roles) or "none"
            raise PermissionDeniedError(
                f"permission denied: tool {spec.name!r} needs {', '.join(missing)}, which your roles "
                f"({roles}) do not grant; ask an administrator, or answer without this tool"
            )


EVERYTHING = Grant(roles=("admin",), patterns=("*",))  # trusted application code states it explicitly
NOBODY = Grant(roles=(), patterns=())  # no resolved caller: tools that need a permission are refused


def _load_json(raw: str, setting: str) -> Any:
    """A JSON value given inline, or the path of a JSON file."""
    text = raw.strip()
    if not text:
        return None
    if not text.startswith(("{", "[")):
        path = Path(text).expanduser()
        if not path.is_file():
            raise PermissionConfigError(f"{setting}: {text!r} is neither JSON nor an existing JSON file")
        text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PermissionConfigError(
            f"{setting} is not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None


def _names(value: Any, setting: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise PermissionConfigError(f"{setting}: expected a list of names, got {value!r:.80}")
    return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))


@functools.cache
def role_table(raw: str) -> dict[str, tuple[str, ...]]:
    """The role → permissions table: the defaults, with roles from ``raw`` (JSON) added or replaced."""
    table = dict(DEFAULT_ROLE_PERMISSIONS)
    extra = _load_json(raw, "KB_AGENT_ROLE_PERMISSIONS")
    if extra is None:
        return table
    if not isinstance(extra, dict):
        raise PermissionConfigError('KB_AGENT_ROLE_PERMISSIONS must be an object: {"role": ["kb:read", ...]}')
    for role, perms in extra.items():
        table[str(role)] = _names(perms, f"KB_AGENT_ROLE_PERMISSIONS[{role!r}]")
    return table


@functools.cache
def user_roles(raw: str) -> dict[str, tuple[str, ...]]:
    """The user → roles table from ``raw`` (JSON object, inline or a file path)."""
    value = _load_json(raw, "KB_AGENT_USER_ROLES")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PermissionConfigError('KB_AGENT_USER_ROLES must be an object: {"alice": ["admin"], ...}')
    return {str(user): _names(roles, f"KB_AGENT_USER_ROLES[{user!r}]") for user, roles in value.items()}


@functools.cache
def user_groups(raw: str) -> dict[str, tuple[str, ...]]:
    """The user → document groups table from ``raw`` (JSON object, inline or a file path)."""
    value = _load_json(raw, "KB_AGENT_USER_GROUPS")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PermissionConfigError('KB_AGENT_USER_GROUPS must be an object: {"alice": ["hr"], ...}')
    return {str(user): _names(groups, f"KB_AGENT_USER_GROUPS[{user!r}]") for user, groups in value.items()}


def resolve_grant(
    *,
    user_id: str,
    roles: str | Iterable[str] = "",
    default_roles: str | Iterable[str] = "user",
    user_roles_json: str = "",
    role_permissions_json: str = "",
) -> Grant:
    """The caller's grant: explicit ``roles`` for this run, else the user's configured roles, else the defaults.

    Unknown role names grant nothing (a typo must not widen access) but are kept in the message.
    """
    chosen = _names(roles, "KB_AGENT_ROLES") if roles else ()
    if not chosen:
        chosen = user_roles(user_roles_json).get(user_id, ())
    if not chosen:
        chosen = _names(default_roles, "KB_AGENT_DEFAULT_ROLES") if default_roles else ()
    table = role_table(role_permissions_json)
    patterns = tuple(dict.fromkeys(p for role in chosen for p in table.get(role, ())))
    return Grant(roles=chosen, patterns=patterns)


def grant_for(settings: RunSettings | None, user_id: str | None = None) -> Grant:
    """The grant of a run from its settings.

    No settings means no resolved caller, and that grants nothing: a tool reached by a path that forgot
    to say who is calling must fail closed. Application code that embeds the executor and means to act
    with every right passes ``grant=EVERYTHING`` in its ToolContext.
    """
    if settings is None:
        return NOBODY
    return _cached_grant(
        user_id or settings.user_id,
        settings.roles,
        settings.default_roles,
        settings.user_roles,
        settings.role_permissions,
    )


@functools.lru_cache(maxsize=1024)
def _cached_grant(user_id: str, roles: str, default_roles: str, users: str, table: str) -> Grant:
    """Every node asks for the same caller's grant several times a round: resolve it once."""
    return resolve_grant(
        user_id=user_id,
        roles=roles,
        default_roles=default_roles,
        user_roles_json=users,
        role_permissions_json=table,
    )


def describe_roles(table: Mapping[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    """(role, permissions) rows for ``kb-agent tools list`` and the docs."""
    return [(role, ", ".join(perms)) for role, perms in table.items()]
