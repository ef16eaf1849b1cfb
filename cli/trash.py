"""``kb-agent trash``: deleted documents, kept ``KB_AGENT_TRASH_DAYS`` days; list, restore, purge."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from cli.terminal import Terminal, json_text, shown, shown_name

trash_app = typer.Typer(help="Deleted documents: list, restore, purge.", no_args_is_help=True)
out = Terminal()
err = Terminal(stderr=True)

if TYPE_CHECKING:
    from stores.knowledge.knowledge_base import KnowledgeBase


def _kb() -> KnowledgeBase:
    from graph.services import open_knowledge_base
    from nodes.settings import Settings

    kb = open_knowledge_base(Settings())
    if kb is None:
        err.print("[red]error:[/red] the knowledge base is empty: nothing was ever ingested or deleted")
        raise typer.Exit(1)
    return kb


@trash_app.command("list")
def list_trash(as_json: bool = typer.Option(False, "--json")) -> None:
    """Deleted documents that can still be restored, newest first."""
    items = _kb().trash.items()
    if as_json:
        typer.echo(json_text([i.as_dict() for i in items]))
        return
    if not items:
        out.print("the trash is empty")
        return
    table = Table("id", "deleted", "document", "chunks", "groups")
    for i in items:
        table.add_row(str(i.id), i.deleted_at, shown_name(i.source), str(i.chunks), shown(", ".join(i.groups)))
    out.print(table)


@trash_app.command("restore")
def restore_document(trash_id: int = typer.Argument(..., help="The id `trash list` shows.")) -> None:
    """Put a deleted document back: searchable again in both retrievers, without re-embedding."""
    from stores.knowledge.trash import TrashError

    try:
        record = _kb().restore(trash_id)
    except TrashError as exc:
        err.print(f"[red]error:[/red] {shown(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(f"restored {shown_name(record.source)} ({len(record.chunk_ids)} chunks)")


@trash_app.command("purge")
def purge(
    trash_id: int | None = typer.Argument(None, help="One id; without it, what is older than KB_AGENT_TRASH_DAYS."),
    everything: bool = typer.Option(False, "--all", help="Empty the whole trash."),
) -> None:
    """Delete for good."""
    removed = _kb().trash.purge(trash_id, everything=everything)
    if trash_id is not None and not everything and not removed:
        err.print(f"[red]error:[/red] nothing in the trash has id {trash_id} (kb-agent trash list)", soft_wrap=True)
        raise typer.Exit(2)
    out.print(f"{removed} document(s) deleted for good")
