"""``ScriptedChatModel``: the one test double for every test and benchmark (pydantic-ai's FunctionModel).

Give it a script: a list of replies (an ``AIMessage``, a string, or a callable of the conversation), or a
single function ``(messages, tools) -> AIMessage`` used for every call. It records what it was sent, so a
test can assert what the model saw, and gives each reply a fresh id like a real endpoint does.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from models.local import LocalChatModel

Reply = AIMessage | str | Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage | str]


class ScriptExhausted(AssertionError):
    """The code under test called the model more often than the script allows."""


def tool_call(name: str, args: dict[str, Any] | None = None, id: str | None = None) -> dict[str, Any]:
    """A tool call in LangChain's shape, for building scripts."""
    return {
        "name": name,
        "args": args or {},
        "id": id or f"call_{uuid.uuid4().hex[:24]}",
        "type": "tool_call",
    }


class ScriptedChatModel(LocalChatModel):
    """A chat model that replays a script; ``calls`` holds the messages of every request."""

    script: list[Any] | Any
    model_name: str = "scripted"
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _tools_seen: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def __init__(self, script: Sequence[Reply] | Reply, **kwargs: Any) -> None:
        kwargs["script"] = list(script) if isinstance(script, list | tuple) else script
        super().__init__(**kwargs)  # a field of this class: the parent's own signature does not name it

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def tools_seen(self) -> list[list[dict[str, Any]]]:
        return self._tools_seen

    def reply(self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
        with self._lock:
            self._calls.append(list(messages))
            self._tools_seen.append(list(tools))
            if isinstance(self.script, list):
                if not self.script:
                    raise ScriptExhausted(f"the script ran out after {len(self._calls) - 1} model calls")
                reply = self.script.pop(0)
            else:
                reply = self.script
        if callable(reply) and not isinstance(reply, AIMessage):
            reply = reply(list(messages), list(tools))
        if isinstance(reply, str):
            reply = AIMessage(content=reply)
        return reply.model_copy(update={"id": f"scripted-{uuid.uuid4().hex}"})
