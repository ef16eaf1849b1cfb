"""Recognising a full disk, whichever store hit it first, so the user reads one line that names it.

SQLite says "database or disk is full", Postgres raises DiskFull (SQLSTATE 53100), Python an OSError with
ENOSPC; Chroma's Rust core reports a failed write without its cause ("Failed to apply logs…"), so for an
error that names no cause the free space left where the data lives decides.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

LOW_SPACE_BYTES = (
    1024 * 1024
)  # less than this free where the data lives, and a write failed: the disk is full
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
    said_so = any(_says_full(cause) for cause in _chain(exc))
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


def _chain(exc: BaseException) -> Iterator[BaseException]:
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
