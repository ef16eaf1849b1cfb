"""Long-term memory, one home: the store (Chroma + audit), the seven write rules, the sensitive-data and
intent checks, the offline extractor and the background updater. A model-backed extractor is injected.

The store and the fusion are loaded on first use: importing the rules or the checks must not import Chroma.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stores.memory.recall import fuse
    from stores.memory.store import ChromaMemoryStore

__all__ = ["ChromaMemoryStore", "fuse"]


def __getattr__(name: str) -> Any:
    if name == "ChromaMemoryStore":
        from stores.memory.store import ChromaMemoryStore

        return ChromaMemoryStore
    if name == "fuse":
        from stores.memory.recall import fuse

        return fuse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
