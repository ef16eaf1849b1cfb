"""The knowledge base: files in, permission-filtered hybrid search out.

Modules, each importing only those above it in this list (so there is no import circle):

- :mod:`~stores.knowledge.groups`: access-group names and the Chroma flags that encode them;
- :mod:`~stores.knowledge.index`: the three stores (Chroma, BM25, manifest) and keeping them in step;
- :mod:`~stores.knowledge.reading`: the thread of ingest that loads, chunks and tokenizes files ahead;
- :mod:`~stores.knowledge.ingest`: files into the index; :mod:`~stores.knowledge.search`: queries out;
- :mod:`~stores.knowledge.knowledge_base`: :class:`KnowledgeBase`, the one object callers open.

Also here: the loaders (``documents`` and the per-format loaders, ``load_limits``), ``chunking``, the
keyword index (``bm25_index``), the ``manifest`` and ``evaluation``.

Callers import from here: ``from stores.knowledge import KnowledgeBase``. The names are resolved on first
use, so importing a loader or the chunker does not pull in Chroma and the embedders.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "DEFAULT_GROUPS": "stores.knowledge.groups",
    "EMBED_BATCH": "stores.knowledge.ingest",
    "FUSIONS": "stores.knowledge.search",
    "IngestProgress": "stores.knowledge.ingest",
    "IngestReport": "stores.knowledge.ingest",
    "KnowledgeBase": "stores.knowledge.knowledge_base",
    "KnowledgeIndex": "stores.knowledge.index",
    "MAX_EMBED_QUERY_CHARS": "stores.knowledge.search",
    "MIN_VECTOR_SCORE": "stores.knowledge.search",
    "MODES": "stores.knowledge.search",
    "NULL_MARGIN": "stores.knowledge.search",
    "NULL_TEXTS": "stores.knowledge.search",
    "OVERSAMPLE": "stores.knowledge.search",
    "Progress": "stores.knowledge.ingest",
    "SearchSettings": "stores.knowledge.search",
    "StaleIndexError": "stores.knowledge.search",
    "WRITE_BATCH": "stores.knowledge.ingest",
    "clean_groups": "stores.knowledge.groups",
    "group_filter": "stores.knowledge.groups",
    "group_key": "stores.knowledge.groups",
}

__all__ = [
    "DEFAULT_GROUPS",
    "EMBED_BATCH",
    "FUSIONS",
    "MAX_EMBED_QUERY_CHARS",
    "MIN_VECTOR_SCORE",
    "MODES",
    "NULL_MARGIN",
    "NULL_TEXTS",
    "OVERSAMPLE",
    "WRITE_BATCH",
    "IngestProgress",
    "IngestReport",
    "KnowledgeBase",
    "KnowledgeIndex",
    "Progress",
    "SearchSettings",
    "StaleIndexError",
    "clean_groups",
    "group_filter",
    "group_key",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'stores.knowledge' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
