"""Keyword retrieval (the BM25 half of hybrid search), persisted beside Chroma, updated in place.

Why this shape:

* **Persistence is per-chunk rows, not a pickled matrix.** ``<dir>/bm25.sqlite3`` holds
  ``(id, tokens, groups, tag)``; every ``save()`` writes only what changed since the last one, in one SQLite
  transaction, so a crash leaves either the old or the new state and a one-chunk update costs one row.
  The bm25s score matrix lives in memory only and is rebuilt from the rows.
* **Rebuilds are lazy.** Changes bump a counter; the first search afterwards rebuilds once, so an
  ingest of 1,000 chunks costs one rebuild (and, inside ``batch()``, one save per ``FLUSH_ROWS`` rows).
  ``warm()`` rebuilds eagerly, for the end of an ingest.
* **The in-memory terms are loaded on demand.** Only scoring needs every chunk's terms in memory; a
  process that only writes (an ingest) never loads them, so its memory does not grow with the corpus.
  Once loaded (a process that searched), writes keep them current.
* **Permissions filter before ranking.** Disallowed chunks are multiplied by a zero weight mask before
  the top-k is taken, so a secret chunk can never take a slot from (or hint at the presence of) an
  allowed one. ``groups=None`` is the unfiltered admin/eval view; a chunk without groups is visible
  only there.
* **Searches score without the lock.** A rebuild works on copies, outside the state lock (writers never
  wait for it), and swaps in a new ``_Snapshot``; concurrent searches wait for that one rebuild.

Other processes writing the same directory are not seen until ``reload()`` (the manifest's generation
counter says when). Stored tokens come from ``stores.text_analysis.tokenize``; when ``ANALYZER_VERSION`` changes,
``needs_reindex`` turns true and the caller must ``clear()`` and upsert every chunk again.
"""

from __future__ import annotations

import gc
import json
import logging
import sqlite3
import threading
from array import array
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from stores.disk import free_pages_bytes
from stores.sql import switch_to_wal
from stores.text_analysis import ANALYZER_VERSION, tokenize

if TYPE_CHECKING:
    import bm25s

INDEX_FILE = "bm25.sqlite3"
FLUSH_ROWS = 2000  # pending rows written even inside batch(): a huge ingest never holds its rows whole
_ID_PAGE = 500  # ids per "IN (...)" query: under SQLite's variable limit
_MASK_CACHE_SIZE = 256
_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY, tokens TEXT NOT NULL, groups TEXT NOT NULL, tag TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
log = logging.getLogger(__name__)


class _Doc(NamedTuple):
    terms: array  # vocabulary ids, int32: a tenth of the memory of a list of str
    groups: frozenset[str]


@dataclass
class _Snapshot:
    """What one rebuild produced; never mutated afterwards except for the mask cache."""

    model: bm25s.BM25 | None = None
    vocab: dict[str, int] = field(default_factory=dict)
    ids: list[str] = field(default_factory=list)  # row -> chunk id, sorted so ties break by id
    members: dict[str, np.ndarray] = field(default_factory=dict)  # group -> rows
    masks: dict[frozenset[str], np.ndarray] = field(default_factory=dict)

    def mask(self, groups: frozenset[str]) -> np.ndarray:
        """1.0 for rows visible to any of ``groups``, else 0.0 (cached: callers repeat their groups)."""
        cached = self.masks.get(groups)
        if cached is None:
            cached = np.zeros(len(self.ids), dtype=np.float32)
            for group in groups:
                cached[self.members[group]] = 1.0
            if len(self.masks) >= _MASK_CACHE_SIZE:
                self.masks.clear()
            self.masks[groups] = cached
        return cached


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Bulk loops allocate millions of small objects; with a big heap, the cyclic GC's full passes
    doubled rebuild and load times at 100k chunks. Nothing they allocate forms cycles."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _check_groups(groups: object) -> None:
    if isinstance(groups, str | bytes):
        raise TypeError(f"groups must be a collection of group names, not the string {groups!r}")


