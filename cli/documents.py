"""``kb-agent documents``: what the knowledge base holds, one line per ingested file (the chat page's
documents area lists the same, for the groups of the person asking)."""

from __future__ import annotations

import typer
from rich.table import Table

from cli.terminal import Terminal, json_text, shown, shown_name

documents_app = typer.Typer(help="The documents in the knowledge base.", no_args_is_help=True)
out = Terminal()


@documents_app.command("list")
def list_documents_command(
    search: str = typer.Option("", "--search", "-s", help="Only documents whose title or file holds these words."),
    groups: str | None = typer.Option(
        None, "--groups", "-g", help="Only what these access groups may read, e.g. hr,eng (default: everything)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """Ingested documents, newest first: title, file, chunks, access groups, when, who added it from the chat
    page ("-": the operator's ingest)."""
    from graph.services import open_knowledge_base
    from nodes.settings import Settings
    from stores.knowledge.listing import list_documents

    kb = open_knowledge_base(Settings())
    wanted = [g.strip() for g in groups.split(",") if g.strip()] if groups is not None else None
    entries = [] if kb is None else list_documents(kb, wanted, search)
    if as_json:
        typer.echo(json_text([e.as_dict() for e in entries]))
        return
    if not entries:
        out.print("no documents" + (" match" if search else " (kb-agent ingest PATH adds some)"))
        return
    table = Table("title", "file", "chunks", "groups", "ingested", "by")
    for e in entries:
        by = shown(e.added_by) if e.added_by else "-"
        table.add_row(shown(e.title), shown_name(e.source), str(e.chunks), shown(", ".join(e.groups)), e.ingested_at, by)
    out.print(table)
