"""The graph's state: what a thread remembers between steps and across restarts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph import add_messages


@dataclass(kw_only=True)
class InputState:
    """What a caller supplies: the new messages of the turn."""

    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)


@dataclass(kw_only=True)
class State(InputState):
    """Full thread state.

    ``summary`` folds older messages (short-term memory); ``summary_covers`` is the id of the last message
    it covers. ``passages`` and ``memories`` are this turn's retrieved chunks and recalled memories.
    ``budget`` holds the per-turn counters (see ``nodes.budget``); it is reset when a new question arrives.
    """

    summary: str = ""
    summary_covers: str | None = None
    passages: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    budget: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
