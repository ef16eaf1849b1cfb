"""Files into a knowledge base: read, chunk, embed what changed, write all three stores, manifest last.

Ingest is idempotent: a file whose content and groups are unchanged costs one manifest lookup, and a
changed file re-embeds only the chunks whose text changed (the others are re-flagged if their groups
moved). The functions here work on a :class:`~stores.knowledge.index.KnowledgeIndex` and nothing in
that module imports this one, so the write path can change without touching search or housekeeping.

Three stages overlap, so an ingest runs at about the embedder's speed: a reading thread
(:mod:`stores.knowledge.reading`) loads, chunks and tokenizes; this thread checks which chunks changed and
embeds them ``EMBED_BATCH`` at a time, across files; a writing thread stores ``WRITE_BATCH`` chunks per Chroma
upsert and per BM25 upsert (Chroma pays ~20 ms a call, so per-file writes of small files cost more than their
embedding). A file is recorded once every chunk of it is written, and all records land in one manifest
transaction at the end: a crash leaves chunks the manifest does not know, which search never serves and
the next ingest's ``repair`` removes, never a manifest row without its chunks.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.disk import disk_full
from stores.knowledge.groups import clean_groups, flag_keys, group_key
from stores.knowledge.languages import LANGUAGES, languages_in, languages_of
from stores.knowledge.manifest import FileRecord, now_iso
from stores.knowledge.reading import FileJob, Piece, Reader

if TYPE_CHECKING:
    from stores.knowledge.chunking import Chunk
    from stores.knowledge.index import KnowledgeIndex

EMBED_BATCH = 32  # chunks per embed_documents call: the progress bar moves, a failure loses little
WRITE_BATCH = 256  # chunks per Chroma upsert and BM25 upsert
IN_FLIGHT = 2  # write batches handed to the writer at once: the embedder rarely waits, memory stays bounded


UNDO_DEADLINE = 20  # seconds the undo of a failed ingest may take before it is left to the next one
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IngestProgress:
    """Where an ingest is; ``chunks_total`` is an estimate (chunks read, plus unread bytes at the rate seen
    so far) until every file is read, then exact."""

    label: str
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int


Progress = Callable[[IngestProgress], None]


@dataclass
class IngestReport:
    """What one ``ingest`` call did, per source; ``skipped`` pairs a source with why."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_written: int = 0
    chunks_deleted: int = 0

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged, "
            f"{len(self.skipped)} skipped, {len(self.removed)} removed; "
            f"{self.chunks_written} chunks embedded, {self.chunks_deleted} deleted"
        )


def ingest(
    index: KnowledgeIndex,
    paths: Sequence[str | Path] | str | Path,
    *,
    groups: Sequence[str] | None = None,
    prune: bool = False,
    progress: Progress | None = None,
    chunk_tokens: int = 320,
    max_file_bytes: int | None = None,
    report: IngestReport | None = None,
) -> IngestReport:
    """Index files/folders idempotently; ``prune`` drops documents under ``paths`` whose file is gone.

    Groups: ``groups`` if given, else the file's sidecar (``read_groups``), else ``["public"]``.
    ``progress`` gets an :class:`IngestProgress` after each file and each embedding batch.
    A file that cannot be read is reported in ``skipped`` and keeps what it had indexed before. ``report``
    (else a new one) is filled as files complete, so it says what was kept when the ingest is stopped.
    """
    from stores.knowledge.documents import discover

    given = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    fixed = clean_groups([groups] if isinstance(groups, str) else groups or [])
    report = report if report is not None else IngestReport()
    files: list[tuple[Path, Path]] = []
    unreadable: list[tuple[Path, str]] = []
    for path in given:
        try:
            files.extend(discover([path], unreadable))
        except FileNotFoundError as exc:
            if not prune:  # with prune, a vanished path just means its documents go
                report.skipped.append((str(path), str(exc)))
    for folder, why in unreadable:  # its documents stay as they were, even with prune
        report.skipped.append((str(folder), f"folder cannot be read ({why}); what it held is kept as it was"))
    with index.manifest.lock():
        if index.manifest.meta().get("ingesting"):  # the last ingest or delete never finished (killed)
            index.repair()
        index.manifest.set_meta(ingesting=now_iso())
        index.refresh()
        records = index.manifest.records()
        pipeline = _Pipeline(index, report, len(files), progress)
        stopped = False
        try:
            with index.bm25.batch(), Reader(files, records, fixed, chunk_tokens, max_file_bytes=max_file_bytes) as reader:
                pipeline.run(reader)
                kept = [folder for folder, _ in unreadable]
                for source in _prunable(records, given, reader.seen, kept) if prune else []:
                    report.chunks_deleted += index.delete_chunks(records[source].chunk_ids)
                    report.removed.append(source)
        except (KeyboardInterrupt, SystemExit):
            stopped = True  # Ctrl-C or SIGTERM: stop now; the next ingest or ``repair`` removes the strays
            raise
        except Exception as exc:
            # A store that failed for want of space is written to no more: undoing there is a write too, and
            # Chroma's SQLite layer waited forever on a full disk (deaf to SIGTERM). The strays are left to
            # the next ingest, which repairs first since this one never cleared its "ingesting" mark.
            stopped = disk_full(exc, index.data_dir) is not None
            raise
        finally:  # commit what was fully written, even when a later file's embedding failed
            pipeline.close(undo=not stopped)
            index.manifest.apply(pipeline.puts, report.removed)
            if pipeline.puts:
                index.manifest.set_meta(embedder=index.embedder.name, dim=index.embedder.dim)
            index.wrote()
        if learn_languages(index):
            index.wrote()
        index.manifest.set_meta(ingesting="")
    return report


