"""Small readers of the state shared by the nodes: where the current turn starts, what was asked."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from models.tokens import has_cjk


def last_human_index(messages: Sequence[AnyMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return -1


def current_question(messages: Sequence[AnyMessage]) -> tuple[str, str | None]:
    """The latest user question and its message id (the id keys this turn's budget)."""
    i = last_human_index(messages)
    if i < 0:
        return "", None
    return messages[i].text, messages[i].id


def language(text: str) -> str:
    return "zh" if has_cjk(text) else "en"


def unsummarised(messages: Sequence[AnyMessage], covers: str | None) -> list[AnyMessage]:
    """The messages the running summary does not yet cover (all of them when there is no summary)."""
    if covers is None:
        return list(messages)
    for i, message in enumerate(messages):
        if message.id == covers:
            return list(messages[i + 1 :])
    return list(messages)


def run_label(runtime: object, turn_id: str | None) -> str:
    """An id for log lines: the run id when the caller gave one, else the id of the question's message."""
    info = getattr(runtime, "execution_info", None)
    run_id = getattr(info, "run_id", None)
    return str(run_id or turn_id or "-")
