"""A store that fails is one error naming the store and what to do, and every wait on a store has a deadline."""

from __future__ import annotations

import errno
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores import chroma, faults, sql
from stores.base import StoreUnavailableError
from stores.checkpoint import open_checkpointer
from stores.faults import StoreFailure, store_failure


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A SQLite file another process holds a write lock on (as an ingest stopped mid-write would)."""
    db = tmp_path / "held.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE t (x)").connection.close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import sqlite3,time\nc=sqlite3.connect({str(db)!r},isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
         "print('locked',flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    try:
        yield db
    finally:
        holder.kill()
        holder.wait()


def test_a_sql_store_locked_by_another_process_names_its_file(locked: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sql, "BUSY_SECONDS", 0.3)
    started = time.monotonic()
    with pytest.raises(StoreFailure) as failed:
        db = sql.open_database(locked)
        db.execute("INSERT INTO t VALUES (1)")
    assert time.monotonic() - started < 15
    assert str(failed.value).startswith(f"{locked}: locked by another process"), failed.value


def test_embedded_chroma_is_not_entered_while_another_process_writes_it(locked: Path) -> None:
    """Chroma would wait for that lock forever, holding the interpreter: the wait ends here instead."""
    started = time.monotonic()
    with pytest.raises(StoreFailure) as failed:
        chroma.wait_for_writers(locked, seconds=0.3)
    assert time.monotonic() - started < 5
    assert str(failed.value).startswith(f"{locked}: locked by another process for 0.3 s")


def test_a_threads_database_locked_by_another_process_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stores.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "BUSY_SECONDS", 0.3)
    with open_checkpointer(tmp_path) as saver:
        saver.put(_config("t1"), _checkpoint(), {}, {})
    path = tmp_path / "threads.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         f"import sqlite3,time\nc=sqlite3.connect({str(path)!r},isolation_level=None)\nc.execute('BEGIN EXCLUSIVE')\n"
         "print('locked',flush=True)\ntime.sleep(120)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    try:
        with open_checkpointer(tmp_path) as saver, pytest.raises(StoreFailure) as failed:
            saver.put(_config("t1"), _checkpoint(), {}, {})
    except StoreFailure as opening:  # the lock may already stop the tables' setup
        failed_message = str(opening)
    else:
        failed_message = str(failed.value)
    finally:
        holder.kill()
        holder.wait()
    assert failed_message.startswith(f"{path}: locked by another process"), failed_message


def _config(thread: str) -> dict:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _checkpoint() -> dict:
    from langgraph.checkpoint.base import empty_checkpoint

    return dict(empty_checkpoint())


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (a server that stopped answering)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        listener.close()
        for conn in held:
            conn.close()


def test_a_chroma_server_that_does_not_answer_ends_at_the_deadline(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chroma's own client waits forever (httpx ``timeout=None``); ours gives up at the deadline."""
    monkeypatch.setattr(faults, "CHROMA_SECONDS", 0.5)
    url = f"http://127.0.0.1:{silent_server}"
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as failed:
        chroma.chroma_client("/nonexistent", url)
    assert time.monotonic() - started < 5
    assert f"cannot reach the Chroma server at {url} (ReadTimeout)" in str(failed.value)


def test_the_chroma_client_internals_the_deadline_is_set_on_are_still_there() -> None:
    """stores.chroma sets the deadline on the server client's httpx session and wraps its one request
    method: a Chroma release that renames either must fail here, not hang in production."""
    import inspect

    from chromadb.api.client import Client
    from chromadb.api.fastapi import FastAPI

    assert "self._session = httpx.Client(" in inspect.getsource(FastAPI.__init__)
    assert "self._make_request(" in inspect.getsource(FastAPI._query)
    assert "_server" in inspect.getsource(Client.__init__)


def test_a_chroma_server_request_that_fails_is_one_failure_naming_the_setting() -> None:
    import httpx

    failure = faults.chroma_server_failure("http://127.0.0.1:8000", httpx.ConnectError("[Errno 111] Connection refused"))
    assert str(failure) == (
        "KB_AGENT_CHROMA_URL: lost the Chroma server at http://127.0.0.1:8000 (Connection refused); what was in "
        "flight was not completed: check that `chroma run` is up there, then run the command again"
    )
    late = faults.chroma_server_failure("http://h:1", httpx.ReadTimeout("timed out"), httpx.Timeout(7.0, connect=2.0))
    assert "did not answer within 7 s" in str(late)


def test_store_failure_names_each_shape_that_reaches_the_edge_unnamed(tmp_path: Path) -> None:
    import psycopg
    from psycopg_pool import PoolTimeout

    locked = sqlite3.OperationalError("database is locked")
    assert "locked by another process" in (store_failure(locked, tmp_path) or "")
    assert (store_failure(psycopg.OperationalError("server closed the connection unexpectedly"), tmp_path) or "").startswith(
        "Postgres: the database connection failed (server closed the connection unexpectedly)"
    )
    assert "no connection to the database in time" in (store_failure(PoolTimeout("no connection"), tmp_path) or "")
    named = StoreFailure("KB_AGENT_CHROMA_URL", "lost it", "run it again")
    try:
        try:
            raise named
        except StoreFailure as exc:
            raise RuntimeError("during task 'retrieve'") from exc
    except RuntimeError as wrapped:
        assert store_failure(wrapped, tmp_path) == "KB_AGENT_CHROMA_URL: lost it; run it again"
    assert store_failure(ValueError("a bug"), tmp_path) is None
    assert store_failure(sqlite3.OperationalError("no such table: x"), tmp_path) is None  # a bug, not a store


def test_a_full_disk_is_named_before_the_store_that_met_it(tmp_path: Path) -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    try:
        try:
            raise full
        except OSError as exc:
            raise StoreFailure(str(tmp_path / "threads.sqlite"), "could not be written", "check the disk") from exc
    except StoreFailure as named:
        assert (store_failure(named, tmp_path) or "").startswith(f"the disk holding {tmp_path} is full")


def test_only_a_lost_server_counts_as_lost() -> None:
    import psycopg
    from psycopg import errors

    from stores.postgres import server_lost

    assert server_lost(psycopg.OperationalError("consuming input failed: server closed the connection"))
    assert server_lost(errors.AdminShutdown("terminating connection due to administrator command"))
    assert not server_lost(errors.QueryCanceled("canceling statement due to statement timeout"))
    assert not server_lost(errors.DiskFull("could not extend file"))


def test_a_chroma_server_that_answers_its_heartbeat_but_not_the_client_ends_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chroma's client asks its first questions while it is built, before its session has a deadline."""
    import http.server

    class HeartbeatOnly(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.endswith("/heartbeat"):
                body = b'{"nanosecond heartbeat": 1}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                time.sleep(30)  # a server stuck on everything else

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HeartbeatOnly)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(faults, "CHROMA_SECONDS", 0.5)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    started = time.monotonic()
    try:
        with pytest.raises(StoreUnavailableError) as failed:
            chroma.chroma_client("/nonexistent", url)
    finally:
        server.shutdown()
    assert time.monotonic() - started < 5
    assert f"cannot reach the Chroma server at {url} (ReadTimeout)" in str(failed.value)
