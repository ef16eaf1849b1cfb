"""Files into a knowledge base: read, chunk, embed what changed, write all three stores, manifest last.

Ingest is idempotent: a file whose content and groups are unchanged costs one manifest lookup, and a
changed file re-embeds only the chunks whose text changed (the others are re-flagged if their groups
moved). The functions here work on a :class:`~stores.knowledge.index.KnowledgeIndex` and nothing in
that module imports this one, so the write path can change without touching search or housekeeping.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.knowledge.groups import DEFAULT_GROUPS, clean_groups, flag_keys, group_key
from stores.manifest import FileRecord, now_iso

if TYPE_CHECKING:
    from stores.chunking import Chunk
    from stores.documents import LoadedDocument
    from stores.knowledge.index import KnowledgeIndex

EMBED_BATCH = 32  # chunks per embed_documents call (and per Chroma write)

Progress = Callable[[str, int, int], None]


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


def _tick(progress: Progress | None, done: int, total: int, label: str, pending: int) -> None:
    """Report ``label`` with files done so far (``pending`` = 1 while the file is still in progress)."""
    if progress is not None:
        progress(label, done - pending, total)


def ingest(
    index: KnowledgeIndex,
    paths: Sequence[str | Path] | str | Path,
    *,
    groups: Sequence[str] | None = None,
    prune: bool = False,
    progress: Progress | None = None,
    chunk_tokens: int = 320,
) -> IngestReport:
    """Index files/folders idempotently; ``prune`` drops documents under ``paths`` whose file is gone.

    Groups: ``groups`` if given, else the file's sidecar (``read_groups``), else ``["public"]``.
    ``progress(label, files_done, files_total)`` is called after each file and each embedding batch.
    A file that cannot be read is reported in ``skipped`` and keeps what it had indexed before.
    """
    from stores.documents import DocumentError, discover, load, read_groups, shown_path

    given = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    fixed = clean_groups([groups] if isinstance(groups, str) else groups or [])
    report = IngestReport()
    files: list[tuple[Path, Path]] = []
    for path in given:
        try:
            files.extend(discover([path]))
        except FileNotFoundError as exc:
            if not prune:  # with prune, a vanished path just means its documents go
                report.skipped.append((str(path), str(exc)))
    with index.manifest.lock():
        if index.manifest.meta().get("ingesting"):  # the last ingest or delete never finished (killed)
            index.repair()
        index.manifest.set_meta(ingesting=now_iso())
        index.refresh()
        records = index.manifest.records()
        puts: list[FileRecord] = []
        seen: dict[str, str] = {}  # source -> absolute path, for this call
        try:
            with index.bm25.batch():
                for done, (file, root) in enumerate(files, 1):
                    absolute, label = str(file.absolute()), shown_path(file.absolute())
                    tick = partial(_tick, progress, done, len(files))
                    try:
                        doc = load(file, root)
                        label = doc.source
                        if doc.source in seen:
                            raise DocumentError(f"same source {doc.source!r} as {seen[doc.source]}")
                        seen[doc.source] = absolute
                        chosen = fixed or clean_groups(read_groups(file, root) or DEFAULT_GROUPS)
                        old = records.get(doc.source)
                        _same_source_check(doc.source, old, absolute, root)
                        if record := _ingest_file(
                            index,
                            doc,
                            chosen,
                            absolute,
                            old,
                            report=report,
                            tick=tick,
                            chunk_tokens=chunk_tokens,
                        ):
                            puts.append(record)
                    except DocumentError as exc:
                        report.skipped.append((shown_path(file), str(exc)))
                    tick(label, 0)
                for source in _prunable(records, given, seen) if prune else []:
                    report.chunks_deleted += index.delete_chunks(records[source].chunk_ids)
                    report.removed.append(source)
        finally:  # commit what was fully written, even when a later file's embedding failed
            index.manifest.apply(puts, report.removed)
            if puts:
                index.manifest.set_meta(embedder=index.embedder.name, dim=index.embedder.dim)
            index.wrote()
        index.manifest.set_meta(ingesting="")
    return report


def _same_source_check(source: str, old: FileRecord | None, path: str, root: Path) -> None:
    """Refuse a file whose id (its path relative to the ingest root) is another existing file's."""
    from stores.documents import DocumentError

    if old is None or not old.path or old.path == path or not Path(old.path).exists():
        return  # new, the same file, or the old one moved away: replacing is what the user wants
    old_root = old.path[: -len(source)].rstrip("/") if old.path.endswith(source) else str(Path(old.path).parent)
    raise DocumentError(
        f"{source!r} is already indexed from {old_root}; {root.absolute()} has another file with the same "
        "relative path, which would replace it. Rename one of them, or ingest both from a common parent folder"
    )


