"""Chroma clients and collections: embedded on disk by default, a Chroma server when a URL is set.

Every collection is opened with our embedding function and records which embedder and dimension built
it; opening it with another embedder is refused with a message that says to re-index, because mixing
vector spaces silently returns nonsense.

A server client waits at most :data:`stores.faults.CHROMA_SECONDS` for each request (Chroma's own client
waits forever), and a server lost or silent mid-command is one :class:`~stores.faults.StoreFailure` naming
``KB_AGENT_CHROMA_URL``, whichever store's call met it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import chromadb
import httpx
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.config import Settings
from chromadb.utils.embedding_functions import register_embedding_function

from stores import faults
from stores.base import StoreUnavailableError
from stores.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # no phoning home, ever
_clients: dict[str, ClientAPI] = {}
_lock = threading.Lock()


class EmbeddingMismatchError(ValueError):
    """The collection was built with another embedder or dimension."""


def _with_deadline(client: ClientAPI, url: str) -> None:
    """Give every request of a server ``client`` a deadline, and name its transport errors in one line.

    Chroma's client builds its httpx session with ``timeout=None`` and has no setting for it, so the
    deadline is set on that session, and its one request method is wrapped. Both are Chroma's internals:
    tests/unit/stores/test_faults.py fails if a release renames them.
    """
    server = client._server  # type: ignore[attr-defined]
    server._session.timeout = httpx.Timeout(faults.CHROMA_SECONDS, connect=faults.CHROMA_CONNECT_SECONDS)
    request = server._make_request

    def make_request(method: str, path: str, **kwargs: Any) -> Any:
        try:
            return request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise faults.chroma_server_failure(url, exc, server._session.timeout) from exc

    server._make_request = make_request


def _within(seconds: float, build: Callable[[], ClientAPI]) -> ClientAPI:
    """``build()``, given up after ``seconds``: Chroma's server client asks its first questions while it is
    built, before a deadline can be set on its session. It runs on a thread of its own, abandoned if the
    server never answers (the command ends; a signal still reaches the waiting main thread)."""
    import httpx

    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["client"] = build()
        except BaseException as exc:
            done["error"] = exc

    builder = threading.Thread(target=run, name="chroma-connect", daemon=True)
    builder.start()
    builder.join(seconds)
    if builder.is_alive():
        raise httpx.ReadTimeout(f"no answer within {seconds:g} s")
    if "error" in done:
        raise done["error"]
    client: ClientAPI = done["client"]
    return client


def _answers(url: str) -> None:
    """Ask the server for its heartbeat, within the deadline: Chroma's client asks its first questions
    while it is built, before a deadline can be set on it."""
    try:
        httpx.get(
            f"{url.rstrip('/')}/api/v2/heartbeat",
            timeout=httpx.Timeout(faults.CHROMA_SECONDS, connect=faults.CHROMA_CONNECT_SECONDS),
        ).raise_for_status()
    except httpx.HTTPError as exc:
        raise StoreUnavailableError(
            f"KB_AGENT_CHROMA_URL: cannot reach the Chroma server at {url} ({type(exc).__name__}); "
            "check the URL and that `chroma run` is up"
        ) from None


@register_embedding_function
class ChromaEmbedding(EmbeddingFunction[Documents]):
    """Our embedder as Chroma's embedding function, so Chroma never falls back to its downloading default."""

    def __init__(self, embedder: Embedder | None = None, name: str = DEFAULT_EMBEDDER) -> None:
        self.embedder = embedder if embedder is not None else get_embedder(name)

    def __call__(self, input: Documents) -> Embeddings:
        return list(self.embedder.embed_documents(list(input)))

    def embed_query(self, input: Documents) -> Embeddings:
        return [self.embedder.embed_query(text) for text in input]

    @staticmethod
    def name() -> str:
        return "kb-agent"

    def default_space(self) -> Any:
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"embedder": self.embedder.name}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> ChromaEmbedding:
        return ChromaEmbedding(name=str(config.get("embedder", DEFAULT_EMBEDDER)))


@contextlib.contextmanager
def _first_open_lock(client_path: str | None) -> Iterator[None]:
    """Hold a cross-process lock beside an embedded Chroma folder (no-op for a server).

    Chroma creates its tables on a client's first start and a collection on first use without one, so
    two processes opening a fresh folder at once fail ("table collections already exists", "database
    is locked"); opening is rare and short, so it is simply serialised.
    """
    if not client_path:
        yield
        return
    lock_path = Path(client_path)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path.with_name(lock_path.name + ".open-lock"), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _embedded_path(client: ClientAPI) -> str | None:
    """The folder of an embedded client, None for a server client."""
    with contextlib.suppress(Exception):
        settings = client.get_settings()
        if settings.is_persistent and settings.persist_directory:
            return str(settings.persist_directory)
    return None


