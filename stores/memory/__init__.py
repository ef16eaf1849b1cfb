"""Long-term memory, one home: the store (Chroma + audit), the seven write rules, the sensitive-data and
intent checks, the offline extractor and the background updater. A model-backed extractor is injected."""

from stores.memory.recall import fuse
from stores.memory.store import ChromaMemoryStore

__all__ = ["ChromaMemoryStore", "fuse"]
