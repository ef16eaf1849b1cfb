"""The state a knowledge base keeps in three stores, and what keeps those stores in agreement.

Layout for ``KnowledgeIndex(data_dir)``: Chroma under ``<data_dir>/chroma`` (or a Chroma server when
``chroma_url`` is set), and beside it ``<data_dir>/<collection>/`` (``knowledge/`` by default) holding
the BM25 index (``bm25/``) and the manifest (``manifest.sqlite3``). The three hold the same chunk ids
after every ingest or delete; the manifest is written last, so a crash costs re-embedding, never a
chunk the manifest believes is indexed but is not.

Ingest (:mod:`stores.knowledge.ingest`) and search (:mod:`stores.knowledge.search`) both work on one
``KnowledgeIndex``; it imports neither, so the two paths share state without importing each other.
Deleting, reading back, counting and repairing need no more than this state, so they live here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.base import Passage
from stores.chroma import (
    EmbeddingMismatchError,
    chroma_client,
    open_collection,
    reclaim_space,
    reopen_client,
)
from stores.embeddings import Embedder
from stores.knowledge.groups import FLAG_PREFIXES, clean_groups, group_key
from stores.knowledge.manifest import FileRecord, Manifest
from stores.text_analysis import indexed_text

if TYPE_CHECKING:
    from stores.knowledge.bm25_index import BM25Index

log = logging.getLogger(__name__)


class KnowledgeIndex:
    """Chroma collection + BM25 index + manifest of one collection, and the generation last seen.

    ``generation`` is the manifest's write counter when this instance last loaded BM25; another
    instance or process writing moves it, and ``refresh`` then reloads BM25 and, for embedded Chroma,
    reopens the client (its in-memory vector index does not see other processes' writes).
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        embedder: Embedder,
        chroma_url: str = "",
        database_url: str = "",
        collection: str = "knowledge",
        staleness: float = 0.0,
        pool: Any = None,
    ) -> None:
        self.data_dir = Path(directory)
        self.kb_dir = self.data_dir / collection
        self.embedder = embedder
        self.chroma_url = chroma_url
        self.client = chroma_client(self.data_dir, chroma_url)  # first: an unreachable server says so
        # Shared mode: a Chroma server and Postgres hold everything; BM25 is this process's copy.
        self.shared = bool(chroma_url and (database_url or pool is not None))
        self.manifest = _manifest(self.kb_dir, chroma_url, database_url, collection, pool)
        built_with = self.manifest.meta().get("embedder")
        if built_with and built_with != embedder.name:
            raise EmbeddingMismatchError(
                f"knowledge base {self.kb_dir} was built with embedder {built_with!r}; the current one is "
                f"{embedder.name!r}. Re-index (kb-agent ingest --reindex PATH) or set KB_AGENT_EMBEDDER={built_with}"
            )
        self.collection_name = collection
        self.collection = open_collection(self.client, collection, embedder)
        self.bm25: BM25Index = _open_bm25(self.kb_dir / "bm25", rebuildable=self.shared)
        self.generation = self.manifest.generation()
        self.groups_seen: frozenset[str] | None = None  # every group of an indexed document
        self.group_chunks: dict[str, int] = {}  # chunks per group, counted with groups_seen
        self._refresh_lock = threading.Lock()
        # seconds a query may still use the keyword index after another writer moved the version (0: never)
        self.staleness = staleness
        self._superseded_at: float | None = None  # when this process first saw a version newer than its own
        self._known_generation: int | None = None
        self._catching_up: threading.Thread | None = None
        self._catch_up_guard = threading.Lock()
        self.known: set[str] | None = None  # the manifest's chunk ids: the only ones search may serve
        self.texts_fetched = 0  # shared mode: chunk texts read from Chroma into BM25 (tests, diagnostics)
        if self.shared:
            self.sync_bm25()
        elif self.bm25.needs_reindex:  # the tokenizer changed: re-tokenize the texts Chroma holds
            self.rebuild_bm25()

    def refresh(self) -> None:
        """Reload the BM25 index when another instance or process wrote this KB since we loaded it.

        Every query calls this first, so no query runs on a keyword index older than the version it read.
        """
        with self._refresh_lock:  # concurrent queries of one process reload once
            self._refresh()

    def refresh_for_query(self) -> bool:
        """``refresh`` for a search: True when the keyword index is current; False while it lags behind
        another writer's version by less than ``staleness`` seconds and catches up in the background.

        Lagging, the query uses the keyword index it has, never waiting for a rebuild (≈ 9 s at 100k
        chunks); the manifest's chunk ids are read at once, so a deleted chunk is still never returned.
        """
        if self.staleness > 0 and self._may_lag():
            return False
        self.refresh()
        return True

    def _may_lag(self) -> bool:
        # a catch-up adopts the new version before its rebuild ends: until it is done, this process lags
        busy = self._catching_up is not None and self._catching_up.is_alive()
        generation = self.manifest.generation()
        if generation == self.generation and not busy:
            return False
        now = time.monotonic()
        if self._superseded_at is None:
            self._superseded_at = now
        if now - self._superseded_at > self.staleness:
            return False  # too old: this query reloads first (after the catch-up, if one is running)
        if self._known_generation != generation:
            self.known, self._known_generation = self.manifest.chunk_ids(), generation
        with self._catch_up_guard:
            if self._catching_up is None or not self._catching_up.is_alive():
                self._catching_up = threading.Thread(target=self._catch_up, name="kb-index-catch-up", daemon=True)
                self._catching_up.start()
        return True

    def _catch_up(self) -> None:
        try:
            self.refresh()
            self.bm25.warm()  # the rebuild happens here, not in a query
        except Exception:  # the first query past the staleness reloads, and reports what fails
            log.warning("catching up with the knowledge base in the background failed", exc_info=True)

    def _refresh(self) -> None:
        generation = self.manifest.generation()
        if generation != self.generation or self.known is None:
            self.known = self.manifest.chunk_ids()  # read before the stores: never newer than them
            self._known_generation = generation
        if generation != self.generation:
            if self.shared:
                self.sync_bm25()
            else:
                self.bm25.reload()
                self.reopen_vectors()
            self.generation = generation
            self.groups_seen = None
        self._superseded_at = None
        if self.groups_seen is None:
            self._count_groups()

    def _count_groups(self) -> None:
        """Every group of an indexed document, and how many chunks each holds (from the manifest)."""
        chunks: dict[str, int] = {}
        for record in self.manifest.records().values():
            for group in record.groups:
                chunks[group] = chunks.get(group, 0) + len(record.chunk_ids)
        self.group_chunks = chunks
        self.groups_seen = frozenset(chunks)

    def visible_at_most(self, groups: Sequence[str]) -> int:
        """An upper bound on the chunks a caller of ``groups`` may see (a document in two counts twice)."""
        if self.groups_seen is None:
            self._count_groups()
        return sum(self.group_chunks.get(g, 0) for g in set(groups))

    def reopen_vectors(self) -> None:
        """Read the vector index again: after another process wrote to embedded Chroma."""
        if not self.chroma_url:
            self.client = reopen_client(self.data_dir)
            self.collection = open_collection(self.client, self.collection_name, self.embedder)

    def wrote(self) -> None:
        """After our own write: adopt the manifest's new generation and recount the groups seen."""
        self.generation = self.manifest.generation()
        self.groups_seen = None  # our own write may have added groups
        self.known = None
        if self.shared:  # our BM25 already holds what we wrote: record it, for our next sync and restart
            self.bm25.tag_untagged(_wanted(self.manifest.records().values()))

    def sync_bm25(self, page: int = 1000) -> int:
        """Shared mode: bring this process's BM25 to the shared manifest, reading changed texts from
        Chroma; returns the chunks (re)indexed.

        Each BM25 row is tagged with the content hash and groups the manifest gave for the text it holds,
        saved with the row; a row whose tag differs from the manifest's (or that has none: written by an
        ingest not yet recorded, or by an older version) is fetched again. So a replica pays for what
        other processes wrote, and for everything only when its local copy is missing or unreadable."""
        generation = self.manifest.generation()  # read first: a write during the sync moves it again
        records = self.manifest.records().values()
        wanted = _wanted(records)
        if self.bm25.needs_reindex:
            self.bm25.clear()  # tokenized by another analyzer: nothing in it can be kept
        have = self.bm25.tags()
        stale = [cid for cid in have if cid not in wanted]
        fetch = [cid for cid, tag in wanted.items() if have.get(cid) != tag]
        missing = set(fetch)
        groups = {cid: r.groups for r in records for cid in r.chunk_ids if cid in missing}
        with self.bm25.batch():
            self.bm25.remove(stale)
            for start in range(0, len(fetch), page):
                ids = fetch[start : start + page]
                got = self.collection.get(ids=ids, include=["documents", "metadatas"])
                metas = got["metadatas"] or [{}] * len(got["ids"])
                texts = {
                    cid: indexed_text(text or "", meta or {})
                    for cid, text, meta in zip(got["ids"], got["documents"] or [], metas, strict=False)
                }
                self.texts_fetched += len(texts)
                # a chunk the manifest names but Chroma lacks is left out: ``repair`` reports it
                rows = [(cid, texts[cid] or "", groups[cid]) for cid in ids if cid in texts]
                self.bm25.upsert(rows, tags={cid: wanted[cid] for cid, _, _ in rows})
        self.generation = generation
        self.groups_seen = None
        self.bm25.warm()
        return len(fetch)

    def delete_chunks(self, ids: Sequence[str]) -> int:
        """Remove chunks from Chroma and BM25 (the caller updates the manifest); returns how many."""
        if not ids:
            return 0
        self.collection.delete(ids=list(ids))
        self.bm25.remove(list(ids))
        return len(ids)

    def delete_document(self, source: str) -> int:
        """Remove one source from Chroma, BM25 and the manifest; returns the chunks removed."""
        with self.manifest.lock():
            self.refresh()
            record = self.manifest.get(source)
            if record is None:
                return 0
            removed = self.delete_chunks(record.chunk_ids)
            self.manifest.apply([], [source])
            self.wrote()
            return removed

    def get(self, ids: Sequence[str], *, groups: Sequence[str] | None = None) -> list[Passage]:
        """Chunks by id, in the order asked; with ``groups``, only those the caller may see."""
        from stores.knowledge.chunking import source_of_chunk
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        found = self.collection.get(ids=ids, include=["documents", "metadatas"])
        allowed = {group_key(g) for g in groups} if groups is not None else None
        by_id: dict[str, Passage] = {}
        for cid, text, meta in zip(
            found["ids"], found["documents"] or [], found["metadatas"] or [], strict=False
        ):
            meta = dict(meta or {})
            if allowed is not None and not allowed & {k for k, v in meta.items() if v is True}:
                continue
            clean = {k: v for k, v in sorted(meta.items()) if not k.startswith(FLAG_PREFIXES) and k != "hash"}
            source = str(meta.get("source", source_of_chunk(cid)))
            by_id[cid] = Passage(
                id=cid, text=text or "", source=source, score=0.0, retrievers=[], metadata=clean
            )
        return [by_id[cid] for cid in ids if cid in by_id]

    def stats(self, groups: Iterable[str] | None = None) -> dict[str, Any]:
        """Documents, chunks, last update (ISO), embedder, dim and the access groups seen.

        With ``groups`` (a caller's), only the documents those groups may see are counted and named.
        """
        records = self.manifest.records()
        if groups is not None:
            visible = {*groups, "public"}
            records = {k: r for k, r in records.items() if visible & set(r.groups or ["public"])}
        meta = self.manifest.meta()
        return {
            "documents": len(records),
            "chunks": sum(len(r.chunk_ids) for r in records.values()),
            "last_update": meta.get("last_update", ""),
            "embedder": meta.get("embedder") or self.embedder.name,
            "dim": int(meta.get("dim") or self.embedder.dim),
            "groups": sorted({g for r in records.values() for g in r.groups}),
        }

    # -- keeping the three stores in agreement ---------------------------------------------------
    def index_ids(self) -> dict[str, set[str]]:
        """Chunk ids held by each of the three stores (equal when consistent): for tests and ``repair``."""
        self.refresh()
        chroma = {cid for page in self.stored([]) for cid in page["ids"]}
        return {"chroma": chroma, "bm25": set(self.bm25.ids()), "manifest": self.manifest.chunk_ids()}

    def stored(self, include: list[str], size: int = 1000) -> Iterator[dict[str, Any]]:
        """Everything Chroma holds for this collection, a page at a time."""
        offset = 0
        while (page := self.collection.get(include=include, limit=size, offset=offset))["ids"]:  # type: ignore[arg-type]
            yield dict(page)
            offset += len(page["ids"])

    def repair(self) -> int:
        """Make the stores agree after a crash: drop stray chunks, forget sources with missing ones
        (the next ingest re-indexes them). Returns the number of ids fixed."""
        report = self.repair_report()
        return report["stray_chunks"] + report["missing_chunks"]

    def repair_report(self, reclaim: bool = False) -> dict[str, Any]:
        """``repair``, saying what it found: stray and missing chunk counts, and the sources forgotten;
        with ``reclaim``, also the bytes of removed chunks given back to the disk (embedded Chroma, BM25)."""
        with self.manifest.lock():
            ids = self.index_ids()
            stray = (ids["chroma"] | ids["bm25"]) - ids["manifest"]
            missing = ids["manifest"] - (ids["chroma"] & ids["bm25"])
            broken = {s: r for s, r in self.manifest.records().items() if missing & set(r.chunk_ids)}
            self.delete_chunks(sorted(stray.union(*(r.chunk_ids for r in broken.values()))))
            self.manifest.apply([], broken)
            if stray:  # only Chroma and BM25 changed: tell the other processes to reload anyway
                self.manifest.touch()
            self.wrote()
            report = {"stray_chunks": len(stray), "missing_chunks": len(missing), "forgotten": sorted(broken)}
            if reclaim:
                removed = bool(stray or broken)
                freed = reclaim_space(self.data_dir, self.chroma_url, force=removed)
                freed += self.bm25.vacuum(force=removed)
                report["bytes_reclaimed"] = freed
            return report

    def rebuild_bm25(self) -> int:
        """Re-tokenize every chunk Chroma holds into a fresh BM25 index (after an analyzer change, or on
        a replica sharing a Chroma server); returns the chunks indexed."""
        with self.manifest.lock():
            self.bm25.clear()
            with self.bm25.batch():
                for page in self.stored(["documents", "metadatas"]):
                    rows = list(zip(page["ids"], page["documents"], page["metadatas"], strict=True))
                    self.bm25.upsert(
                        [
                            (cid, indexed_text(text or "", meta or {}), clean_groups(str(meta.get("groups", "")).split(",")))
                            for cid, text, meta in rows
                        ]
                    )
            return len(self.bm25)

    @staticmethod
    def drop(
        directory: str | Path,
        *,
        chroma_url: str = "",
        database_url: str = "",
        collection: str = "knowledge",
        pool: Any = None,
    ) -> None:
        """Empty a knowledge base whatever embedder built it (collection, BM25, manifest): the first step
        of re-indexing with another embedder. Open instances must ``reset()`` or be recreated."""
        manifest = _manifest(Path(directory) / collection, chroma_url, database_url, collection, pool)
        try:
            with manifest.lock():
                with contextlib.suppress(Exception):  # no such collection: nothing to drop
                    chroma_client(directory, chroma_url).delete_collection(collection)
                _open_bm25(manifest.directory / "bm25", rebuildable=manifest.shared).clear()
                manifest.clear()
                manifest.set_meta(embedder="", dim=0)
        finally:
            manifest.close()

    def reset(self) -> None:
        """``drop`` this knowledge base and keep using this instance on the empty one."""
        with self.manifest.lock():
            self.drop(
                self.data_dir,
                chroma_url=self.chroma_url,
                database_url=self.manifest.database_url,
                collection=self.collection_name,
                pool=self.manifest.pool,
            )
            self.collection = open_collection(self.client, self.collection_name, self.embedder)
            self.bm25.reload()
            self.wrote()


