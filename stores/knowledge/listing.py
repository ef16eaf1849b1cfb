"""The documents of a knowledge base as a person sees them: one entry per ingested file, filtered by the
caller's groups, found by words of their title or file name.

Read from the manifest (what was ingested, when, with which groups) and, for titles, from each document's
first chunk; nothing here writes. ``kb-agent documents list`` and the chat page's documents area both show
this listing, so they agree on what a caller may see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import PurePath, PurePosixPath
from typing import Any
from urllib.parse import quote, unquote

from stores.knowledge.groups import DEFAULT_GROUPS

UPLOADS = "uploads"  # <data dir>/uploads/<user>/<file>: where the chat page keeps the files people add


def upload_folder(data_dir: str | PurePath, user: str) -> PurePath:
    """Where a file ``user`` adds from the chat page is kept (its name says who added it)."""
    return PurePath(data_dir) / UPLOADS / quote(user, safe="").replace(".", "%2E")  # never "." or ".."


def added_by(path: str) -> str:
    """Who added the file at ``path`` from the chat page, or "" for a file the operator ingested."""
    parts = PurePath(path).parts
    return unquote(parts[-2]) if len(parts) >= 3 and parts[-3] == UPLOADS else ""


@dataclass(frozen=True)
class DocumentEntry:
    """One ingested file: its source (the id a citation names), title, size in chunks and bytes, access
    groups, when it was ingested (ISO, UTC), the languages its passages are written in, and who added it
    from the chat page ("" for the operator's ``kb-agent ingest``)."""

    source: str
    title: str
    chunks: int
    size: int
    groups: list[str]
    ingested_at: str
    languages: list[str]
    added_by: str = ""

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
            added_by=added_by(r.path),
        )
        for r in records
    ]
    words = query.lower().split()
    if words:
        entries = [e for e in entries if all(w in f"{e.title} {e.source}".lower() for w in words)]
    return sorted(entries, key=lambda e: (e.ingested_at, e.source), reverse=True)