class BM25Index:
    """BM25 over chunk texts (bm25s), persisted beside Chroma under <dir>, updated incrementally."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / INDEX_FILE
        self.rebuilds = 0  # how many times the score matrix was built (tests and diagnostics)
        self.needs_reindex = False
        self._lock = threading.RLock()  # guards the in-memory state and the pending writes
        self._build_lock = threading.Lock()
        self._changes, self._built = 0, -1  # the snapshot is current when they are equal
        self._local = threading.local()  # per-thread batch depth
        with self._connect() as db:
            switch_to_wal(db)
            db.executescript(_SCHEMA)
            if "tag" not in {row[1] for row in db.execute("PRAGMA table_info(chunks)")}:  # an older file
                db.execute("ALTER TABLE chunks ADD COLUMN tag TEXT NOT NULL DEFAULT ''")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('analyzer', ?)", (ANALYZER_VERSION,))
        self._load()

    # -- state -----------------------------------------------------------------------------------
    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A short-lived connection whose ``with`` block is one transaction."""
        with closing(sqlite3.connect(self.path, timeout=30)) as db, db:
            yield db

    def _load(self) -> None:
        """Drop the in-memory state (unsaved changes too); the file's rows are read when first needed."""
        with self._lock, self._connect() as db:
            stored = db.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
            self.needs_reindex = stored is not None and stored[0] != ANALYZER_VERSION
            if self.needs_reindex:
                log.warning("%s: analyzer %s, code %s: re-index", self.path, stored[0], ANALYZER_VERSION)
            self._loaded = False
            self._vocab: dict[str, int] = {}
            self._docs: dict[str, _Doc] = {}
            self._groupsets: dict[frozenset[str], frozenset[str]] = {}
            self._tags: dict[str, str] = {}  # id -> the caller's tag of what the row holds ('': none)
            self._pending: dict[str, tuple[str, str, str] | None] = {}  # id -> (tokens, groups, tag) | None
            self._pending_tags: dict[str, str] = {}  # id -> a new tag for an unchanged row
            self._snapshot = _Snapshot()
            self._changes += 1

    def _ensure_loaded(self) -> None:
        """Read every row into memory (once): what scoring and the in-memory checks need."""
        with self._lock:
            if self._loaded:
                return
            self.save()  # rows written while unloaded are only in the file (or pending)
            with self._connect() as db, _gc_paused():
                for chunk_id, tokens, groups, tag in db.execute("SELECT id, tokens, groups, tag FROM chunks"):
                    self._docs[chunk_id] = self._doc(tokens.split(), json.loads(groups))
                    if tag:
                        self._tags[chunk_id] = tag
            self._loaded = True
            self._changes += 1

    def _stored(
        self, query: str, ids: Sequence[str] | None = None, *, flush: bool = True
    ) -> list[tuple[str, ...]]:
        """Rows of ``query`` straight from the file (pending rows saved first unless ``flush`` is false), for
        an unloaded index; with ``ids``, ``query`` holds one ``{}`` for their placeholders, run per page."""
        if flush:
            self.save()
        with self._connect() as db:
            if ids is None:
                return list(db.execute(query))
            found: list[tuple[str, ...]] = []
            for start in range(0, len(ids), _ID_PAGE):
                page = ids[start : start + _ID_PAGE]
                found += db.execute(query.format(",".join("?" * len(page))), page).fetchall()
            return found

    def _doc(self, terms: list[str], groups: Iterable[str]) -> _Doc:
        vocab = self._vocab
        ids = array("i", [vocab.setdefault(term, len(vocab)) for term in terms])
        groupset = frozenset(groups)
        return _Doc(ids, self._groupsets.setdefault(groupset, groupset))

    def __len__(self) -> int:
        with self._lock:
            return len(self._docs) if self._loaded else int(self._stored("SELECT count(*) FROM chunks")[0][0])

    def __contains__(self, chunk_id: object) -> bool:
        with self._lock:
            if self._loaded or not isinstance(chunk_id, str):
                return chunk_id in self._docs
            return bool(self._stored("SELECT id FROM chunks WHERE id IN ({})", [chunk_id]))

    def ids(self) -> set[str]:
        with self._lock:
            return (
                set(self._docs) if self._loaded else {row[0] for row in self._stored("SELECT id FROM chunks")}
            )

    def tags(self) -> dict[str, str]:
        """Every indexed chunk id -> its tag ('' when none): what a caller recorded of the text it indexed
        (shared mode: content hash and groups), saved with the row, so it outlives the process."""
        with self._lock:
            if not self._loaded:
                return dict(self._stored("SELECT id, tag FROM chunks"))  # type: ignore[arg-type]
            return {chunk_id: self._tags.get(chunk_id, "") for chunk_id in self._docs}

    def tag_untagged(self, tags: dict[str, str]) -> None:
        """Tag indexed chunks that have no tag yet (others are left alone): the caller vouches that each
        such row holds the text its tag describes. A row tagged meanwhile by someone else keeps that tag:
        if it is wrong, it differs from the manifest's, and the next comparison fetches the text again."""
        with self._lock:
            self._ensure_loaded()
            for chunk_id, tag in tags.items():
                if chunk_id in self._docs and not self._tags.get(chunk_id) and tag:
                    self._tags[chunk_id] = tag
                    self._pending_tags[chunk_id] = tag
            self._autosave()

    def groups_of(self, chunk_id: str) -> frozenset[str]:
        """The groups that may see ``chunk_id``; ``KeyError`` if it is not indexed."""
        self._ensure_loaded()
        return self._docs[chunk_id].groups

    # -- writes ----------------------------------------------------------------------------------
    def upsert(
        self,
        items: Sequence[tuple[str, str, frozenset[str] | Sequence[str]]],
        tags: dict[str, str] | None = None,
    ) -> None:
        """Index ``(chunk_id, text, groups)`` triples, replacing any earlier text of the same ids; each
        row's tag becomes ``tags[chunk_id]``, or '' (unknown) when not given."""
        for chunk_id, text, _ in items:  # validate everything before changing anything
            if not isinstance(text, str):
                raise TypeError(f"text of {chunk_id!r} must be a string, got {type(text).__name__}")
        self.upsert_terms([(chunk_id, tokenize(text), groups) for chunk_id, text, groups in items], tags)

    def upsert_terms(
        self,
        items: Sequence[tuple[str, list[str], frozenset[str] | Sequence[str]]],
        tags: dict[str, str] | None = None,
    ) -> None:
        """``upsert`` with texts already tokenized by ``stores.text_analysis.tokenize``: ingest tokenizes
        in its reading thread, while the embedder runs, and hands the terms over."""
        prepared: list[tuple[str, list[str], frozenset[str]]] = []
        for chunk_id, terms, groups in items:
            if not isinstance(chunk_id, str) or not chunk_id:
                raise ValueError(f"chunk id must be a non-empty string, got {chunk_id!r}")
            _check_groups(groups)
            groupset = frozenset(groups)
            if not all(isinstance(group, str) for group in groupset):
                raise TypeError(f"groups of {chunk_id!r} must be strings, got {sorted(map(repr, groupset))}")
            prepared.append((chunk_id, terms, groupset))
        if not prepared:
            return
        with self._lock:
            if not self._loaded:  # write-only: the rows go to the file, nothing stays in memory
                for chunk_id, terms, groupset in prepared:
                    groups = json.dumps(sorted(groupset), ensure_ascii=False)
                    self._pending[chunk_id] = (
                        " ".join(terms),
                        groups,
                        tags.get(chunk_id, "") if tags else "",
                    )
                self._changes += 1
                self._autosave()
                return
            for chunk_id, terms, groupset in prepared:
                tag = tags.get(chunk_id, "") if tags else ""
                doc = self._doc(terms, groupset)
                old = self._docs.get(chunk_id)
                same = old is not None and old.terms == doc.terms and old.groups == doc.groups
                if same and self._tags.get(chunk_id, "") == tag:
                    continue  # re-ingesting unchanged text costs no rebuild
                self._docs[chunk_id] = doc
                self._set_tag(chunk_id, tag)
                self._pending_tags.pop(chunk_id, None)  # the row below carries the tag
                groups = json.dumps(sorted(groupset), ensure_ascii=False)
                self._pending[chunk_id] = (" ".join(terms), groups, tag)
                if not same:
                    self._changes += 1
            self._autosave()

    def remove(self, chunk_ids: Iterable[str]) -> int:
        """Forget these chunks; returns how many were indexed."""
        if isinstance(chunk_ids, str | bytes):
            raise TypeError("remove() takes an iterable of chunk ids, not one string")
        removed = 0
        with self._lock:
            if not self._loaded:
                ids, pending = list(dict.fromkeys(chunk_ids)), self._pending
                saved = [cid for cid in ids if cid not in pending]
                removed = sum(pending.get(cid) is not None for cid in ids if cid in pending)
                removed += len(self._stored("SELECT id FROM chunks WHERE id IN ({})", saved, flush=False))
                self._pending.update(dict.fromkeys(ids))
                self._changes += bool(removed)
                self._autosave()
                return removed
            for chunk_id in chunk_ids:
                if self._docs.pop(chunk_id, None) is not None:
                    self._pending[chunk_id] = None
                    self._pending_tags.pop(chunk_id, None)
                    self._tags.pop(chunk_id, None)
                    removed += 1
            if removed:
                self._changes += 1
                self._autosave()
        return removed

    def _set_tag(self, chunk_id: str, tag: str) -> None:
        if tag:
            self._tags[chunk_id] = tag
        else:
            self._tags.pop(chunk_id, None)

    def clear(self) -> None:
        """Drop every chunk and stamp the current analyzer (the first step of a re-index)."""
        with self._lock:
            with self._connect() as db:
                db.execute("DELETE FROM chunks")
                db.execute("INSERT OR REPLACE INTO meta VALUES ('analyzer', ?)", (ANALYZER_VERSION,))
            self._load()

    def reload(self) -> None:
        """Save, then re-read the file: picks up what other processes wrote."""
        with self._lock:
            self.save()
            self._load()

    def save(self) -> None:
        """Write the changes since the last save in one transaction (atomic: all or nothing)."""
        with self._lock:
            if not self._pending and not self._pending_tags:
                return
            rows = [(cid, *row) for cid, row in self._pending.items() if row is not None]
            gone = [(cid,) for cid, row in self._pending.items() if row is None]
            retag = [(tag, cid) for cid, tag in self._pending_tags.items()]
            with self._connect() as db:
                db.executemany("DELETE FROM chunks WHERE id = ?", gone)
                db.executemany("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?, ?)", rows)
                db.executemany("UPDATE chunks SET tag = ? WHERE id = ?", retag)
            self._pending.clear()  # only once committed: a failed save is retried by the next one
            self._pending_tags.clear()

    def vacuum(self, *, force: bool = False, min_free: float = 0.1) -> int:
        """Save, then give the space of removed rows back to the disk (when ``force``, or when at least
        ``min_free`` of the file is free pages: it rewrites the whole file); returns the bytes freed."""
        with self._lock:
            self.save()
            before = self.path.stat().st_size
            with closing(sqlite3.connect(self.path, timeout=30, isolation_level=None)) as db:
                free = free_pages_bytes(db)
                if not force and free < min_free * before:
                    return 0
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return max(0, before - self.path.stat().st_size)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Defer saving this thread's upserts/removes to the end of the block: one transaction, or one per
        ``FLUSH_ROWS`` rows for a bigger block (a killed ingest's rows are found by ``repair``)."""
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1
            if not self._local.depth:
                self.save()  # also after an error: memory already holds the changes

    def _autosave(self) -> None:
        if not getattr(self._local, "depth", 0) or len(self._pending) >= FLUSH_ROWS:
            self.save()

    # -- search ----------------------------------------------------------------------------------
    def warm(self) -> None:
        """Rebuild now if anything changed (~4 s per 100k chunks), so that no user's search pays for it:
        call it at the end of an ingest."""
        self._current()

    def _current(self) -> _Snapshot:
        """A snapshot of the latest changes; rebuilt outside the state lock, so writers never wait."""
        with self._build_lock:  # one rebuild at a time: concurrent searches wait for it, then share it
            with self._lock:
                self._ensure_loaded()
                if self._built == self._changes:
                    return self._snapshot
                # copies: later upserts add terms (vocabulary ids) this matrix has no column for
                changes, docs, vocab = self._changes, dict(self._docs), dict(self._vocab)
            snapshot = self._rebuild(docs, vocab)
            with self._lock:
                self._snapshot, self._built = snapshot, changes
            return snapshot

    def _rebuild(self, docs: dict[str, _Doc], vocab: dict[str, int]) -> _Snapshot:
        """Score matrix and group rows for ``docs``, whose terms are ids in ``vocab`` (both copies)."""
        import bm25s  # imports scipy and numba: ~0.6 s, paid by the first search, not by every import

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets itself to DEBUG on import

        self.rebuilds += 1
        ids = sorted(docs)
        corpus = [docs[chunk_id].terms for chunk_id in ids]
        rows: dict[str, list[int]] = {}
        for row, chunk_id in enumerate(ids):
            for group in docs[chunk_id].groups:
                rows.setdefault(group, []).append(row)
        members = {group: np.asarray(found, dtype=np.int64) for group, found in rows.items()}
        if not any(corpus):  # bm25s cannot index a corpus without a single term
            return _Snapshot(ids=ids, members=members)
        model = bm25s.BM25()  # Lucene BM25, k1=1.5, b=0.75
        with _gc_paused():
            model.index((corpus, vocab), create_empty_token=False, show_progress=False)
        return _Snapshot(model=model, vocab=vocab, ids=ids, members=members)

    def search(
        self, query: str, k: int, groups: Collection[str] | None = None, *, current: bool = True
    ) -> list[tuple[str, float]]:
        """Up to ``k`` ``(chunk_id, score)`` best first, among chunks sharing a group with ``groups``
        (``None``: all chunks); only chunks matching at least one query term (score > 0).

        ``current=False`` scores with the last built matrix even when changes are waiting (a background
        catch-up is applying them), instead of waiting for the rebuild; only a never-built index builds."""
        return self.match(query, k, groups, current=current)[0]

    def match(
        self, query: str, k: int, groups: Collection[str] | None = None, *, current: bool = True
    ) -> tuple[list[tuple[str, float]], float]:
        """:meth:`search`'s hits, and the share of the query's distinct terms the index knows at all.

        The share says how much of the question keyword search could judge: a Chinese question over
        English documents matches a stray number or name, and its best hit, however weak, must not count
        as much as a match of the whole question."""
        if groups is not None:
            _check_groups(groups)
        if k <= 0:
            return [], 0.0
        terms = set(tokenize(query))  # each distinct term counts once: bounds the cost of a pasted page
        if not terms:
            return [], 0.0
        snap = self._current() if current or self._built < 0 else self._snapshot
        if snap.model is None:
            return [], 0.0
        columns = sorted(snap.vocab[term] for term in terms if term in snap.vocab)
        coverage = len(columns) / len(terms)
        if not columns:
            return [], coverage
        mask = None
        if groups is not None:
            visible = frozenset(group for group in groups if group in snap.members)
            if not visible:
                return [], coverage
            mask = snap.mask(visible)
        scores = snap.model.get_scores_from_ids(columns, weight_mask=mask)
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:  # keep everything tied with the k-th score, then order deterministically
            kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
            hits = hits[scores[hits] >= kth]
        best = hits[np.lexsort((hits, -scores[hits]))[:k]]
        return [(snap.ids[row], float(scores[row])) for row in best], coverage
