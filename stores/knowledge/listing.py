"""The documents of a knowledge base as a person sees them: one entry per ingested file, filtered by the
caller's groups, found by words of their title or file name.

Read from the manifest (what was ingested, when, with which groups) and, for titles, from each document's
first chunk; nothing here writes. ``kb-agent documents list`` and the chat page's documents area both show
this listing, so they agree on what a caller may see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Any

from stores.knowledge.groups import DEFAULT_GROUPS


@dataclass(frozen=True)
class DocumentEntry:
    """One ingested file: its source (the id a citation names), title, size in chunks and bytes, access
    groups, when it was ingested (ISO, UTC) and the languages its passages are written in."""

    source: str
    title: str
    chunks: int
    size: int
    groups: list[str]
    ingested_at: str
    languages: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def visible_to(record_groups: Iterable[str], groups: Iterable[str] | None) -> bool:
    """Whether a document with ``record_groups`` is readable by a caller in ``groups`` (None: everyone).

    The same rule as search and ``stats``: a document without groups is public, and everyone reads public.
    """
    if groups is None:
        return True
    return bool({*groups, *DEFAULT_GROUPS} & set(record_groups or DEFAULT_GROUPS))


def list_documents(kb: Any, groups: Iterable[str] | None = None, query: str = "") -> list[DocumentEntry]:
    """The documents ``groups`` may read (every one with None), newest first; ``query`` keeps those whose
    title or source holds every one of its words (case-insensitive)."""
    wanted = None if groups is None else list(groups)
    records = [r for r in kb.manifest.records().values() if visible_to(r.groups, wanted)]
    first_chunks = [r.chunk_ids[0] for r in records if r.chunk_ids]
    titles: dict[str, str] = {}
    for passage in kb.get(first_chunks) if first_chunks else []:
        title = str((passage.get("metadata") or {}).get("title") or "").strip()
        if title:
            titles[str(passage.get("source", ""))] = title
    entries = [
        DocumentEntry(
            source=r.source,
            title=titles.get(r.source) or PurePosixPath(r.source).stem,
            chunks=len(r.chunk_ids),
            size=r.size,
            groups=list(r.groups or DEFAULT_GROUPS),
            ingested_at=r.ingested_at,
            languages=sorted(r.languages or []),
        )
        for r in records
    ]
    words = query.lower().split()
    if words:
        entries = [e for e in entries if all(w in f"{e.title} {e.source}".lower() for w in words)]
    return sorted(entries, key=lambda e: (e.ingested_at, e.source), reverse=True)
