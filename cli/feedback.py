"""``kb-agent feedback report``: the answers users rated bad, with what they cited and why."""

from __future__ import annotations

from typing import TypedDict

import typer
from rich.table import Table

from cli.terminal import Terminal, json_text, shown, shown_name

feedback_app = typer.Typer(help="What users said about answers.", no_args_is_help=True)
out = Terminal()


class BadAnswer(TypedDict):
    """One answer rated bad, as the report prints it (and its JSON holds it)."""

    id: int
    at: str
    user: str
    thread: str | None
    question: str | None
    passages: list[str]
    reason: str | None


@feedback_app.command("report")
def report(
    limit: int = typer.Option(50, "--limit", "-n", min=1, max=10_000, help="Most recent bad ratings shown."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Answers rated bad, newest first: question, cited passages, reason; and the chunks now down-weighted."""
    from graph.services import feedback_store
    from nodes.settings import Settings
    ctx = Settings()
    store = feedback_store(ctx)
    bad = store.list(rating="bad", limit=limit)
    penalised = store.bad_citations(ctx.feedback_min_bad, ctx.feedback_min_users)
    rows: list[BadAnswer] = [
        {
            "id": r.id,
            "at": r.created_at,
            "user": r.user_id,
            "thread": r.thread_id,
            "question": r.question,
            "passages": list(r.cited or ()),  # as the agent recorded them; () for text it did not give
            "reason": r.reason,
        }
        for r in bad
    ]
    if as_json:
        typer.echo(json_text({"bad": rows, "down_weighted": penalised}))
        return
    if not rows:
        out.print("no answers rated bad")
        return
    table = Table("id", "when", "user", "question", "cited passages", "reason")
    for row in rows:
        table.add_row(
            str(row["id"]),
            row["at"],
            shown(row["user"]),
            shown((row["question"] or "")[:80]),
            shown_name(", ".join(row["passages"]) or "-"),
            shown(row["reason"] or ""),
        )
    out.print(table)
    if penalised:
        factor = ctx.feedback_penalty
        listed = ", ".join(f"{cid} ({n}×)" for cid, n in sorted(penalised.items(), key=lambda kv: -kv[1]))
        out.print(f"down-weighted in retrieval (score × {factor:g}): {shown(listed)}")
