"""Long-term memories in a Chroma collection of their own.

Every read and write names the user at the storage layer: reads are a Chroma ``where`` on ``user_id``
(never a filter applied after the fact), writes and deletes look the record up by ``user_id`` AND id and
delete with both, under a per-user lock so one user's writes are serialised. The one read across users is
the sweep of expired memories (on first use, then hourly), and each of its deletes names the user again. Recall is hybrid: the
jieba keyword overlap, with each shared term weighted by its rarity among the user's memories
(BM25's IDF), and the vector similarity, fused by a weighted sum of normalised scores, ties to the newer.
"""

from __future__ import annotations

import builtins  # the store's own ``list`` method hides the builtin in the annotations after it
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.messages import BaseMessage, HumanMessage

from stores.audit import AuditEntry, AuditStore
from stores.base import MemoryRecord
from stores.embeddings import Embedder
from stores.memory.attributes import asked_attribute, attribute_of
from stores.memory.checks import memory_tool_ran
from stores.memory.history import HISTORY, memory_kind
from stores.memory.questions import about_user_as_a_whole
from stores.memory.recall import (
    REFERENCE_MEMORIES,
    VECTOR_WEIGHT,
    baselines,
    fuse,
    keyword_scores,
    reference_language,
    related,
)
from stores.memory.rules import (
    MAX_SNAPSHOT,
    MEMORY_TYPES,
    ExtractionRequest,
    Extractor,
    apply_operations,
    normalise_content,
)
from stores.text_analysis import query_focus
from stores.vector_cache import CachedEmbedder

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import LiteralValue, LogicalOperator, Where, WhereOperator

log = logging.getLogger("kb_agent.memory")
COLLECTION = "memories"
RECENT_USER_MESSAGES = 3  # the latest one is what the rules judge; earlier ones are context
SWEEP_EVERY = 3600.0  # seconds between one process's sweeps of expired memories (the first on first use)


def utcnow() -> datetime:
    return datetime.now(UTC)


def _norm_key(content: str) -> str:
    return hashlib.sha256(normalise_content(content).encode()).hexdigest()[:24]


def _expiry_test(operator: WhereOperator, timestamp: float) -> Where:
    """``expires_ts <operator> timestamp`` as a Chroma filter (an ``expires_ts`` of 0.0 never expires)."""
    test: dict[WhereOperator | LogicalOperator, LiteralValue] = {operator: timestamp}
    return {"expires_ts": test}


def memory_id(user_id: str, memory_type: str, content: str) -> str:
    """The id of a fact: the same (user, type, normalised content) gets the same id in every process, so
    two processes adding one fact at once write one record (a per-process lock cannot see the other)."""
    key = "\x1f".join((user_id, memory_type, normalise_content(content)))
    return "mem_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def recent_user_messages(messages: Sequence[BaseMessage], limit: int = RECENT_USER_MESSAGES) -> list[str]:
    """The text of the last ``limit`` user messages: assistant and tool text is never a user fact."""
    texts: list[str] = [m.text for m in messages if isinstance(m, HumanMessage)]
    return [t for t in texts if t.strip()][-limit:]


