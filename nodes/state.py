"""The graph's state: what a thread remembers between steps and across restarts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage, convert_to_messages
from langgraph.graph import add_messages

# The only state a caller writes; every other channel (budget, summary, passages, memories, answers) is
# written by the graph's nodes, so nothing a caller sends can lift a budget or forge what the agent said.
CALLER_CHANNELS = ("messages",)


class InvalidInputError(ValueError):
    """A run's input the graph cannot take (say, a message of an unknown role): refused before it is saved."""


class TooManyMessagesError(InvalidInputError):
    """More messages in one input than the deployment takes at once."""


class MessageTooLongError(InvalidInputError):
    """A message longer than the deployment takes: refused before anything is stored or embedded."""


class ForbiddenStateError(InvalidInputError):
    """A caller's write to a channel only the graph's nodes write."""


def check_input(
    payload: Any, max_messages: int | None = None, where: str = "input", *, max_chars: int | None = None
) -> None:
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
    if max_messages is not None and len(messages) > max_messages:
        raise TooManyMessagesError(
            f"{where}.messages has {len(messages)} messages; at most {max_messages} are taken at once"
        )
    for index, message in enumerate(messages):
        if max_chars is not None and (length := _text_length(message)) > max_chars:
            raise MessageTooLongError(
                f"{where}.messages[{index}] has {length:,} characters; at most {max_chars:,} are taken in one "
                "message: send a shorter question, or ingest a long text as a document"
            )
        if isinstance(message, BaseMessage):
            continue
        if isinstance(message, dict):
            _check_fields(message, f"{where}.messages[{index}]")
        try:
            convert_to_messages([message])
        except Exception as exc:  # whatever the conversion trips on, the message is not one
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InvalidInputError(
                f"{where}.messages[{index}] is not a message: {reason} "
                '(send {"role": "user", "content": "..."})'
            ) from None


def _text_length(message: Any) -> int:
    """Characters of a message's text, whatever form it came in (object, dict, tuple, plain string)."""
    content: Any
    if isinstance(message, BaseMessage):
        content = message.content
    elif isinstance(message, dict):
        content = message.get("content", "")
    elif isinstance(message, (list, tuple)) and len(message) == 2:
        content = message[1]
    else:
        content = message
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(_text_length({"content": part.get("text", "")}) if isinstance(part, dict) else _text_length(part)
                   for part in content)
    return len(str(content))


def check_caller_update(
    values: Any, max_messages: int | None = None, where: str = "values", *, max_chars: int | None = None
) -> None:
    """Refuse a caller's state write that touches anything but the messages, or messages that would not
    coerce (a wrongly typed value would break every later run of the thread)."""
    updates = values if isinstance(values, list) else [values]
    for index, update in enumerate(updates):
        here = f"{where}[{index}]" if isinstance(values, list) else where
        if update is None:
            continue
        if not isinstance(update, dict):
            raise InvalidInputError(f"{here} must be an object like {{\"messages\": [...]}}")
        forbidden = sorted(str(k) for k in update if k not in CALLER_CHANNELS)
        if forbidden:
            raise ForbiddenStateError(
                f"{here}: {', '.join(forbidden)} cannot be written by a caller; only "
                f"{', '.join(CALLER_CHANNELS)} can (the rest is written by the agent)"
            )
        if "messages" in update and update["messages"] is None:
            raise InvalidInputError(f"{here}.messages must be a list of messages, got null")
        check_input(update, max_messages, here, max_chars=max_chars)


def _check_fields(message: dict[str, Any], where: str) -> None:
    """The fields of a message given as an object, each of the shape a message takes, named when not."""
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidInputError(f"{where}.content must be text or a list of content blocks, got {type(content).__name__}")
    calls = message.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, dict) for c in calls)):
        raise InvalidInputError(f'{where}.tool_calls must be a list of {{"name", "args", "id"}} objects')
    for i, call in enumerate(calls or []):
        if not isinstance(call.get("name"), str) or not isinstance(call.get("args", {}), dict):
            raise InvalidInputError(f'{where}.tool_calls[{i}] needs a "name" (text) and "args" (an object)')


def check_caller_command(
    command: Any, max_messages: int | None = None, where: str = "command", *, max_chars: int | None = None
) -> None:
    """A caller's ``Command`` may resume a pending question or add messages, not both at once; it may not
    route the graph (``goto`` would skip the model and the checks before a tool runs) nor write any other
    channel. A resume that also writes could replace the pending tool call under the approval given for the
    one shown."""
    if command is None:
        return
    if not isinstance(command, dict):
        raise InvalidInputError(f'{where} must be an object like {{"resume": ...}}')
    if command.get("goto"):
        raise ForbiddenStateError(
            f"{where}.goto: a caller cannot route the graph; send a question, or resume a pending approval"
        )
    if command.get("update") is not None:
        if command.get("resume") is not None:
            raise ForbiddenStateError(
                f"{where}: a resume cannot also change the thread ({where}.update); send the decision alone"
            )
        check_caller_update(command["update"], max_messages, f"{where}.update", max_chars=max_chars)


MAX_RECORDED_ANSWERS = 50


def record_answers(current: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """Keep the records of the thread's latest answers (feedback looks up the one it rates)."""
    merged = {**(current or {}), **(new or {})}
    if len(merged) > MAX_RECORDED_ANSWERS:
        merged = dict(list(merged.items())[-MAX_RECORDED_ANSWERS:])
    return merged


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
    ``answers`` records each answer the agent gave (message id → digest and cited chunks), so feedback
    refers to what the agent said, not to text a caller wrote into the history. ``approvals`` holds what a
    person decided about the current round's calls.
    """

    summary: str = ""
    summary_covers: str | None = None
    passages: list[dict[str, Any]] = field(default_factory=list)
    memories: list[dict[str, Any]] = field(default_factory=list)
    budget: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    answers: Annotated[dict[str, dict[str, Any]], record_answers] = field(default_factory=dict)
    # What a person decided about a round's calls: {"message": the assistant message's id, "calls": call id ->
    # the digest of the call shown, or the answer it gets instead}; written by the review node only.
    approvals: dict[str, Any] = field(default_factory=dict)
