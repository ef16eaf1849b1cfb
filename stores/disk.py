"""Recognising a full disk, whichever store hit it first, so the user reads one line that names it.

SQLite says "database or disk is full", Postgres raises DiskFull (SQLSTATE 53100), Python an OSError with
ENOSPC; Chroma's Rust core reports a failed write without its cause ("Failed to apply logs…"), so for an
error that names no cause the free space left where the data lives decides.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

# less than this free where the data lives, and a write failed: the disk is full
LOW_SPACE_BYTES = 1024 * 1024
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
_MESSAGES = (
    "no space left on device",
    "database or disk is full",
    "disk quota exceeded",
    "could not extend file",
)


class DiskFullError(OSError):
    """A write failed because the disk holding the data is full; the message says where and what to do."""


def disk_full(exc: BaseException, path: str | Path) -> DiskFullError | None:
    """A :class:`DiskFullError` naming the disk if ``exc`` (or what caused it) is a full disk, else None."""
    said_so = any(_says_full(cause) for cause in causes(exc))
    free = _free(Path(path))
    if not said_so and (free is None or free >= LOW_SPACE_BYTES):
        return None
    left = f"{free // 1024} KiB free" if free is not None else "no space left"
    return DiskFullError(
        f"the disk holding {path} is full ({left}): free some space and run it again; "
        "nothing of the failed step was kept",
    )


def _says_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        return True
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return True
    if getattr(exc, "sqlstate", None) == "53100":  # psycopg's DiskFull
        return True
    return any(message in str(exc).lower() for message in _MESSAGES)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, what caused it, and what it was raised while handling (and exception groups' members)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        todo.extend(getattr(current, "exceptions", ()))


def _free(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


_UNUSABLE = frozenset({errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR})
_READ_ONLY = ("attempt to write a readonly database", "read-only file system", "readonly database")
_DAMAGED = (
    "database disk image is malformed",
    "file is not a database",
    "file is encrypted or is not a database",
)


def storage_problem(exc: BaseException, data_dir: str | Path) -> str | None:
    """One line for a store that cannot be used — a full disk, a data folder that cannot be created or
    written, a damaged database file — naming the path and what to do; None for any other error."""
    if full := disk_full(exc, data_dir):
        return str(full)
    for cause in causes(exc):
        if _read_only(cause) or (_cannot_open(cause) and not writable(data_dir)):
            return (
                f"cannot write {data_dir}: it is read-only (its file system, or its files' permissions); "
                "kb-agent writes there even to read (locks, logs, migrations): make it writable, or point "
                "KB_AGENT_HOME at a writable copy; nothing was changed"
            )
        if isinstance(cause, OSError) and cause.errno in _UNUSABLE:
            where = cause.filename or data_dir
            return (
                f"cannot use {where} ({cause.strerror or cause}): the data folder (KB_AGENT_HOME) is {data_dir}; "
                "make it a folder this user can write, or point KB_AGENT_HOME elsewhere"
            )
        said = str(cause).lower()
        if any(message in said for message in _DAMAGED):
            damaged = damaged_databases(Path(data_dir))
            named = ", ".join(str(path) for path in damaged) or f"a database under {data_dir}"
            knowledge = any(part in ("chroma", "knowledge") for path in damaged for part in path.parts[-3:-1])
            hint = " (then run `kb-agent repair` and ingest the documents again)" if knowledge else ""
            return (
                f"{named}: damaged (database disk image is malformed); restore it from a backup, or move it aside "
                f"to start that store afresh{hint}; nothing was changed"
            )
    return None


def _cannot_open(exc: BaseException) -> bool:
    """SQLite could not open or create a database file (or its -wal/-shm beside it)."""
    return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CANTOPEN


def writable(data_dir: str | Path) -> bool:
    """Whether files can be created under ``data_dir`` (or where it would be created): its file system is
    not mounted read-only, and this user may write there. Root passes permission checks, not a ro mount."""
    path = Path(data_dir)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return False
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _read_only(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return True
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_READONLY:
        return True
    return any(message in str(exc).lower() for message in _READ_ONLY)


def damaged_databases(data_dir: Path) -> list[Path]:
    """The SQLite files under ``data_dir`` that fail SQLite's own quick check (opened read-only)."""
    found = []
    for path in sorted(data_dir.glob("**/*.sqlite*")):
        if not path.is_file() or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        try:
            with contextlib.closing(
                sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=1)
            ) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.Error as exc:
            # Only SQLite's own word that the file is damaged counts: a file it cannot open here (a
            # read-only folder, where a WAL database cannot make its -shm) or one that is busy is not.
            ok = None if getattr(exc, "sqlite_errorcode", None) in _DAMAGE_CODES or _says_damaged(exc) else ("ok",)
        if not ok or ok[0] != "ok":
            found.append(path)
    return found


_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _says_damaged(exc: BaseException) -> bool:
    said = str(exc).lower()
    return "malformed" in said or "not a database" in said or "corrupt" in said


def free_pages_bytes(db: sqlite3.Connection) -> int:
    """Bytes of ``db``'s pages that deletions freed and only ``VACUUM`` gives back to the disk."""
    return db.execute("PRAGMA freelist_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
