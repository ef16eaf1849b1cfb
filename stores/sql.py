"""One connection helper for the small relational stores (feedback, audit, thread owners).

Each is a SQLite file under the data dir by default and a Postgres database when a ``postgresql://`` URL is
configured; the code above differs only in the parameter placeholder, which this hands back.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def is_postgres(url: str) -> bool:
    return url.startswith(("postgres://", "postgresql://"))


@dataclass
class Database:
    """An autocommit connection, its placeholder (``?`` or ``%s``) and whether it is Postgres."""

    conn: Any
    mark: str
    postgres: bool

    def serial(self) -> str:
        """The auto-increment primary-key type of this backend."""
        return "BIGSERIAL" if self.postgres else "INTEGER"


def open_database(sqlite_file: str | Path, url: str = "") -> Database:
    """Postgres for a ``postgresql://`` URL, else the SQLite file (created, WAL, shared across threads)."""
    if is_postgres(url):
        import psycopg

        return Database(psycopg.connect(url, autocommit=True), "%s", True)
    path = Path(sqlite_file)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    return Database(conn, "?", False)