def _manifest(kb_dir: Path, chroma_url: str, database_url: str, collection: str, pool: Any = None) -> Manifest:
    """The shared manifest in Postgres only when Chroma is shared too: a local Chroma directory with a
    shared ledger would make every other process believe it holds chunks it has never seen."""
    if not chroma_url:
        return Manifest(kb_dir, namespace=collection)
    return Manifest(kb_dir, database_url=database_url, namespace=collection, pool=pool)


def _wanted(records: Iterable[FileRecord]) -> dict[str, str]:
    """chunk id -> tag (content hash and groups): what BM25 must hold for these manifest records."""
    wanted = {}
    for record in records:
        groups = json.dumps(sorted(record.groups), ensure_ascii=False)
        for cid, digest in zip(record.chunk_ids, record.chunk_hashes, strict=True):
            wanted[cid] = f"{digest} {groups}"
    return wanted


def _open_bm25(directory: Path, *, rebuildable: bool) -> BM25Index:
    """The BM25 index under ``directory``; when it can be rebuilt from the shared stores (a replica's
    copy), an unreadable file is set aside and started afresh instead of failing the process."""
    from stores.knowledge.bm25_index import INDEX_FILE, BM25Index

    try:
        return BM25Index(directory)
    except sqlite3.DatabaseError as exc:
        if not rebuildable:
            raise
        log.warning("%s: unreadable (%s); rebuilding it from the shared knowledge base", directory, exc)
        for suffix in ("", "-wal", "-shm"):
            (directory / f"{INDEX_FILE}{suffix}").unlink(missing_ok=True)
        return BM25Index(directory)
