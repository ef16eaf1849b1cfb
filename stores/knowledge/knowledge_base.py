"""The knowledge base: files in, permission-filtered hybrid search out.

:class:`KnowledgeBase` is the one object the rest of the project opens. It owns a
:class:`~stores.knowledge.index.KnowledgeIndex` (the three stores and their housekeeping) and a
:class:`~stores.knowledge.search.Searcher`, and hands ingest to :mod:`stores.knowledge.ingest`; each of
those imports only the index and the group helpers, so this module sits on top and nothing imports it
back. The layout on disk is described in :mod:`stores.knowledge.index`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from stores.base import Passage
from stores.embeddings import Embedder
from stores.knowledge.groups import DEFAULT_GROUPS
from stores.knowledge.index import KnowledgeIndex
from stores.knowledge.ingest import IngestReport, Progress
from stores.knowledge.ingest import ingest as ingest_files
from stores.knowledge.languages import LANGUAGES
from stores.knowledge.manifest import FileRecord
from stores.knowledge.search import Searcher, SearchSettings
from stores.knowledge.trash import Trash, move_to_trash
from stores.knowledge.trash import restore as restore_from_trash


class KnowledgeBase:
    """Chroma vectors + BM25 + manifest for one collection: ingest, search, and keeping them in step."""

    def __init__(
        self,
        directory: str | Path,
        *,
        embedder: Embedder,
        chroma_url: str = "",
        database_url: str = "",
        collection: str = "knowledge",
        candidates: int = 20,
        rrf_k: int = 60,
        min_vector_score: float | None = None,
        null_margin: float | None = None,
        vector_weight: float = 1.0,
        bm25_weight: float = 1.0,
        chunk_tokens: int = 320,
        fusion: str = "convex",
        trash_days: float = 7.0,
        bm25_staleness: float = 0.0,
        pool: Any = None,
        max_file_bytes: int | None = None,
    ) -> None:
        """``min_vector_score`` and ``null_margin`` default per embedder (``MIN_VECTOR_SCORE``,
        ``NULL_MARGIN``); pass ``-1.0`` and ``float("-inf")`` respectively to switch them off.

        ``pool`` (a :func:`stores.postgres.open_pool`) is the deployment's Postgres pool: with a Chroma
        server, the manifest and the trash live there instead of on pools of their own for
        ``database_url``; ``close`` leaves it open."""
        settings = SearchSettings.for_embedder(  # checked before anything is opened on disk
            embedder.name,
            candidates=candidates,
            rrf_k=rrf_k,
            fusion=fusion,
            min_vector_score=min_vector_score,
            null_margin=null_margin,
            vector_weight=vector_weight,
            bm25_weight=bm25_weight,
        )
        self.chunk_tokens = chunk_tokens
        self.max_file_bytes = max_file_bytes  # ingest skips a bigger file with a line (None: format bounds only)
        self.trash_days = trash_days
        self.index = KnowledgeIndex(
            directory,
            embedder=embedder,
            chroma_url=chroma_url,
            database_url=database_url,
            collection=collection,
            staleness=bm25_staleness,
            pool=pool,
        )
        # the trash lives where the manifest does: shared by the replicas in shared mode, else beside it
        manifest = self.index.manifest
        self.trash = Trash(
            self.index.kb_dir,
            trash_days,
            database_url=manifest.database_url if manifest.shared else "",
            namespace=collection,
            pool=manifest.pool,
        )
        self.searcher = Searcher(self.index, settings)
        # The index's fixed parts, as attributes of the knowledge base (none of them is ever replaced).
        self.data_dir = self.index.data_dir
        self.kb_dir = self.index.kb_dir
        self.embedder = self.index.embedder
        self.manifest = self.index.manifest
        self.collection_name = self.index.collection_name
        # (generation, languages per group) as last read from the manifest; see ``languages``
        self._languages: tuple[int, dict[str, frozenset[str]]] | None = None
        self._languages_lock = threading.Lock()

    # -- ingest ----------------------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str | Path] | str | Path,
        *,
        groups: Sequence[str] | None = None,
        prune: bool = False,
        progress: Progress | None = None,
        report: IngestReport | None = None,
    ) -> IngestReport:
        """Index files/folders idempotently; ``prune`` drops documents under ``paths`` whose file is gone.

        Groups: ``groups`` if given, else the file's sidecar (``read_groups``), else ``["public"]``.
        ``progress`` gets an ``IngestProgress`` (chunks done of an estimated total) after each file and each
        embedding batch.
        A file that cannot be read is reported in ``skipped`` and keeps what it had indexed before.
        ``report`` is filled as files complete: a caller whose ingest was stopped can say what was kept.
        """
        return ingest_files(
            self.index,
            paths,
            groups=groups,
            prune=prune,
            progress=progress,
            report=report,
            chunk_tokens=self.chunk_tokens,
            max_file_bytes=self.max_file_bytes,
        )

    def document(self, doc_id: str) -> FileRecord | None:
        """The manifest record of a source path, or of the source of a chunk id (``path#n``).

        The exact source wins, so ``a#1.txt`` is that file and never chunk 1 of ``a``; only then is the
        id read as ``source#n``, split at its last '#'. A name may hold any number of '#'.
        """
        from stores.knowledge.chunking import source_of_chunk

        doc_id = doc_id.strip()
        record = self.manifest.get(doc_id)
        if record is None and (source := source_of_chunk(doc_id)) != doc_id:
            record = self.manifest.get(source)
        return record

    def delete_document(self, source: str) -> int:
        """Remove one source from Chroma, BM25 and the manifest (into the trash); returns the chunks removed."""
        return self.delete_to_trash(source)[0]

    def delete_to_trash(self, source: str) -> tuple[int, int | None]:
        """Delete ``source``, kept ``trash_days`` days in the trash: (chunks removed, trash id or None)."""
        return move_to_trash(self.index, self.trash, source)

    def restore(self, trash_id: int) -> FileRecord:
        """Put a deleted document back in all three stores (``TrashError`` when it cannot be)."""
        return restore_from_trash(self.index, self.trash, trash_id)

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
        return self.searcher.search(query, user_id=user_id, groups=groups, top_k=top_k, mode=mode)

    def search_ids(
        self, query: str, *, groups: Sequence[str] = DEFAULT_GROUPS, k: int = 5, mode: str = "hybrid"
    ) -> list[tuple[str, float]]:
        """``(chunk id, score)`` best first without fetching texts: what evaluation needs."""
        return self.searcher.search_ids(query, groups=groups, k=k, mode=mode)

    def get(self, ids: Sequence[str], *, groups: Sequence[str] | None = None) -> list[Passage]:
        """Chunks by id, in the order asked; with ``groups``, only those the caller may see."""
        return self.index.get(ids, groups=groups)

    def languages(self, groups: Iterable[str] | None = None) -> frozenset[str]:
        """The languages (``zh``, ``en``) of the documents ``groups`` may see (all documents without).

        Recorded per document at ingest (``stores.knowledge.languages``: a mixed document counts for
        both), and read here from the manifest's short columns only when its generation moved, so asking
        once per turn costs one read of the generation. A document indexed before languages were recorded
        counts for both: cross-language search stays on for it (one translation more, never a passage
        less) until the next ingest learns its languages from its stored chunks.
        """
        generation = self.manifest.generation()
        with self._languages_lock:
            if self._languages is None or self._languages[0] != generation:
                per_group: dict[str, set[str]] = {}
                for record_groups, found in self.manifest.languages_by_groups():
                    for group in record_groups:
                        per_group.setdefault(group, set()).update(LANGUAGES if found is None else found)
                self._languages = (generation, {g: frozenset(langs) for g, langs in per_group.items()})
            by_group = self._languages[1]
        wanted = by_group if groups is None else {g: by_group.get(g, frozenset()) for g in set(groups)}
        return frozenset().union(*wanted.values())

    def stats(self, groups: Iterable[str] | None = None) -> dict[str, Any]:
        """Documents, chunks, last update (ISO), embedder, dim and the access groups seen.

        With ``groups`` (a caller's), only the documents those groups may see are counted and named.
        """
        return self.index.stats(groups)

    # -- keeping the three stores in agreement ---------------------------------------------------
    def index_ids(self) -> dict[str, set[str]]:
        """Chunk ids held by each of the three stores (equal when consistent): for tests and ``repair``."""
        return self.index.index_ids()

    def repair(self) -> int:
        """Make the stores agree after a crash: drop stray chunks, forget sources with missing ones
        (the next ingest re-indexes them). Returns the number of ids fixed."""
        return self.index.repair()

    def repair_report(self, reclaim: bool = False) -> dict[str, Any]:
        """``repair``, saying what it found: stray and missing chunk counts, and the sources forgotten;
        ``reclaim`` also gives the space of removed chunks back to the disk (``bytes_reclaimed``)."""
        return self.index.repair_report(reclaim)

    def rebuild_bm25(self) -> int:
        """Re-tokenize every chunk Chroma holds into a fresh BM25 index; returns the chunks indexed."""
        return self.index.rebuild_bm25()

    @staticmethod
    def drop(
        directory: str | Path,
        *,
        chroma_url: str = "",
        database_url: str = "",
        collection: str = "knowledge",
        pool: Any = None,
    ) -> None:
        """Empty a knowledge base whatever embedder built it (collection, BM25, manifest, trash): the first
        step of re-indexing with another embedder. Open instances must ``reset()`` or be recreated.

        The trash goes too: its chunks carry the old embedder's vectors, which a restore would put into a
        collection of another embedder (another dimension, or the same one and meaningless distances)."""
        KnowledgeIndex.drop(
            directory, chroma_url=chroma_url, database_url=database_url, collection=collection, pool=pool
        )
        trash = Trash(
            Path(directory) / collection,
            database_url=database_url if chroma_url else "",
            namespace=collection,
            pool=pool if chroma_url else None,
        )
        try:
            trash.purge(everything=True)
        finally:
            trash.close()

    def reset(self) -> None:
        """``drop`` this knowledge base and keep using this instance on the empty one."""
        self.index.reset()
        self.trash.purge(everything=True)

    def close(self) -> None:
        """Close the trash and the manifest's connections (a pool handed to the constructor stays open)."""
        self.trash.close()
        self.manifest.close()
