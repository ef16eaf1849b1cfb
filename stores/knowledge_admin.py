"""Keeping a knowledge base's three stores (Chroma, BM25, manifest) in agreement: checks and repairs.

Split from :mod:`stores.knowledge` so that the search path reads on its own; :class:`KnowledgeMaintenance`
is a mixin of :class:`stores.knowledge.KnowledgeBase` and uses its stores directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stores.chroma import chroma_client, open_collection
from stores.manifest import Manifest


class KnowledgeMaintenance:
    """Housekeeping methods of a KnowledgeBase (``self`` provides the stores and the manifest)."""

    manifest: Manifest
    _collection: Any
    _bm25: Any
    _client: Any
    _generation: Any
    _groups_seen: Any
    _chroma_url: str
    data_dir: Any
    collection_name: str
    embedder: Any

    def _refresh(self) -> None: ...  # provided by KnowledgeBase

    def _delete_chunks(self, ids: Any) -> int: ...  # provided by KnowledgeBase

    def index_ids(self) -> dict[str, set[str]]:
        """Chunk ids held by each of the three stores (equal when consistent): for tests and ``repair``."""
        self._refresh()
        chroma = {cid for page in self._stored([]) for cid in page["ids"]}
        return {"chroma": chroma, "bm25": set(self._bm25.ids()), "manifest": self.manifest.chunk_ids()}

    def _stored(self, include: list[str], size: int = 1000) -> Iterator[dict[str, Any]]:
        """Everything Chroma holds for this collection, a page at a time."""
        offset = 0
        while (page := self._collection.get(include=include, limit=size, offset=offset))["ids"]:  # type: ignore[arg-type]
            yield dict(page)
            offset += len(page["ids"])

    def repair(self) -> int:
        """Make the stores agree after a crash: drop stray chunks, forget sources with missing ones
        (the next ingest re-indexes them). Returns the number of ids fixed."""
        with self.manifest.lock():
            ids = self.index_ids()
            stray = (ids["chroma"] | ids["bm25"]) - ids["manifest"]
            missing = ids["manifest"] - (ids["chroma"] & ids["bm25"])
            broken = {s: r for s, r in self.manifest.records().items() if missing & set(r.chunk_ids)}
            self._delete_chunks(sorted(stray.union(*(r.chunk_ids for r in broken.values()))))
            self.manifest.apply([], broken)
            self._generation = self.manifest.generation()
            self._groups_seen = None  # our own write may have added groups
            return len(stray) + len(missing)

    def rebuild_bm25(self) -> int:
        """Re-tokenize every chunk Chroma holds into a fresh BM25 index (after an analyzer change, or on
        a replica sharing a Chroma server); returns the chunks indexed."""
        from stores.knowledge import _clean_groups as clean_groups  # the one rule for group names

        with self.manifest.lock():
            self._bm25.clear()
            with self._bm25.batch():
                for page in self._stored(["documents", "metadatas"]):
                    rows = zip(page["ids"], page["documents"], page["metadatas"], strict=True)
                    groups = (clean_groups(str(m.get("groups", "")).split(",")) for _, _, m in rows)
                    self._bm25.upsert(list(zip(page["ids"], page["documents"], groups, strict=True)))
            return len(self._bm25)

    @staticmethod
    def drop(directory: str | Path, *, chroma_url: str = "", collection: str = "knowledge") -> None:
        """Empty a knowledge base whatever embedder built it (collection, BM25, manifest): the first step
        of re-indexing with another embedder. Open instances must ``reset()`` or be recreated."""
        from stores.bm25_index import BM25Index

        manifest = Manifest(Path(directory) / collection)
        with manifest.lock():
            with contextlib.suppress(Exception):  # no such collection: nothing to drop
                chroma_client(directory, chroma_url).delete_collection(collection)
            BM25Index(manifest.directory / "bm25").clear()
            manifest.clear()
            manifest.set_meta(embedder="", dim=0)

    def reset(self) -> None:
        """``drop`` this knowledge base and keep using this instance on the empty one."""
        with self.manifest.lock():
            self.drop(self.data_dir, chroma_url=self._chroma_url, collection=self.collection_name)
            self._collection = open_collection(self._client, self.collection_name, self.embedder)
            self._bm25.reload()
            self._generation = self.manifest.generation()
            self._groups_seen = None  # our own write may have added groups
