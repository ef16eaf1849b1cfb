"""Knowledge-base commands: ``ingest``, ``stats``, ``search``, ``repair``; ``eval`` is in ``cli.kb_eval``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from cli import signals
from cli.progress import ingest_bar
from cli.terminal import Terminal, json_text, shown, shown_name
from stores.disk import damaged_databases
from stores.faults import store_failure

if TYPE_CHECKING:
    from nodes.settings import Settings

MODES = ("bm25", "vector", "hybrid")
out = Terminal()
err = Terminal(stderr=True)


def _fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {shown(message)}", soft_wrap=True)
    raise typer.Exit(code)


def open_knowledge_base(ctx: Settings, *, create: bool = False) -> Any:
    """The knowledge base, or one line naming the setting when its database or Chroma server is down."""
    from graph.services import open_knowledge_base as open_kb
    from stores.base import StoreUnavailableError

    try:
        return open_kb(ctx, create=create)
    except StoreUnavailableError as exc:
        _fail(str(exc))


RERANKED = "hybrid+rerank"  # eval only: hybrid candidates reordered by the configured reranker
DECOMPOSED = "hybrid+decompose"  # eval only: the model splits the question, sub-queries fused by RRF
REWRITTEN = "hybrid+rewrite"  # eval only: the model turns the question into a search query first
TRANSLATED = "hybrid+translate"  # eval only: the question and its translation into the KB's other language
PLANNED = (REWRITTEN, DECOMPOSED, TRANSLATED)  # the eval modes that ask a model to plan the search


def _modes(text: str, *, eval_modes: bool = False) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    known = (*MODES, RERANKED, *PLANNED) if eval_modes else MODES
    unknown = [m for m in modes if m not in known]
    if unknown or not modes:
        _fail(f"unknown mode {', '.join(unknown) or '(none)'}: use {', '.join(known)}", 2)
    return modes


def settings() -> Settings:
    """The operator's settings (imported here, not with the module: ``--help`` loads no pydantic)."""
    from nodes.settings import Settings

    return Settings()


def _context(user: str | None, groups: str | None) -> Settings:
    ctx = settings()
    changes: dict[str, Any] = {}
    if user:
        changes["user_id"] = user
    if groups is not None:
        changes["groups"] = groups
    return ctx.replace(**changes)