LANGUAGE_PAGE = 500  # chunk texts read from Chroma per call while learning an older index's languages


def learn_languages(index: KnowledgeIndex) -> int:
    """Record the languages of documents indexed before the manifest kept them, from the chunk texts
    Chroma holds (once: the next ingest finds them known); returns how many documents were learned.

    Until then such a document counts for every language (``KnowledgeBase.languages``), so a search in
    either language is never narrowed by a guess."""
    if all(languages is not None for _, languages in index.manifest.languages_by_groups()):
        return 0
    unknown = [record for record in index.manifest.records().values() if record.languages is None]
    for record in unknown:
        found: set[str] = set()
        for start in range(0, len(record.chunk_ids), LANGUAGE_PAGE):
            page = index.collection.get(ids=record.chunk_ids[start : start + LANGUAGE_PAGE], include=["documents"])
            found |= languages_of(text or "" for text in page["documents"] or [])
            if len(found) == len(LANGUAGES):
                break
        record.languages = sorted(found)
    if unknown:
        index.manifest.apply(unknown, [])
    return len(unknown)


@dataclass
class _Row:
    """One chunk on its way to the stores; ``vector`` None means its text is stored already (re-flag only)."""

    chunk: Chunk
    terms: list[str]
    groups: list[str]
    flags: set[str]  # group flags it holds in Chroma now (cleared when no longer granted)
    vector: np.ndarray | None
    bm25: bool  # (re)index in BM25: new text, or the same text with other groups


