"""What the graph needs from the stores, as protocols: the nodes depend on these, not on Chroma."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage


class StoreUnavailableError(ConnectionError):
    """A configured database or Chroma server cannot be reached; the message names the setting."""


class Passage(TypedDict, total=False):
    """A retrieved chunk: ``id`` is stable (``path#n``) so answers can cite it."""

    id: str
    text: str
    source: str
    score: float
    retrievers: list[str]
    metadata: dict[str, Any]


MEMORY_TYPES = ("semantic", "episodic", "procedural")
"""What a memory records: a fact or preference, an event with a date, a way the user wants things done."""


class MemoryRecord(TypedDict, total=False):
    id: str
    user_id: str
    memory_type: str
    content: str
    source_thread_id: str | None
    created_at: str
    updated_at: str
    expires_at: str | None
    related: bool  # set by recall: the memory shares a term with the query or is close to it in meaning


@runtime_checkable
class PassageSearch(Protocol):
    """Something that searches passages with the caller's permissions (``stores.knowledge.KnowledgeBase``)."""

    def search(self, query: str, *, user_id: str, groups: Sequence[str], top_k: int = 5) -> list[Passage]:
        """Passages the caller may see, best first."""
        ...


@runtime_checkable
class KnowsLanguages(Protocol):
    """A passage search that knows the languages its documents are written in (``KnowledgeBase``).

    Kept apart from :class:`PassageSearch`: a search that does not say gets no cross-language query."""

    def languages(self, groups: Iterable[str] | None = None) -> frozenset[str]:
        """``zh`` / ``en``: the languages of the documents ``groups`` may see; cheap enough per turn."""
        ...


@runtime_checkable
class MemoryStore(Protocol):
    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        """This user's memories most relevant to ``query``."""
        ...

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        """Extract, validate and apply memory operations from a finished turn; returns changes applied."""
        ...
