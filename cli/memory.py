"""``kb-agent memories list|search|add|edit|delete|audit --user U [--json]``: users manage their memories.

``list`` shows what holds about the user (facts, preferences, rules, events) first and the interaction
history (questions they asked) in a section of its own; ``--json`` marks each memory's ``kind``.

Every command is scoped to ``--user`` (default ``KB_AGENT_USER_ID``) at the storage layer, and every
change goes through the same rules and audit history as extraction (source "cli"): a rejected change is
one line on stderr with the rule that refused it, and exit code 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.table import Column, Table

from cli.terminal import Terminal, json_text, shown
from stores.base import MEMORY_TYPES, MemoryRecord

if TYPE_CHECKING:
    from stores.audit import AuditEntry
    from stores.memory.store import ChromaMemoryStore

memories = typer.Typer(
    no_args_is_help=True, help="List, search, add, correct and delete a user's long-term memories."
)
out = Terminal()
err = Terminal(stderr=True)

UserOption = typer.Option(None, "--user", "-u", help="Whose memories (default: KB_AGENT_USER_ID).")
JsonOption = typer.Option(False, "--json", help="Print JSON.")


def _fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {shown(message)}", soft_wrap=True)
    raise typer.Exit(code)


def _open(user: str | None) -> tuple[ChromaMemoryStore, str]:
    from graph.services import memory_store
    from nodes.settings import ConfigError, Settings

    try:
        ctx = Settings()
        if user is not None:
            if not user.strip():
                _fail("--user is empty: name the user whose memories to manage", 2)
            ctx = ctx.replace(user_id=user.strip())
        return memory_store(ctx), ctx.user_id
    except (ConfigError, ValueError) as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


_ID_CAPTION = "ids shortened: edit and delete take them as shown; --json gives them whole"
SHORT_ID = 12  # characters of a memory id in tables ("mem_" and 8 more; more when needed to tell two apart)


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least ``SHORT_ID`` characters that no other of ``ids`` starts with."""
    shown_as: dict[str, str] = {}
    for one in ids:
        size = SHORT_ID
        while size < len(one) and any(other != one and other.startswith(one[:size]) for other in ids):
            size += 1
        shown_as[one] = one[:size]
    return shown_as


def shown_ids(ids: list[str]) -> tuple[dict[str, str], str | None]:
    """How a table shows ``ids``, and its caption: short unique prefixes on a terminal (the table must fit),
    whole ids when the output goes to a file or another program, which may pass them on."""
    if not out.is_terminal:
        return {one: one for one in ids}, None
    return short_ids(ids), _ID_CAPTION


def _id_column(shown_as: dict[str, str], header: str = "id") -> Column:
    """An id column never cut nor wrapped: the other columns give way, since an id is copied to be used."""
    return Column(header, no_wrap=True, min_width=max(map(len, shown_as.values()), default=len(header)))


def _resolve(store: ChromaMemoryStore, user_id: str, given: str) -> str:
    """The id ``given`` names: itself, or the one id of this user's memories it is the start of (as
    tables show them); an unknown id is returned as is, for the store's own answer."""
    given = given.strip()
    ids = [m["id"] for m in store.list(user_id, include_expired=True)]
    if given in ids or len(given) < 4:
        return given
    matches = [one for one in ids if one.startswith(given)]
    if len(matches) > 1:
        _fail(f"{given!r} is the start of {len(matches)} memory ids: give more of it", 2)
    return matches[0] if matches else given


def _kinded(records: list[MemoryRecord]) -> list[dict[str, Any]]:
    """Each record with its ``kind``: "fact" (what holds about the user) or "history" (what they asked)."""
    from stores.memory.history import memory_kind

    return [{**m, "kind": memory_kind(m)} for m in records]


def _table(records: list[dict[str, Any]], short: dict[str, str], caption: str | None) -> Table:
    table = Table(_id_column(short), "type", "content", "updated", "expires", caption=caption)
    for m in records:
        table.add_row(
            short[m.get("id", "")],
            m.get("memory_type", ""),
            shown(m.get("content", "")),
            (m.get("updated_at") or "")[:19],
            (m.get("expires_at") or "")[:19],
        )
    return table


def _show(records: list[MemoryRecord], as_json: bool) -> None:
    """Memories in the order given (a search's, by relevance), each marked with its kind in JSON."""
    if as_json:
        typer.echo(json_text(_kinded(records)))
        return
    if not records:
        out.print("[dim]no memories[/dim]")
        return
    short, caption = shown_ids([m.get("id", "") for m in records])
    out.print(_table(_kinded(records), short, caption))


def _show_apart(records: list[MemoryRecord], as_json: bool) -> None:
    """Facts and preferences first, then the interaction history (the questions the user asked) in a
    section of its own: a list of "The user asked: …" must not bury what is known about the user."""
    kinded = _kinded(records)
    facts = [m for m in kinded if m["kind"] == "fact"]
    history = [m for m in kinded if m["kind"] == "history"]
    if as_json:
        typer.echo(json_text(facts + history))
        return
    if not kinded:
        out.print("[dim]no memories[/dim]")
        return
    short, caption = shown_ids([m.get("id", "") for m in kinded])
    out.print("[bold]Facts and preferences[/bold]")
    out.print(_table(facts, short, None) if facts else "[dim]no facts or preferences[/dim]")
    if history:
        out.print("[bold]Interaction history[/bold] [dim](questions you asked; they expire)[/dim]")
        out.print(_table(history, short, None))
    if caption:
        out.print(f"[dim]{caption}[/dim]")


