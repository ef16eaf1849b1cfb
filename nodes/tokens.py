"""The server's bearer tokens (``KB_AGENT_API_TOKENS``): who each token is, and what a user holds now.

JSON, inline or a file: ``{"<token>": {"user": "alice", "roles": ["user"], "groups": ["hr"]}}`` or
``{"<token>": "alice"}``. The auth handler reads a request's token here; a run reads here what its user
holds *now*, so a run scheduled earlier (a cron) acts with the owner's current rights, or not at all once
the owner holds no token.
"""

from __future__ import annotations

import contextvars
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOKENS_ENV = "KB_AGENT_API_TOKENS"

# Set for one request whose token the crons auth handler found to carry the right to manage anyone's crons.
# A runtime that looks crons up by their creator (Aegra, behind ``kb-agent serve``) widens that lookup for
# that request only. It lives here, in a module always imported by name, because a runtime may load the
# auth file by its path under another module name.
CRON_ADMIN: contextvars.ContextVar[bool] = contextvars.ContextVar("kb_agent_cron_admin", default=False)


def _names(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{TOKENS_ENV}: {what} must be a list of names")
    return [v.strip() for v in value if v.strip()]


@functools.lru_cache(maxsize=8)
def _parse(text: str) -> dict[bytes, dict[str, Any]]:
    table = json.loads(text) if text.strip() else {}
    if not isinstance(table, dict):
        raise ValueError(f'{TOKENS_ENV} must be a JSON object {{"<token>": {{"user": ..., "roles": [...]}}}}')
    users: dict[bytes, dict[str, Any]] = {}
    for token, who in table.items():
        entry = {"user": who} if isinstance(who, str) else dict(who)
        if not entry.get("user"):
            raise ValueError(f"{TOKENS_ENV}: a token has no user")
        users[str(token).encode("utf-8")] = {
            "user": str(entry["user"]),
            "roles": _names(entry.get("roles"), "roles"),
            "groups": _names(entry.get("groups"), "groups"),
        }
    return users


def token_table(raw: str | None = None) -> dict[bytes, dict[str, Any]]:
    """Token → user, roles, groups; ``raw`` defaults to the environment. A file is re-read when it changes
    (the operator revokes a token by editing it)."""
    text = (os.environ.get(TOKENS_ENV, "") if raw is None else raw).strip()
    if text and not text.startswith("{"):
        text = Path(text).expanduser().read_text(encoding="utf-8")
    return _parse(text)


@dataclass(frozen=True)
class Held:
    """What a user's tokens grant now: ``every_*`` is granted by each of them, ``any_*`` by some."""

    every_role: frozenset[str]
    any_role: frozenset[str]
    every_group: frozenset[str]
    any_group: frozenset[str]


def held_by(user_id: str) -> Held | None:
    """The rights ``user_id``'s tokens grant now; None when they hold none (or no tokens are configured)."""
    entries = [who for who in token_table().values() if who["user"] == user_id]
    if not entries:
        return None
    roles = [frozenset(who["roles"]) for who in entries]
    groups = [frozenset(who["groups"]) for who in entries]
    return Held(frozenset.intersection(*roles), frozenset.union(*roles), frozenset.intersection(*groups), frozenset.union(*groups))


def tokens_configured() -> bool:
    try:
        return bool(token_table())
    except (OSError, ValueError):
        return True  # a table that cannot be read: the auth handler refuses everyone; so do runs