class ChromaMemoryStore:
    """The :class:`~stores.base.MemoryStore` of the application: storage, recall and validated updates.

    ``extractor`` proposes operations from a turn (``models.extractor``; the offline extractor when
    None); ``ttl_days`` gives memory types an expiry (e.g. ``{"episodic": 30}``).
    ``candidates`` is how many vector neighbours recall asks Chroma for and ``vector_weight`` their share
    of the fused score (:func:`fuse`); ``rrf_k`` is accepted for callers of the earlier rank fusion and
    no longer used by recall. ``pool`` (the deployment's Postgres pool) holds the audit history unless
    ``audit`` is given; else ``database_url`` opens a pool of the audit's own.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        embedder: Embedder,
        chroma_url: str = "",
        collection: str = COLLECTION,
        audit: AuditStore | None = None,
        database_url: str = "",
        extractor: Extractor | None = None,
        candidates: int = 50,
        rrf_k: int = 60,
        vector_weight: float = VECTOR_WEIGHT,
        ttl_days: Mapping[str, float] | None = None,
        clock: Callable[[], datetime] = utcnow,
        client: ClientAPI | None = None,
        pool: Any = None,
    ) -> None:
        self.embedder = embedder
        self._where = (data_dir, chroma_url, client, collection)
        self._opened: Collection | None = None
        self._open_lock = threading.Lock()
        self.audit = audit if audit is not None else AuditStore(data_dir, database_url, pool=pool)
        self.extractor = extractor
        if not 0.0 <= vector_weight <= 1.0:
            raise ValueError(f"vector_weight must be within [0, 1], got {vector_weight}")
        self.candidates, self.rrf_k, self.vector_weight = candidates, rrf_k, vector_weight
        self._reference_vectors: dict[str, np.ndarray] | None = None
        self.ttl_days = dict(ttl_days or {})
        self.clock = clock
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._swept_at: float | None = None
        self._sweeping = threading.Lock()

    @property
    def _collection(self) -> Collection:
        """The Chroma collection, opened (and created) on first use: opening the store costs nothing."""
        if self._opened is None:
            from stores.chroma import chroma_client, open_collection

            data_dir, url, client, name = self._where
            with self._open_lock:
                if self._opened is None:
                    client = client if client is not None else chroma_client(data_dir, url)
                    self._opened = open_collection(client, name, self.embedder, kind="memories")
        return self._opened

    def _nothing_stored(self) -> bool:
        """True when no embedded Chroma exists under the data folder yet: a read finds nothing without
        starting Chroma (a turn that recalls no memory then never imports it)."""
        data_dir, url, client, _ = self._where
        return self._opened is None and not url and client is None and not Path(data_dir, "chroma").exists()

    def lock(self, user_id: str) -> threading.RLock:
        """The write lock of one user (re-entrant: a batch holds it while its writes take it again)."""
        with self._locks_guard:
            return self._locks.setdefault(user_id, threading.RLock())

    # -- scoping ---------------------------------------------------------------------------------
    @staticmethod
    def _owned(user_id: str) -> Where:
        if not isinstance(user_id, str) or not user_id:
            raise ValueError("a memory operation needs a user id")
        return {"user_id": user_id}

    def _live(self, user_id: str) -> Where:
        now = self.clock().timestamp()
        alive: Where = {"$or": [_expiry_test("$eq", 0.0), _expiry_test("$gt", now)]}
        return {"$and": [self._owned(user_id), alive]}

    @staticmethod
    def _record(memory_id: str, document: str | None, meta: Mapping[str, Any]) -> MemoryRecord:
        return MemoryRecord(
            id=memory_id,
            user_id=str(meta.get("user_id")),
            memory_type=str(meta.get("memory_type")),
            content=document or "",
            source_thread_id=str(meta.get("source_thread_id")) or None,
            created_at=str(meta.get("created_at")),
            updated_at=str(meta.get("updated_at")),
            expires_at=str(meta.get("expires_at")) or None,
        )

    def _rows(self, **query: Any) -> list[tuple[MemoryRecord, float]]:
        """(record, updated timestamp) for a Chroma ``get``."""
        if self._nothing_stored():
            return []
        got = self._collection.get(include=["documents", "metadatas"], **query)
        rows = []
        for memory_id, document, meta in zip(
            got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
        ):
            updated = meta.get("updated_ts", 0.0)  # a float, as _metadata writes it
            updated_ts = float(updated) if isinstance(updated, int | float | str) else 0.0
            rows.append((self._record(memory_id, document, meta), updated_ts))
        return rows

    def _metadata(self, record: MemoryRecord, updated: datetime, expires: datetime | None) -> dict[str, Any]:
        return {
            "user_id": record["user_id"],
            "memory_type": record["memory_type"],
            "norm": _norm_key(record["content"]),
            "source_thread_id": record.get("source_thread_id") or "",
            "created_at": record["created_at"],
            "updated_at": updated.isoformat(),
            "updated_ts": updated.timestamp(),
            "expires_at": expires.isoformat() if expires else "",
            "expires_ts": expires.timestamp() if expires else 0.0,
        }

    def _expiry(self, memory_type: str, now: datetime, expires_at: datetime | None = None) -> datetime | None:
        if expires_at is not None:
            return expires_at
        days = self.ttl_days.get(memory_type)
        return now + timedelta(days=days) if days else None

    # -- reads -----------------------------------------------------------------------------------
    def get(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """This user's memory ``memory_id`` (expired ones included), or None — also for other users' ids."""
        if not isinstance(memory_id, str) or not memory_id:
            return None
        rows = self._rows(ids=[memory_id], where=self._owned(user_id))
        return rows[0][0] if rows else None

    def list(
        self, user_id: str, *, include_expired: bool = False, limit: int | None = None
    ) -> builtins.list[MemoryRecord]:
        """This user's memories, newest first."""
        where = self._owned(user_id) if include_expired else self._live(user_id)
        rows = sorted(self._rows(where=where), key=lambda row: (-row[1], row[0]["id"]))
        self._sweep_if_due()  # after the read: a store that cannot be read fails with the read's own error
        return [record for record, _ in rows[:limit]]

    def find_same(self, user_id: str, memory_type: str, content: str) -> MemoryRecord | None:
        """The memory that (user, type, normalised content) already names (rule 5's unique key)."""
        found = self.get(user_id, memory_id(user_id, memory_type, content))
        if found is not None and found["memory_type"] == memory_type:
            return found
        where = {"$and": [self._owned(user_id), {"memory_type": memory_type}, {"norm": _norm_key(content)}]}
        rows = self._rows(where=where)
        return rows[0][0] if rows else None

    def recall(self, user_id: str, query: str, top_k: int = 5) -> builtins.list[MemoryRecord]:
        """This user's live memories most relevant to ``query``: keyword + vector fused, ties to the newer.
        A question about the user as a whole ("what do you know about me?") gets their facts first."""
        query = query_focus(query)  # a pasted page is recalled by its question
        rows = self._rows(where=self._live(user_id))
        self._sweep_if_due()
        if not rows or top_k <= 0:
            return []
        if about_user_as_a_whole(query):  # relevance to a question with no topic picks at random
            return [MemoryRecord(**record, related=True) for record in self._facts_first(rows)[:top_k]]
        keyword, vector, close = self._scores(user_id, query, rows)
        ranked = self._ranked(rows, fuse(keyword, vector, self.vector_weight))[:top_k]
        return [MemoryRecord(**record, related=record["id"] in close) for record in ranked]

    @staticmethod
    def _facts_first(rows: Sequence[tuple[MemoryRecord, float]]) -> builtins.list[MemoryRecord]:
        """What answers "what do you know about me?": facts and preferences (semantic, procedural), then
        what happened to the user, then what they asked; the newer first within each."""
        order = {"semantic": 0, "procedural": 0, "episodic": 1}

        def rank(row: tuple[MemoryRecord, float]) -> tuple[int, int, float, str]:
            record, updated = row
            history = memory_kind(record) == HISTORY
            return history, order.get(record["memory_type"], 1), -updated, record["id"]

        return [record for record, _ in sorted(rows, key=rank)]

    def _scores(
        self, user_id: str, query: str, rows: Sequence[tuple[MemoryRecord, float]]
    ) -> tuple[dict[str, float], dict[str, float], set[str]]:
        """Recall's inputs for ``rows`` (this user's live memories): keyword and vector scores by id, and
        the ids judged related to the query (:func:`stores.memory.recall.related`).

        The vector side is the ``candidates`` nearest memories from a Chroma query with the same
        ``where`` (user and expiry), as cosine similarity; an empty query scores nothing.
        """
        if not query.strip() or not rows:
            return {}, {}, set()
        by_id = {record["id"]: record for record, _ in rows}
        contents = {mid: r.get("content", "") for mid, r in by_id.items()}
        keyword = keyword_scores(query, contents)
        query_vector = self.embedder.embed_query(query)
        found = self._collection.query(
            query_embeddings=[query_vector.tolist()],
            n_results=min(self.candidates, len(rows)),
            where=self._live(user_id),
            include=["distances"],
        )
        distances = found["distances"]
        if distances is None:  # asked for in ``include``: Chroma returns them
            raise RuntimeError("the memory collection's query returned no distances")
        pairs = zip(found["ids"][0], distances[0], strict=True)  # cosine space: 1 - similarity
        similarity = {m: 1.0 - float(d) for m, d in pairs if m in by_id}
        baseline = baselines(query_vector, self._references())
        close = related(keyword, similarity, contents, baseline)
        if (asked := asked_attribute(query)) is not None:  # "where do I work?" and "employed at …"
            close |= {mid for mid, text in contents.items() if attribute_of(text) == asked}
        # Ranked by how far each memory stands above the unrelated ones of its own language: a question
        # is closer to every text in its language, which would bury a memory written in the other one.
        vector = {m: sim - baseline[reference_language(contents[m])] for m, sim in similarity.items()}
        return keyword, vector, close

    def _references(self) -> dict[str, np.ndarray]:
        """The neutral memories' vectors under this store's embedder: embedded once per data folder (kept
        beside the tool vectors), read once per process."""
        if self._reference_vectors is None:
            cache = Path(self._where[0]) / "cache" / "memory-reference-vectors.sqlite"
            embedder = CachedEmbedder(self.embedder, cache)
            self._reference_vectors = {
                lang: np.asarray(embedder.embed_documents(list(texts)), dtype=np.float32)
                for lang, texts in REFERENCE_MEMORIES.items()
            }
        return self._reference_vectors

    @staticmethod
    def _ranked(rows: Sequence[tuple[MemoryRecord, float]], score: Mapping[str, float]) -> builtins.list[MemoryRecord]:
        """``rows`` by ``score`` (missing ids score 0), then the newer first, then id."""
        order = sorted(
            rows, key=lambda row: (-round(score.get(row[0]["id"], 0.0), 12), -row[1], row[0]["id"])
        )
        return [record for record, _ in order]

    def search(self, user_id: str, query: str, top_k: int = 10) -> builtins.list[MemoryRecord]:
        return self.recall(user_id, query, top_k)

    def snapshot(self, user_id: str, query: str, limit: int = MAX_SNAPSHOT) -> builtins.list[MemoryRecord]:
        """The existing memories shown to the extraction model: all, or the ``limit`` most relevant."""
        memories = self.list(user_id)
        return memories if len(memories) <= limit else self.recall(user_id, query, limit)

    # -- writes (each scoped by user id; callers of several hold ``lock(user_id)``) ---------------
    def add(
        self,
        user_id: str,
        memory_type: str,
        content: str,
        *,
        thread_id: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[MemoryRecord, bool]:
        """Upsert on (user, type, normalised content): (the record, whether it is new)."""
        added = self._add(user_id, memory_type, content, thread_id=thread_id, expires_at=expires_at)
        self._sweep_if_due()  # after the write, as after a read
        return added

    def _add(
        self,
        user_id: str,
        memory_type: str,
        content: str,
        *,
        thread_id: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[MemoryRecord, bool]:
        if memory_type not in MEMORY_TYPES:
            raise ValueError(f"memory type must be one of {', '.join(MEMORY_TYPES)}, got {memory_type!r}")
        content = content.strip()
        with self.lock(user_id):
            now = self.clock()
            expires = self._expiry(memory_type, now, expires_at)
            same = self.find_same(user_id, memory_type, content)
            if same is not None:  # already remembered: refresh its time (and expiry), keep one record
                self._collection.update(ids=[same["id"]], metadatas=[self._metadata(same, now, expires)])
                return self.get(user_id, same["id"]) or same, False
            record = MemoryRecord(
                id=memory_id(user_id, memory_type, content),
                user_id=user_id,
                memory_type=memory_type,
                content=content,
                source_thread_id=thread_id,
                created_at=now.isoformat(),
            )
            vector = self.embedder.embed_documents([content])[0].tolist()
            self._collection.upsert(  # another process adding the same fact now writes the same record
                ids=[record["id"]],
                documents=[content],
                embeddings=[vector],
                metadatas=[self._metadata(record, now, expires)],
            )
            return self.get(user_id, record["id"]) or record, True

    def update(self, user_id: str, memory_id: str, content: str) -> tuple[MemoryRecord, MemoryRecord] | None:
        """Replace the content of this user's memory: (old, new), or None when it is not this user's."""
        content = content.strip()
        with self.lock(user_id):
            old = self.get(user_id, memory_id)
            if old is None:
                return None
            now = self.clock()
            new = MemoryRecord(**{**old, "content": content})
            expires = self._expiry(old["memory_type"], now)
            vector = self.embedder.embed_documents([content])[0].tolist()
            self._collection.upsert(  # last writer wins, also over another process's delete
                ids=[memory_id],
                documents=[content],
                embeddings=[vector],
                metadatas=[self._metadata(new, now, expires)],
            )
            return old, self.get(user_id, memory_id) or new

    def delete(self, user_id: str, memory_id: str) -> MemoryRecord | None:
        """Delete this user's memory (Chroma ``delete`` with the id AND ``where`` user_id); None if absent."""
        with self.lock(user_id):
            old = self.get(user_id, memory_id)
            if old is None:
                return None
            self._collection.delete(ids=[memory_id], where=self._owned(user_id))
            return old

    def _sweep_if_due(self) -> None:
        """Purge every user's expired memories on this store's first use, then every ``SWEEP_EVERY`` seconds:
        reads already skip them, and this keeps them from being stored for ever. Never fails the read."""
        now = time.monotonic()
        if self._swept_at is not None and now - self._swept_at < SWEEP_EVERY:
            return
        if self._nothing_stored():
            self._swept_at = now  # nothing stored, nothing expired
            return
        if not self._sweeping.acquire(blocking=False):
            return
        try:
            self._swept_at = now
            purged = self.purge_all_expired()
            if purged:
                log.info("purged %d expired memories", purged)
        except Exception as exc:  # the next sweep tries again; the read goes on
            log.warning("could not purge expired memories: %s", exc)
        finally:
            self._sweeping.release()

    def purge_all_expired(self) -> int:
        """Delete every user's expired memories, each recorded in its user's audit history; returns how many.
        A delete names the user and re-checks the expiry, so a memory renewed meanwhile stays."""
        now = self.clock().timestamp()
        expired: builtins.list[Where] = [_expiry_test("$gt", 0.0), _expiry_test("$lte", now)]
        got = self._collection.get(where={"$and": expired}, include=["documents", "metadatas"])
        for found, document, meta in zip(
            got["ids"], got["documents"] or [], got["metadatas"] or [], strict=False
        ):
            record = self._record(found, document, meta)
            self._collection.delete(ids=[found], where={"$and": [self._owned(record["user_id"]), *expired]})
            entry = AuditEntry(
                user_id=record["user_id"],
                action="EXPIRE",
                status="applied",
                source="expiry",
                memory_id=found,
                memory_type=record["memory_type"],
                old_content=record["content"],
                reason=f"expired at {record['expires_at']}",
            )
            self.audit.record(entry)
        return len(got["ids"])

    def purge_expired(self, user_id: str) -> int:
        """Delete this user's expired memories (recall already ignores them); returns how many."""
        now = self.clock().timestamp()
        where: Where = {"$and": [self._owned(user_id), _expiry_test("$gt", 0.0), _expiry_test("$lte", now)]}
        if self._nothing_stored():
            return 0
        with self.lock(user_id):
            ids = self._collection.get(where=where, include=[])["ids"]
            if ids:
                self._collection.delete(ids=ids, where=self._owned(user_id))
        return len(ids)

    # -- validated changes -------------------------------------------------------------------------
    def apply(
        self,
        raw: str | Mapping[str, Any] | None,
        *,
        user_id: str,
        thread_id: str | None,
        latest_user_message: str,
        snapshot: Sequence[MemoryRecord],
        source: str = "extraction",
        explicit_request: bool = False,
    ) -> builtins.list[AuditEntry]:
        """Proposals through the seven rules under this user's lock; the audit entries they produced."""
        with self.lock(user_id):
            return apply_operations(
                raw,
                writer=self,
                audit=self.audit,
                user_id=user_id,
                thread_id=thread_id,
                latest_user_message=latest_user_message,
                snapshot=snapshot,
                source=source,
                explicit_request=explicit_request,
            )

    def manage(
        self,
        user_id: str,
        action: str,
        *,
        content: str | None = None,
        memory_type: str | None = None,
        memory_id: str | None = None,
        thread_id: str | None = None,
        source: str = "cli",
        latest_user_message: str = "",
        explicit_request: bool = True,
    ) -> AuditEntry:
        """One change asked for outside extraction: same rules, same audit.

        From the CLI or a chat command the command itself is the user's explicit request; a tool passes
        ``explicit_request=False`` and the user's latest message, so rule 3 still wants a forget intent.
        """
        target = self.get(user_id, memory_id) if memory_id else None
        if action == "UPDATE" and memory_type is None:  # corrections keep the type; rule 6 judges the target
            memory_type = target.get("memory_type") if target is not None else MEMORY_TYPES[0]
        operation = {
            "action": action,
            "type": memory_type,
            "content": content,
            "target_id": memory_id,
            "confidence": 1.0,
        }
        entries = self.apply(
            {"operations": [operation]},
            user_id=user_id,
            thread_id=thread_id,
            latest_user_message=latest_user_message,
            snapshot=[target] if target is not None else [],
            source=source,
            explicit_request=explicit_request,
        )
        return entries[0]

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        """Extract from the recent user messages, validate, apply; returns the changes applied.

        The extraction call runs without the lock (it may be slow); the rules and writes run under it.
        Extractor errors propagate to the caller, which logs them (the answer is already saved).
        """
        texts = recent_user_messages(messages)
        if not texts or memory_tool_ran(messages):
            return 0
        latest = texts[-1]
        snapshot = self.snapshot(user_id, latest)
        extractor = self.extractor
        if extractor is None:
            from stores.memory.extraction import OfflineExtractor

            extractor = self.extractor = OfflineExtractor()
        request = ExtractionRequest(user_id, latest, tuple(texts[:-1]), tuple(snapshot))
        try:
            raw = extractor(request)
        except Exception as exc:  # audited, then the caller logs it: the answer is already saved
            self.audit.record(
                AuditEntry(
                    user_id=user_id,
                    action="EXTRACT",
                    status="failed",
                    thread_id=thread_id,
                    reason=f"{type(exc).__name__}: {exc}"[:500],
                )
            )
            raise
        entries = self.apply(
            raw, user_id=user_id, thread_id=thread_id, latest_user_message=latest, snapshot=snapshot
        )
        applied = sum(entry.status == "applied" for entry in entries)
        rejected = sum(entry.status == "rejected" for entry in entries)
        log.info(
            "memory update user=%s thread=%s applied=%d rejected=%d", user_id, thread_id, applied, rejected
        )
        return applied