def _report(entry: AuditEntry, as_json: bool, done: str) -> None:
    if entry.status == "rejected":
        if as_json:
            typer.echo(json_text(entry.as_dict()))
        _fail(f"{entry.action} rejected (rule {entry.rule}): {entry.reason}")
    if as_json:
        typer.echo(json_text(entry.as_dict()))
        return
    note = " (already remembered)" if entry.status == "unchanged" else ""
    out.print(f"{done} {entry.memory_id}{note}")


@memories.command("list")
def list_memories(
    user: str | None = UserOption,
    include_expired: bool = typer.Option(False, "--all", help="Include expired memories."),
    limit: int = typer.Option(100, "--limit", "-n", min=1),
    as_json: bool = JsonOption,
) -> None:
    """This user's memories, newest first: facts and preferences, then the questions they asked."""
    store, user_id = _open(user)
    _show_apart(store.list(user_id, include_expired=include_expired, limit=limit), as_json)


@memories.command("search")
def search_memories(
    query: str = typer.Argument(..., help="What to look for."),
    user: str | None = UserOption,
    k: int = typer.Option(5, "--k", "-k", min=1, max=100),
    as_json: bool = JsonOption,
) -> None:
    """This user's memories most relevant to QUERY (the same hybrid recall the agent uses)."""
    if not query.strip():
        _fail("the query is empty", 2)
    store, user_id = _open(user)
    _show(store.search(user_id, query, k), as_json)


@memories.command("add")
def add_memory(
    content: str = typer.Argument(..., help="One sentence about the user."),
    memory_type: str = typer.Option("semantic", "--type", "-t", help=" | ".join(MEMORY_TYPES)),
    user: str | None = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Add a memory (a duplicate of an existing one is not added twice)."""
    store, user_id = _open(user)
    _report(store.manage(user_id, "ADD", content=content, memory_type=memory_type), as_json, "added")


@memories.command("edit")
def edit_memory(
    memory_id: str = typer.Argument(..., help="The memory's id, whole or as `memories list` shows it."),
    content: str = typer.Argument(..., help="The corrected content."),
    user: str | None = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Correct a memory's content (its type stays)."""
    store, user_id = _open(user)
    memory_id = _resolve(store, user_id, memory_id)
    _report(store.manage(user_id, "UPDATE", content=content, memory_id=memory_id), as_json, "updated")


@memories.command("delete")
def delete_memory(
    memory_id: str = typer.Argument(..., help="The memory's id, whole or as `memories list` shows it."),
    user: str | None = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Delete a memory for good."""
    store, user_id = _open(user)
    memory_id = _resolve(store, user_id, memory_id)
    _report(store.manage(user_id, "DELETE", memory_id=memory_id), as_json, "deleted")


@memories.command("audit")
def audit_history(
    user: str | None = UserOption,
    status: str | None = typer.Option(None, "--status", help="applied | unchanged | rejected"),
    limit: int = typer.Option(50, "--limit", "-n", min=1),
    as_json: bool = JsonOption,
) -> None:
    """What changed in this user's memories and what was refused (with the rule), newest first."""
    store, user_id = _open(user)
    entries = store.audit.list(user_id=user_id, status=status, limit=limit)
    if as_json:
        typer.echo(json_text([e.as_dict() for e in entries]))
        return
    short, _ = shown_ids([e.memory_id for e in entries if e.memory_id])
    table = Table("time", "source", "action", "status", _id_column(short, "memory"), "old → new / reason")
    for e in entries:
        detail: Any = e.reason if e.status == "rejected" else f"{e.old_content or ''} → {e.new_content or ''}"
        if e.rule:
            detail = f"rule {e.rule}: {detail}"
        table.add_row(
            e.created_at[:19],
            e.source,
            e.action,
            e.status,
            short.get(e.memory_id or "", ""),
            shown(str(detail)),
        )
    out.print(table)


@memories.command("pending")
def pending_memories(user: str | None = UserOption, as_json: bool = JsonOption) -> None:
    """High-risk memories (health, finances, identity) waiting for this user's confirm or drop."""
    from stores.memory.pending import pending

    store, user_id = _open(user)
    held = pending(store, user_id)
    if as_json:
        typer.echo(json_text([e.as_dict() for e in held]))
        return
    if not held:
        out.print("[dim]nothing waits for confirmation[/dim]")
        return
    table = Table("id", "time", "action", "type", "content", "why")
    for e in held:
        table.add_row(
            str(e.id),
            e.created_at[:19],
            e.action,
            e.memory_type or "",
            shown(e.new_content or ""),
            shown(e.reason or ""),
        )
    out.print(table)
    out.print("[dim]kb-agent memories confirm ID · kb-agent memories drop ID[/dim]")


def _resolve_pending(action: str, pending_id: int, user: str | None) -> Any:
    """Confirm or drop one pending memory of ``user``; an unknown id is one line and exit 2."""
    from stores.memory import pending

    store, user_id = _open(user)
    try:
        return getattr(pending, action)(store, user_id, pending_id)
    except pending.PendingMemoryError as exc:
        _fail(str(exc), 2)
        raise


@memories.command("confirm")
def confirm_memory(
    pending_id: int = typer.Argument(..., help="The pending memory's id (see `memories pending`)."),
    user: str | None = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Keep a pending memory: it is written as your own request (the rules still apply)."""
    _report(_resolve_pending("confirm", pending_id, user), as_json, "remembered")


@memories.command("drop")
def drop_memory(
    pending_id: int = typer.Argument(..., help="The pending memory's id (see `memories pending`)."),
    user: str | None = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Forget a pending memory without keeping it."""
    entry = _resolve_pending("drop", pending_id, user)
    if as_json:
        typer.echo(json_text(entry.as_dict()))
    else:
        out.print(f"dropped pending memory {pending_id}")


def register(app: typer.Typer) -> None:
    """Add the ``memories`` command group to the main CLI."""
    app.add_typer(memories, name="memories")