def chroma_client(data_dir: str | Path, url: str = "") -> ClientAPI:
    """``HttpClient`` for ``http(s)://host:port`` (``KB_AGENT_CHROMA_URL``), else a ``PersistentClient``
    under ``<data_dir>/chroma``; one client per location per process."""
    key = url or str(Path(data_dir, "chroma").resolve())
    with _lock:
        if key not in _clients:
            settings = Settings(anonymized_telemetry=False, allow_reset=True)
            if url:
                parsed = urlparse(url)
                if parsed.scheme not in {"http", "https"} or not parsed.hostname:
                    raise ValueError(f"KB_AGENT_CHROMA_URL={url!r} must look like http://host:8000")
                _answers(url)
                host = parsed.hostname
                try:
                    client = _within(
                        faults.CHROMA_SECONDS,
                        lambda: chromadb.HttpClient(
                            host=host,
                            port=parsed.port or (443 if parsed.scheme == "https" else 8000),
                            ssl=parsed.scheme == "https",
                            settings=settings,
                        ),
                    )
                except Exception as exc:  # the client checks the server at once; its errors vary by cause
                    from stores.disk import causes

                    why = next((e for e in causes(exc) if isinstance(e, httpx.HTTPError)), exc)
                    raise StoreUnavailableError(
                        f"KB_AGENT_CHROMA_URL: cannot reach the Chroma server at {url} ({type(why).__name__}); "
                        "check the URL and that `chroma run` is up"
                    ) from None
                _with_deadline(client, url)
                _clients[key] = client
            else:
                Path(key).mkdir(parents=True, exist_ok=True)
                with _first_open_lock(key):
                    wait_for_writers(Path(key, "chroma.sqlite3"))
                    _clients[key] = chromadb.PersistentClient(path=key, settings=settings)
        return _clients[key]


def wait_for_writers(path: Path, seconds: float | None = None) -> None:
    """Wait, at most ``seconds`` (SQLite's busy timeout), until no other process holds a write lock on
    embedded Chroma's database; past that, one :class:`~stores.faults.StoreFailure` naming the file.

    Chroma waits for such a lock without end and without letting go of the interpreter, so neither a
    deadline nor a signal can reach a command stuck there (a stopped ingest's lock held it forever). Python's
    SQLite waits the same way with the interpreter free, and gives up."""
    import sqlite3

    limit = faults.BUSY_SECONDS if seconds is None else seconds
    if not path.is_file() or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        return  # nothing to wait for, or a read-only folder (named by the open that follows)
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=limit, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")  # the write lock that a writer mid-transaction holds
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if failure := faults.sqlite_failure(path, exc, waited=limit):
            raise failure from exc
        # anything else (a damaged file, a full disk) is met and named by Chroma's own open


def reopen_client(data_dir: str | Path, url: str = "") -> ClientAPI:
    """A fresh embedded client for ``data_dir`` (a server client is returned as is).

    Embedded Chroma loads each collection's HNSW index into the process once and never re-reads it, so
    after another process wrote, this process's queries miss new chunks, return deleted ones or fail.
    A new client reads the files again; objects still holding the old one keep working on its snapshot.
    """
    if url:
        return chroma_client(data_dir, url)
    from chromadb.api.client import SharedSystemClient

    key = str(Path(data_dir, "chroma").resolve())
    with _lock:
        _clients.pop(key, None)
        SharedSystemClient._identifier_to_system.pop(key, None)  # Chroma caches one system per path
    return chroma_client(data_dir, url)


def open_collection(client: ClientAPI, name: str, embedder: Embedder, **metadata: Any) -> Collection:
    """Get or create ``name`` with our embedding function; refuse one built by another embedder."""
    function = ChromaEmbedding(embedder)
    try:
        collection = client.get_collection(name, embedding_function=function)  # type: ignore[arg-type]
    except Exception:  # not found (the exception type differs between local and HTTP clients)
        meta = {"hnsw:space": "cosine", "embedder": embedder.name, "dim": embedder.dim, **metadata}
        with _first_open_lock(_embedded_path(client)):
            return client.get_or_create_collection(name, embedding_function=function, metadata=meta)  # type: ignore[arg-type]
    stored = collection.metadata or {}
    built_with, dim = stored.get("embedder"), stored.get("dim")
    if built_with != embedder.name or (dim and embedder.dim and int(dim) != embedder.dim):
        raise EmbeddingMismatchError(
            f"collection {name!r} was built with embedder {built_with!r} (dim {dim}); the current embedder is "
            f"{embedder.name!r} (dim {embedder.dim}). Re-index: kb-agent ingest --reindex PATH, or set "
            f"KB_AGENT_EMBEDDER={built_with}"
        )
    return collection


def reclaim_space(data_dir: str | Path, url: str = "", *, force: bool = False, min_free: float = 0.1) -> int:
    """Give back to the disk the space of deleted chunks in embedded Chroma; returns the bytes freed.

    Deleting leaves free pages in ``chroma.sqlite3`` and tombstones in its full-text index, so a removed
    1 GB ingest keeps its 1 GB. Merging the full-text index and ``VACUUM`` free both, in time proportional
    to the whole file, so unless ``force`` (chunks were just removed) it is done only when at least
    ``min_free`` of the file is free pages. Run under the knowledge base's write lock; a Chroma server
    manages its own storage (0 is returned).
    """
    import sqlite3

    from stores.disk import free_pages_bytes

    path = Path(data_dir, "chroma", "chroma.sqlite3")
    if url or not path.is_file():
        return 0
    before = path.stat().st_size
    with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
        free = free_pages_bytes(db)
        if not force and free < min_free * before:
            return 0
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "embedding_fulltext_search" in tables:
            db.execute("INSERT INTO embedding_fulltext_search(embedding_fulltext_search) VALUES ('optimize')")
        db.execute("VACUUM")
    return max(0, before - path.stat().st_size)
