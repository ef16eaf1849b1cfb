"""The knowledge base: files in, permission-filtered hybrid search out.

Modules, each importing only those above it in this list (so there is no import circle):

- :mod:`~stores.knowledge.groups`: access-group names and the Chroma flags that encode them;
- :mod:`~stores.knowledge.index`: the three stores (Chroma, BM25, manifest) and keeping them in step;
- :mod:`~stores.knowledge.reading`: the thread of ingest that loads, chunks and tokenizes files ahead;
- :mod:`~stores.knowledge.ingest`: files into the index; :mod:`~stores.knowledge.search`: queries out;
- :mod:`~stores.knowledge.knowledge_base`: :class:`KnowledgeBase`, the one object callers open.

Also here: the loaders (``documents`` and the per-format loaders, ``load_limits``), ``chunking``, the
keyword index (``bm25_index``), the ``manifest`` and ``evaluation``.

Callers import from the module that defines a name (``from stores.knowledge.knowledge_base import
KnowledgeBase``): importing the package itself loads nothing, so a loader or the chunker never pulls in
Chroma and the embedders.
"""