def _prunable(records: dict[str, FileRecord], given: list[Path], seen: dict[str, str]) -> list[str]:
    """Recorded sources read from under ``given`` whose file was not found this time."""
    roots = [str(path.absolute()).rstrip("/") for path in given]
    paths = set(seen.values())
    return [
        source
        for source, record in records.items()
        if source not in seen
        and record.path not in paths
        and any(record.path == root or record.path.startswith(root + "/") for root in roots)
    ]


def _ingest_file(
    index: KnowledgeIndex,
    doc: LoadedDocument,
    groups: list[str],
    path: str,
    old: FileRecord | None,
    *,
    report: IngestReport,
    tick: Callable[[str, int], None],
    chunk_tokens: int,
) -> FileRecord | None:
    """Write one document's new/changed chunks; returns its manifest record (None if unchanged)."""
    from stores.chunking import chunk_document
    from stores.documents import DocumentError

    if old is not None and old.content_hash == doc.content_hash and old.groups == groups:
        report.unchanged.append(doc.source)
        return None
    old_hashes = old.hashes() if old else {}
    ids: list[str] = []
    hashes: list[str] = []
    written = 0
    chunks = chunk_document(doc, groups, max_tokens=chunk_tokens)
    try:  # a streamed file or the embedder can fail mid-way: undo the chunks the file did not have
        while batch := list(islice(chunks, EMBED_BATCH)):
            ids.extend(chunk.id for chunk in batch)
            hashes.extend(chunk.hash for chunk in batch)
            written += write_batch(index, batch, groups, old_hashes, old is not None and old.groups != groups)
            if len(ids) > EMBED_BATCH:
                tick(f"{doc.source} ({len(ids)} chunks)", 1)
    except BaseException:
        with contextlib.suppress(Exception):
            index.delete_chunks([cid for cid in ids if cid not in old_hashes])
        raise
    if not ids:
        raise DocumentError("no text to index")
    report.chunks_written += written
    current = set(ids)
    report.chunks_deleted += index.delete_chunks([cid for cid in old_hashes if cid not in current])
    (report.updated if old else report.added).append(doc.source)
    return FileRecord(doc.source, doc.content_hash, doc.size, groups, ids, hashes, now_iso(), path)


def write_batch(
    index: KnowledgeIndex, batch: list[Chunk], groups: list[str], old_hashes: dict[str, str], regrouped: bool
) -> int:
    """Embed and upsert chunks that are new or changed; only re-flag the others. Returns embeds.

    Writes Chroma and BM25, not the manifest: the caller holds the manifest lock and records the file.
    """
    existing = index.collection.get(ids=[c.id for c in batch], include=["metadatas"])
    flags = {
        cid: flag_keys(meta) for cid, meta in zip(existing["ids"], existing["metadatas"] or [], strict=False)
    }
    fresh = [c for c in batch if old_hashes.get(c.id) != c.hash or c.id not in flags]
    fresh_ids = {c.id for c in fresh}
    kept = [c for c in batch if c.id not in fresh_ids]
    if fresh:
        vectors = index.embedder.embed_documents([c.text for c in fresh])
        index.collection.upsert(
            ids=[c.id for c in fresh],
            embeddings=vectors,
            documents=[c.text for c in fresh],
            metadatas=[_metadata(c, groups, flags.get(c.id, set())) for c in fresh],
        )
    if kept:
        index.collection.update(
            ids=[c.id for c in kept],
            metadatas=[_metadata(c, groups, flags.get(c.id, set())) for c in kept],
        )
    rows = fresh + (kept if regrouped else [])
    if rows:
        index.bm25.upsert([(c.id, c.text, groups) for c in rows])
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
