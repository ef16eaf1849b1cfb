"""The knowledge base (SPEC §6): files in, permission-filtered hybrid search out.

Modules, each importing only those above it in this list (so there is no import circle):

- :mod:`~stores.knowledge.groups`: access-group names and the Chroma flags that encode them;
- :mod:`~stores.knowledge.index`: the three stores (Chroma, BM25, manifest) and keeping them in step;
- :mod:`~stores.knowledge.reading`: the thread of ingest that loads, chunks and tokenizes files ahead;
- :mod:`~stores.knowledge.ingest`: files into the index; :mod:`~stores.knowledge.search`: queries out;
- :mod:`~stores.knowledge.knowledge_base`: :class:`KnowledgeBase`, the one object callers open.

Callers import from here: ``from stores.knowledge import KnowledgeBase``.
"""

from stores.knowledge.groups import DEFAULT_GROUPS, clean_groups, group_filter, group_key
from stores.knowledge.index import KnowledgeIndex
from stores.knowledge.ingest import EMBED_BATCH, WRITE_BATCH, IngestProgress, IngestReport, Progress
from stores.knowledge.knowledge_base import KnowledgeBase
from stores.knowledge.search import (
    FUSIONS,
    MAX_EMBED_QUERY_CHARS,
    MIN_VECTOR_SCORE,
    MODES,
    NULL_MARGIN,
    NULL_TEXTS,
    OVERSAMPLE,
    SearchSettings,
    StaleIndexError,
)

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
