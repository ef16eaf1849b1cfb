"""Access groups of the knowledge base: the one rule for group names and how Chroma flags them.

A chunk carries one boolean metadata flag per group that may see it (Chroma cannot filter on "a list
contains"), so ingest (writing flags), search (filtering on them), the index (reading them back) all need
the same key for a group. They live here, below everything else in the package, so that none of those
modules imports another just for these helpers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

DEFAULT_GROUPS = ("public",)  # a file without a sidecar, a caller without groups
FLAG_PREFIXES = ("g_", "gx_")  # metadata keys that are group flags, not document metadata
_PLAIN_GROUP = re.compile(r"[A-Za-z0-9_-]+")


def clean_groups(groups: Iterable[str]) -> list[str]:
    """Group names stripped, empty ones dropped, duplicates dropped, order kept."""
    return list(dict.fromkeys(g.strip() for g in groups if g and g.strip()))


def group_key(group: str) -> str:
    """Chroma metadata key flagging ``group``: ``g_<name>`` for plain names, ``gx_<hash>`` for others
    (e.g. Chinese names), so two different groups can never share a flag."""
    if _PLAIN_GROUP.fullmatch(group):
        return f"g_{group}"
    return "gx_" + hashlib.blake2b(group.encode(), digest_size=10).hexdigest()


def group_filter(groups: Iterable[str]) -> dict[str, Any]:
    """The Chroma ``where`` that admits chunks of any of ``groups`` (which must not be empty)."""
    clauses = [{key: True} for key in dict.fromkeys(group_key(g) for g in groups)]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def flag_keys(meta: Mapping[str, Any] | None) -> set[str]:
    """The group-flag keys present in a chunk's Chroma metadata."""
    return {key for key in (meta or {}) if key.startswith(FLAG_PREFIXES)}
