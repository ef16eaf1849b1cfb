"""Tools the model may call when the user asks: ``remember``, ``forget``, ``search_memories``.

The user is always the run's (``ToolContext.user_id``), never an argument the model supplies, and every
change goes through the same seven rules and audit history as extraction (source "tool"). ``forget``
additionally needs the user's latest message to ask for it: text the model read in a document cannot
make it delete someone's memories.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from langchain_core.messages import HumanMessage
from pydantic import Field

from stores.memory.rules import MAX_CHARS, has_forget_intent
from stores.memory.store import ChromaMemoryStore
from tools.registry import CallContext, ToolError, ToolSpec

MemoryType = Literal["semantic", "episodic", "procedural"]
StoreFor = Callable[[Any], ChromaMemoryStore]  # the run's settings -> its memory store (wired in graph)


def _latest_user_message(history: tuple[Any, ...]) -> str:
    for message in reversed(history):
        if isinstance(message, HumanMessage):
            return message.text
    return ""


def _view(record: Any) -> dict[str, Any]:
    return {k: record.get(k) for k in ("id", "memory_type", "content", "updated_at")}


def memory_off(settings: Any) -> str:
    """Memories kept or looked up by a run without long-term memory would never be recalled by a turn."""
    if getattr(settings, "long_term_memory", True):
        return ""
    return "long-term memory is off for this run (KB_AGENT_LONG_TERM_MEMORY=false)"


def memory_tools(store_for: StoreFor) -> list[ToolSpec]:
    """The memory tool specs; ``store_for`` maps the run's settings to its store."""
    resolve = store_for

    def remember(
        content: Annotated[str, Field(min_length=1, max_length=MAX_CHARS * 4)],
        memory_type: Annotated[
            MemoryType,
            Field(
                description="semantic: a fact or preference; episodic: something that happened; "
                "procedural: how to answer or work for this user."
            ),
        ] = "semantic",
        replaces: Annotated[
            str,
            Field(
                max_length=100,
                description="The id of the memory this corrects (the user changed their mind); it is updated "
                "instead of a second, contradictory memory being added.",
            ),
        ] = "",
        *,
        tool_context: CallContext,
    ) -> str:
        store = resolve(tool_context.run_settings())
        entry = store.manage(
            tool_context.user_id,
            "UPDATE" if replaces else "ADD",
            content=content,
            memory_type=memory_type,
            memory_id=replaces or None,
            thread_id=tool_context.thread_id,
            source="tool",
            latest_user_message=_latest_user_message(tool_context.history),
            explicit_request=False,
        )
        if entry.status == "rejected":
            raise ToolError(f"not remembered (rule {entry.rule}): {entry.reason}")
        if entry.status == "pending":  # high-risk: held until the user confirms (stores.memory.pending)
            return json.dumps(
                {"remembered": False, "pending": True, "pending_id": entry.id, "content": entry.new_content,
                 "note": entry.reason},
                ensure_ascii=False,
            )
        result: dict[str, Any] = {
            "remembered": True,
            "id": entry.memory_id,
            "memory_type": entry.memory_type,
            "content": entry.new_content,
        }
        if replaces:
            result["replaced"] = entry.old_content
        if entry.status == "unchanged":
            result["note"] = "this was already remembered"
        return json.dumps(result, ensure_ascii=False)

    def forget(
        memory_id: Annotated[str, Field(min_length=1, max_length=100)], *, tool_context: CallContext
    ) -> str:
        latest = _latest_user_message(tool_context.history)
        if not has_forget_intent(latest):
            raise ToolError("not forgotten: the user's latest message does not ask to forget anything")
        store = resolve(tool_context.run_settings())
        entry = store.manage(
            tool_context.user_id,
            "DELETE",
            memory_id=memory_id,
            thread_id=tool_context.thread_id,
            source="tool",
            latest_user_message=latest,
            explicit_request=False,
        )
        if entry.status != "applied":
            raise ToolError(f"not forgotten: there is no memory {memory_id!r} of this user")
        return json.dumps(
            {"forgotten": True, "id": memory_id, "content": entry.old_content}, ensure_ascii=False
        )

    def search_memories(
        query: str = "", top_k: Annotated[int, Field(ge=1, le=20)] = 5, *, tool_context: CallContext
    ) -> str:
        store = resolve(tool_context.run_settings())
        user = tool_context.user_id
        found = store.search(user, query, top_k) if query.strip() else store.list(user, limit=top_k)
        return json.dumps({"memories": [_view(m) for m in found]}, ensure_ascii=False)

    return [
        ToolSpec.of(
            remember,
            name="remember",
            unavailable=memory_off,
            description=(
                "Save a durable fact, preference or rule about the current user for future conversations. "
                "Call it only when the user asks you to remember something or clearly states a lasting "
                "preference; when the user corrects an earlier memory, pass its id as replaces. "
                "Write the content as one sentence about the user ('用户喜欢…' / 'The user "
                "prefers …'). Never save passwords, keys, phone, ID-card or bank-card numbers."
            ),
            domain="memory",
            always_on=True,
            timeout=30.0,
            permissions=("memory:write",),
            side_effects=True,
        ),
        ToolSpec.of(
            forget,
            name="forget",
            unavailable=memory_off,
            description=(
                "Delete one of the current user's memories by its id, only when the user asks you to "
                "forget it. Find the id with search_memories first."
            ),
            domain="memory",
            always_on=True,
            timeout=30.0,
            permissions=("memory:write",),
            side_effects=True,
        ),
        ToolSpec.of(
            search_memories,
            name="search_memories",
            unavailable=memory_off,
            description=(
                "List the current user's long-term memories (id, type, content) most relevant to a query, "
                "or the newest ones when the query is empty."
            ),
            domain="memory",
            always_on=True,
            timeout=30.0,
            permissions=("memory:read",),
        ),
    ]