class _Pipeline:
    """The embedding stage (this thread) and the writing stage (one worker thread) of one ingest."""

    def __init__(
        self, index: KnowledgeIndex, report: IngestReport, files: int, progress: Progress | None
    ) -> None:
        self.index, self.report, self.progress = index, report, progress
        self.files_total, self.files_done, self.chunks_done = files, 0, 0
        self.pending: list[tuple[FileJob, Chunk, list[str]]] = []  # read, not yet embedded
        self.ready: list[tuple[FileJob, _Row]] = []  # embedded, not yet handed to the writer
        self.jobs: deque[FileJob] = deque()  # files with chunks in the pipeline, in order
        self.dropped: list[FileJob] = []  # files the reader gave up on part-way: undone at the end
        self.puts: list[FileRecord] = []  # files fully written: recorded in the manifest at the end
        self.languages: dict[FileJob, set[str]] = {}  # what each file's chunks are written in, so far
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="kb-ingest-write")
        self.in_flight: deque[tuple[Future[None], Counter[FileJob]]] = deque()
        self.reader: Reader | None = None
        self.label = ""

    def run(self, reader: Reader) -> None:
        """Take the reader's events until its end; embed whenever a batch is full or nothing new is read."""
        self.reader = reader
        while True:
            event = reader.get(block=not self.pending)
            if event is None:  # the reader is behind: embed what there is rather than wait
                self._embed()
                continue
            if isinstance(event, Piece):
                if not self.jobs or self.jobs[-1] is not event.job:
                    self.jobs.append(event.job)
                found = self.languages.setdefault(event.job, set())
                for chunk, _ in event.chunks:
                    found |= languages_in(chunk.text)
                self.pending.extend((event.job, chunk, terms) for chunk, terms in event.chunks)
                while len(self.pending) >= EMBED_BATCH:
                    self._embed()
                continue
            kind, payload, *rest = event
            if kind == "end":
                break
            if kind == "error":
                raise payload
            if kind == "read":
                payload.read_all = True
                self._complete()
            elif kind == "unchanged":
                self.report.unchanged.append(payload)
                self._file_done(payload)
            elif kind == "skip":
                reason, job = rest
                self.report.skipped.append((payload, reason))
                if job is not None:
                    self._drop(job)
                self._file_done(payload)
        while self.pending:
            self._embed()
        self._write()
        self._settle(0)
        self._tick(final=True)

    def _embed(self) -> None:
        """Embed the next ``EMBED_BATCH`` read chunks that are new or changed; queue all of them for writing."""
        batch, self.pending = self.pending[:EMBED_BATCH], self.pending[EMBED_BATCH:]
        if not batch:
            return
        existing = self.index.collection.get(ids=[c.id for _, c, _ in batch], include=["metadatas"])
        flags = {
            cid: flag_keys(meta)
            for cid, meta in zip(existing["ids"], existing["metadatas"] or [], strict=False)
        }
        fresh = [
            item
            for item in batch
            if item[0].old_hashes.get(item[1].id) != item[1].hash or item[1].id not in flags
        ]
        vectors = iter(self.index.embedder.embed_documents([c.passage for _, c, _ in fresh]) if fresh else [])
        fresh_ids = {c.id for _, c, _ in fresh}
        for job, chunk, terms in batch:
            vector = next(vectors) if chunk.id in fresh_ids else None
            job.embedded += vector is not None
            row = _Row(
                chunk,
                terms,
                job.groups,
                flags.get(chunk.id, set()),
                vector,
                vector is not None or job.regrouped,
            )
            self.ready.append((job, row))
        self.chunks_done += len(batch)
        self.label = batch[-1][0].source
        self._tick()
        if len(self.ready) >= WRITE_BATCH:
            self._write()

    def _write(self) -> None:
        """Hand the embedded rows to the writer, once fewer than ``IN_FLIGHT`` writes are pending."""
        if not self.ready:
            return
        rows, self.ready = self.ready, []
        self._settle(IN_FLIGHT - 1)
        counts = Counter(job for job, _ in rows)
        self.in_flight.append((self.writer.submit(store_rows, self.index, [row for _, row in rows]), counts))

    def _settle(self, keep: int) -> None:
        """Count finished writes (raising the writer's error), waiting until at most ``keep`` are pending."""
        while self.in_flight and (self.in_flight[0][0].done() or len(self.in_flight) > keep):
            future, counts = self.in_flight.popleft()
            future.result()
            for job, n in counts.items():
                job.written += n
            self._complete()

    def _complete(self) -> None:
        """Record the files, in order, whose every chunk is written; drop their chunks that are gone."""
        while self.jobs and self.jobs[0].read_all and self.jobs[0].written == len(self.jobs[0].ids):
            job = self.jobs.popleft()
            current = set(job.ids)
            self.report.chunks_deleted += self.index.delete_chunks(
                [c for c in job.old_hashes if c not in current]
            )
            self.report.chunks_written += job.embedded
            (self.report.updated if job.old else self.report.added).append(job.source)
            self.puts.append(
                FileRecord(
                    job.source,
                    job.content_hash,
                    job.size,
                    job.groups,
                    job.ids,
                    job.hashes,
                    now_iso(),
                    job.path,
                    sorted(self.languages.pop(job, set())),
                )
            )
            self._file_done(job.source)

    def _drop(self, job: FileJob) -> None:
        """The reader failed part-way through ``job``: no more of it is embedded; what was written is undone."""
        job.failed = True
        self.jobs = deque(j for j in self.jobs if j is not job)
        self.pending = [item for item in self.pending if item[0] is not job]
        self.languages.pop(job, None)
        self.dropped.append(job)

    def _file_done(self, label: str) -> None:
        self.files_done += 1
        self.label = label
        self._tick()

    def _tick(self, final: bool = False) -> None:
        if self.progress is None:
            return
        expected = self.chunks_done if final or self.reader is None else self.reader.chunks_expected()
        self.progress(
            IngestProgress(
                self.label,
                self.files_done,
                self.files_total,
                self.chunks_done,
                max(expected, self.chunks_done),
            )
        )

    def close(self, undo: bool = True) -> None:
        """After success or failure: let handed-over writes finish (their files may complete), then undo
        the chunks of every file that was not completed and did not have them before. Without ``undo``
        (the user stopped the ingest) that is left to ``repair``: undoing a huge file takes minutes, and
        the chunks are invisible meanwhile, since searches serve only what the manifest records."""
        self.writer.shutdown(wait=True, cancel_futures=not undo)
        with contextlib.suppress(Exception):  # already failing: the first error is the one to report
            self._settle(0)
        if not undo:
            return
        stray = [cid for job in [*self.jobs, *self.dropped] for cid in job.ids if cid not in job.old_hashes]
        if not stray:
            return

        def undo_writes() -> None:
            with contextlib.suppress(Exception):
                self.index.delete_chunks(stray)

        # The undo is a write to a store that may just have failed: Chroma's SQLite layer has waited forever
        # there (a full disk), deaf to signals. So it gets a deadline, on a thread of its own; what it does
        # not finish, the next ingest repairs first (this one never clears its "ingesting" mark).
        worker = threading.Thread(target=undo_writes, name="kb-ingest-undo", daemon=True)
        worker.start()
        worker.join(UNDO_DEADLINE)
        if worker.is_alive():  # not a warning: the command's own error is the one line the user needs
            log.info(
                "undoing %d chunks of unfinished files did not end within %ds; the next ingest or "
                "`kb-agent repair` removes them",
                len(stray),
                UNDO_DEADLINE,
            )


