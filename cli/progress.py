"""The ingest progress bar of ``ingest`` and ``eval``: chunks done of the expected total, chunks/s and an ETA.

It is drawn on stderr, so ``--json`` keeps stdout a clean report, and only when stderr is a terminal: piped
to a file or a CI log, a redrawn bar is only control codes, and the summary printed at the end says what was
done. The bar is transient: it disappears once the ingest ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from cli.terminal import shown_name

if TYPE_CHECKING:
    from stores.knowledge.ingest import IngestProgress
    from stores.knowledge.ingest import Progress as ProgressCallback


class ChunkRate(ProgressColumn):
    """Chunks per second over rich's recent window (the last 30 s), "–" before there are two samples."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f} chunks/s" if speed else "– chunks/s", style="progress.data.speed")


@contextmanager
def ingest_bar(console: Console, what: str) -> Iterator[ProgressCallback | None]:
    """A callback for ``KnowledgeBase.ingest(progress=...)`` drawing the bar on ``console``, or None when
    ``console`` is not a terminal."""
    if not console.is_terminal:
        yield None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        ChunkRate(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(what, total=None)

        def report(status: IngestProgress) -> None:
            label = shown_name(status.label[-40:])
            files = f"{status.files_done}/{status.files_total} files"
            bar.update(
                task,
                description=f"{what} {files} {label}",
                completed=status.chunks_done,
                total=status.chunks_total or None,
            )

        yield report
