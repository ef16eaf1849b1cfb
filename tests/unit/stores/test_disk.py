"""stores.disk recognises a full disk from any store's error, through wrapping exceptions."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from stores.disk import DiskFullError, disk_full


def _sqlite_full(tmp_path: Path) -> sqlite3.OperationalError:
    """A real SQLITE_FULL: the database may not grow past two pages."""
    db = sqlite3.connect(tmp_path / "tiny.sqlite")
    db.execute("CREATE TABLE t (x BLOB)")
    db.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.OperationalError) as caught:
        db.execute("INSERT INTO t VALUES (?)", (b"\0" * 100_000,))
    db.close()
    return caught.value


def test_sqlite_full_even_wrapped_is_a_full_disk(tmp_path: Path) -> None:
    cause = _sqlite_full(tmp_path)
    try:
        try:
            raise cause
        except sqlite3.OperationalError as exc:
            raise RuntimeError("checkpoint write failed") from exc
    except RuntimeError as wrapped:
        found = disk_full(wrapped, tmp_path)
    assert isinstance(found, DiskFullError)
    assert str(found).startswith(f"the disk holding {tmp_path} is full")


def test_enospc_is_a_full_disk_and_other_errors_are_not(tmp_path: Path) -> None:
    assert disk_full(OSError(errno.ENOSPC, "No space left on device"), tmp_path) is not None
    assert disk_full(ValueError("something else"), tmp_path) is None
    assert disk_full(OSError(errno.EACCES, "Permission denied"), tmp_path) is None