def store_rows(index: KnowledgeIndex, rows: Sequence[_Row]) -> None:
    """One Chroma upsert for new and changed texts, one update for re-flagged ones, one BM25 upsert."""
    fresh = [row for row in rows if row.vector is not None]
    kept = [row for row in rows if row.vector is None]
    if fresh:
        index.collection.upsert(
            ids=[row.chunk.id for row in fresh],
            embeddings=np.vstack([row.vector for row in fresh]),  # type: ignore[misc]
            documents=[row.chunk.text for row in fresh],
            metadatas=[_metadata(row.chunk, row.groups, row.flags) for row in fresh],
        )
    if kept:
        index.collection.update(
            ids=[row.chunk.id for row in kept],
            metadatas=[_metadata(row.chunk, row.groups, row.flags) for row in kept],
        )
    if terms := [(row.chunk.id, row.terms, row.groups) for row in rows if row.bm25]:
        index.bm25.upsert_terms(terms)


def _prunable(
    records: dict[str, FileRecord], given: list[Path], seen: dict[str, str], kept: Sequence[Path] = ()
) -> list[str]:
    """Recorded sources read from under ``given`` whose file was not found this time (not those under a
    ``kept`` folder, which could not be listed: absent from the walk is not gone)."""

    def under(path: str, folders: list[str]) -> bool:
        return any(path == root or path.startswith(root + "/") for root in folders)

    roots = [str(path.absolute()).rstrip("/") for path in given]
    unlisted = [str(Path(folder).absolute()).rstrip("/") for folder in kept]
    paths = set(seen.values())
    return [
        source
        for source, record in records.items()
        if source not in seen and record.path not in paths and under(record.path, roots)
        and not under(record.path, unlisted)
    ]


def write_batch(
    index: KnowledgeIndex, batch: list[Chunk], groups: list[str], old_hashes: dict[str, str], regrouped: bool
) -> int:
    """Embed and store one file's chunks outside the pipeline (benchmarks that load chunks without files);
    returns how many were embedded. Writes Chroma and BM25, not the manifest."""
    from stores.text_analysis import indexed_text, tokenize

    existing = index.collection.get(ids=[c.id for c in batch], include=["metadatas"])
    flags = {
        cid: flag_keys(meta) for cid, meta in zip(existing["ids"], existing["metadatas"] or [], strict=False)
    }
    fresh = [c for c in batch if old_hashes.get(c.id) != c.hash or c.id not in flags]
    vectors = dict(
        zip([c.id for c in fresh], index.embedder.embed_documents([c.passage for c in fresh]), strict=True)
    )
    rows = [
        _Row(
            c,
            tokenize(indexed_text(c.text, c.metadata)),
            groups,
            flags.get(c.id, set()),
            vectors.get(c.id),
            c.id in vectors or regrouped,
        )
        for c in batch
    ]
    store_rows(index, rows)
    return len(fresh)


def _metadata(chunk: Chunk, groups: list[str], old_flags: set[str]) -> dict[str, Any]:
    """Chunk metadata as Chroma scalars, one True flag per group, None to clear flags no longer held."""
    meta: dict[str, Any] = {k: _scalar(v) for k, v in chunk.metadata.items()}
    meta.update(groups=",".join(groups), hash=chunk.hash)
    meta.update({group_key(group): True for group in groups})
    meta.update({key: None for key in old_flags if key not in meta})
    return meta


def _scalar(value: Any) -> str | int | float | bool:
    return value if isinstance(value, str | int | float | bool) else ("" if value is None else str(value))