def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or folders (.txt .md .html .pdf .docx)."),
    groups: str | None = typer.Option(
        None, "--groups", "-g", help="Access groups for these files, e.g. hr,eng."
    ),
    prune: bool = typer.Option(False, "--prune", help="Remove documents whose files are gone."),
    reindex: bool = typer.Option(
        False,
        "--reindex",
        help="First empty the whole knowledge base (every document, its trash too), then ingest PATHS with "
        "the current KB_AGENT_EMBEDDER: the way to switch embedders.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Add or update documents; unchanged files are skipped, changed ones replace exactly their chunks."""
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _fail(f"no such file or folder: {', '.join(missing)}", 2)
    config = settings()
    group_list = [g.strip() for g in groups.split(",") if g.strip()] if groups else None
    if reindex:
        from stores.knowledge.knowledge_base import KnowledgeBase

        KnowledgeBase.drop(config.data_dir, chroma_url=config.chroma_url, database_url=config.database_url)
        err.print(f"emptied the knowledge base; re-indexing with {config.embedder}")
    from stores.knowledge.ingest import IngestReport

    result = IngestReport()

    def stopped_line() -> str:  # what was fully written is kept, the rest is not
        added, updated = len(result.added), len(result.updated)
        return (
            f"stopped: {added + updated} file(s) indexed and kept (added {added}, updated {updated}); "
            "the others were not: run the same ingest again to finish"
        )

    signals.on_stop(stopped_line)  # also when the stop cannot wait for the ingest to unwind
    try:
        kb = open_knowledge_base(config, create=True)
        with ingest_bar(err, "ingesting") as report:  # on stderr: with --json too, stdout stays the report
            kb.ingest(paths, groups=group_list, prune=prune, progress=report, report=result)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM
        signals.say_stopped()
        raise typer.Exit(signals.STOPPED) from None
    except typer.Exit:  # its line is printed: the store failure it reported is in its context, not to repeat
        raise
    except Exception as exc:
        if line := store_failure(exc, config.data_dir):
            _fail(line)
        raise
    summary = {
        "added": result.added,
        "updated": result.updated,
        "unchanged": result.unchanged,
        "skipped": [{"source": s, "reason": r} for s, r in result.skipped],
        "removed": result.removed,
        "chunks_written": result.chunks_written,
        "chunks_deleted": result.chunks_deleted,
    }
    # Every file refused, nothing else done: the command did not do what was asked.
    refused = bool(result.skipped) and not (result.added or result.updated or result.unchanged or result.removed)
    if as_json:
        typer.echo(json_text(summary))
        if refused:
            raise typer.Exit(1)
        return
    out.print(
        f"added {len(result.added)} · updated {len(result.updated)} · unchanged {len(result.unchanged)} · "
        f"removed {len(result.removed)} · skipped {len(result.skipped)} · chunks written {result.chunks_written}"
    )
    for source, reason in result.skipped:
        out.print(f"[yellow]skipped[/yellow] {shown_name(source)}: {shown(reason)}")
    if refused:
        err.print("[red]error:[/red] no file was indexed: every one was refused (reasons above)")
        raise typer.Exit(1)


def stats(as_json: bool = typer.Option(False, "--json")) -> None:
    """Documents, chunks, last update and embedding model of the knowledge base."""
    kb = open_knowledge_base(settings())
    data = (
        kb.stats() if kb is not None else {"documents": 0, "chunks": 0, "last_update": None, "embedder": None}
    )
    if as_json:
        typer.echo(json_text(data, default=str))
        return
    for key, value in data.items():
        out.print(f"{key}: {shown(value)}")


def search(
    query: str = typer.Argument(...),
    mode: str = typer.Option("hybrid", "--mode", "-m", help="bm25, vector or hybrid."),
    k: int = typer.Option(5, "--k", "-k", min=1, max=100),
    user: str | None = typer.Option(None, "--user", "-u"),
    groups: str | None = typer.Option(
        None, "--groups", "-g", help="The caller's groups (default KB_AGENT_GROUPS)."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Search the knowledge base as a given user (permissions apply)."""
    _modes(mode)
    if not query.strip():
        _fail("the query is empty", 2)
    ctx = _context(user, groups)
    kb = open_knowledge_base(ctx)
    hits = (
        [] if kb is None else kb.search(query, user_id=ctx.user_id, groups=ctx.group_list, top_k=k, mode=mode)
    )
    if as_json:
        typer.echo(json_text(hits, default=str))
        return
    if not hits:
        out.print("no relevant passages")
    for rank, hit in enumerate(hits, 1):
        text = str(hit.get("text", "")).replace("\n", " ")
        found = "+".join(hit.get("retrievers", []))
        out.print(
            f"{rank}. [bold]{shown_name(hit['id'])}[/bold] {hit.get('score', 0):.4f} ({found})\n   {shown(text[:200])}"
        )


def repair(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Make Chroma, BM25 and the manifest agree (after a killed ingest): report and fix the differences,
    and give the space of removed chunks back to the disk. A damaged database file is found first (SQLite's
    own check, read-only) and named: nothing is repaired on top of it."""
    config = settings()
    damaged = [str(path) for path in damaged_databases(Path(config.data_dir))]
    if damaged:
        if as_json:
            typer.echo(json_text({"damaged": damaged}))
        _fail(
            f"{', '.join(damaged)}: damaged (SQLite's integrity check fails); restore it from a backup, or move it "
            "aside and ingest the documents again; nothing was changed"
        )
    kb = open_knowledge_base(config)
    empty: dict[str, Any] = {"stray_chunks": 0, "missing_chunks": 0, "forgotten": [], "bytes_reclaimed": 0}
    report = kb.repair_report(reclaim=True) if kb is not None else empty
    if as_json:
        typer.echo(json_text(report))
        return
    out.print(
        f"stray chunks removed {report['stray_chunks']} · missing chunks {report['missing_chunks']} · "
        f"documents forgotten {len(report['forgotten'])} · "
        f"space reclaimed {report['bytes_reclaimed'] / 1024 / 1024:.1f} MiB"
    )
    for source in report["forgotten"]:
        out.print(f"[yellow]forgotten[/yellow] {shown_name(source)}: ingest it again to re-index it")


def register(app: typer.Typer) -> None:
    app.command()(ingest)
    app.command()(repair)
    app.command()(stats)
    app.command()(search)
