"""The graph's state: what a thread remembers between steps and across restarts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage, convert_to_messages
from langgraph.graph import add_messages


class InvalidInputError(ValueError):
    """A run's input the graph cannot take (say, a message of an unknown role): refused before it is saved."""


def check_input(payload: Any) -> None:
    """Refuse input whose messages would not coerce, before the run starts.

    LangGraph saves a run's input in the thread's checkpoint before its reducer coerces the messages, so a
    message of an unknown role would fail the run *and* leave the thread unreadable (every later state read
    re-applies it). Checking at the edge keeps the thread as it was.
    """
    if not isinstance(payload, dict) or payload.get("messages") is None:
        return
    messages = payload["messages"]
    if not isinstance(messages, list):
        messages = [messages]
    for index, message in enumerate(messages):
        if isinstance(message, BaseMessage):
            continue
        try:
            convert_to_messages([message])
        except (ValueError, TypeError, KeyError, NotImplementedError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidInputError(
                f"input.messages[{index}] is not a message: {reason} "
                '(send {"role": "user", "content": "..."})'
            ) from None


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
