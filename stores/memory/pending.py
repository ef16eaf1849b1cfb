"""High-risk memories waiting for the user: held in the audit history, never in the store,
so nothing pending is recalled. Confirming applies the change as the user's own; dropping forgets it.

A pending entry is an audit row with status ``pending``; its resolution is a later row (action CONFIRM or
DROP) whose ``memory_id`` is ``pending:<that row's id>``.
"""

from __future__ import annotations

from typing import Any

from stores.audit import AuditEntry

RESOLVED_PREFIX = "pending:"


class PendingMemoryError(LookupError):
    """No pending memory of this user has that id (already confirmed or dropped, or another user's)."""


def pending(store: Any, user_id: str) -> list[AuditEntry]:
    """This user's memories still waiting for confirmation, oldest first."""
    held = store.audit.list(user_id=user_id, status="pending", limit=1000)
    done = {
        e.memory_id
        for e in store.audit.list(user_id=user_id, limit=10_000)
        if e.memory_id and e.memory_id.startswith(RESOLVED_PREFIX)
    }
    return [e for e in reversed(held) if f"{RESOLVED_PREFIX}{e.id}" not in done]


def _find(store: Any, user_id: str, pending_id: int) -> AuditEntry:
    for entry in pending(store, user_id):
        if entry.id == pending_id:
            return entry
    raise PendingMemoryError(
        f"no pending memory {pending_id} for user {user_id!r} (kb-agent memories pending)"
    )


def confirm(store: Any, user_id: str, pending_id: int) -> AuditEntry:
    """Apply the held change as the user's explicit request (the same rules run); returns its audit entry."""
    held = _find(store, user_id, pending_id)
    applied = store.manage(
        user_id,
        held.action,
        content=held.new_content,
        memory_type=held.memory_type,
        memory_id=held.memory_id,
        thread_id=held.thread_id,
        source="cli",
    )
    store.audit.record(
        AuditEntry(
            user_id=user_id,
            action="CONFIRM",
            status=applied.status,
            source="cli",
            memory_id=f"{RESOLVED_PREFIX}{pending_id}",
            memory_type=held.memory_type,
            new_content=held.new_content,
            reason=f"confirmed by the user; the change is audit entry {applied.id}",
        )
    )
    return applied


def drop(store: Any, user_id: str, pending_id: int) -> AuditEntry:
    """Forget a held change without applying it."""
    held = _find(store, user_id, pending_id)
    entry = AuditEntry(
        user_id=user_id,
        action="DROP",
        status="dropped",
        source="cli",
        memory_id=f"{RESOLVED_PREFIX}{pending_id}",
        memory_type=held.memory_type,
        reason="dropped by the user",
    )
    return entry.__class__(**{**entry.as_dict(), "id": store.audit.record(entry)})
