"""The Python API for applications: an agent whose threads persist under the data dir.

    with open_agent() as agent:
        answer = agent.ask("计算 123 × 456", thread_id="t1")
        print(answer.text)

``graph.invoke`` on ``build_graph(checkpointer=...)`` works too; this wraps it with the defaults a user
expects (SQLite under ``KB_AGENT_HOME``, user id in the config, a typed answer, thread helpers). Threads
belong to the user who opened them (``stores.threads``): another user's thread id raises
:class:`ThreadOwnershipError` before anything is read or written.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

from graph.builder import build_graph
from graph.services import services_for
from nodes.conversation import last_human_index
from nodes.settings import Settings
from nodes.summarize import full_history
from stores.checkpoint_prune import PruneReport, discard_after, prune_thread
from stores.memory.pending import pending
from stores.memory.updater import BackgroundMemoryUpdater
from stores.threads import ThreadInfo, ThreadOwnershipError, ThreadRegistry
from stores.turn_lock import ThreadBusyError, TurnLocks
from tools.approval import APPROVAL_KIND, parse_decision

__all__ = [
    "Agent",
    "Answer",
    "EmptyQuestionError",
    "NoPendingApprovalError",
    "ThreadBusyError",
    "ThreadInfo",
    "ThreadOwnershipError",
    "open_agent",
]


class EmptyQuestionError(ValueError):
    """The question was empty or only whitespace."""


class NoPendingApprovalError(ValueError):
    """A resume for a thread that is not waiting for an approval."""


log = logging.getLogger("kb_agent.api")

Approve = Callable[[dict[str, Any]], Any]  # an interrupt payload -> {"approved": bool, "reason": str}


@dataclass
class Answer:
    """One finished turn: the answer text and what happened on the way."""

    text: str
    thread_id: str
    user_id: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    stop_reason: str | None = None
    offline: bool = False
    model: str = ""
    # Tool calls waiting for a person (interrupt payloads); answer them with ``Agent.resume``.
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    # High-risk memories of this user waiting for confirmation (``kb-agent memories pending``).
    pending_memories: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _is_approval(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == APPROVAL_KIND


def turn_answer(messages: list[AnyMessage], thread_id: str, user_id: str, stop_reason: str | None) -> Answer:
    """Summarise the last turn of a thread's messages as an :class:`Answer`."""
    start = last_human_index(messages)
    turn = messages[start + 1 :] if start >= 0 else messages
    results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
    calls = []
    for message in turn:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                result = results.get(call["id"] or "")
                calls.append(
                    {
                        "tool": call["name"],
                        "args": call["args"],
                        "call_id": call["id"],
                        "status": result.status if result is not None else "missing",
                        "result": result.text if result is not None else None,
                    }
                )
    final = next((m for m in reversed(turn) if isinstance(m, AIMessage)), None)
    meta = final.response_metadata if final is not None else {}
    return Answer(
        text=final.text if final is not None else "",
        thread_id=thread_id,
        user_id=user_id,
        tool_calls=calls,
        stop_reason=stop_reason,
        offline=bool(meta.get("offline")),
        model=str(meta.get("model_name", "")),
    )


class Agent:
    """A compiled kb-agent graph bound to a checkpointer and a base context."""

    def __init__(
        self,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        checkpointer: BaseCheckpointSaver,
        context: Settings,
        memory: BackgroundMemoryUpdater | None = None,
        threads: ThreadRegistry | None = None,
        locks: TurnLocks | None = None,
    ) -> None:
        self.graph = graph
        self.checkpointer = checkpointer
        self.context = context
        self.memory = memory  # long-term memory; None when switched off
        self.registry = (
            threads if threads is not None else ThreadRegistry(context.data_dir, context.checkpoint_url)
        )
        # One turn per thread at a time, across processes : taken around every turn.
        self.locks = locks if locks is not None else TurnLocks(context.data_dir, context.checkpoint_url)
        self._pruned: dict[str, str | None] = {}  # thread -> newest checkpoint id at its last prune

    def _run_args(self, thread_id: str, user_id: str | None) -> tuple[RunnableConfig, Settings]:
        ctx = self.context if user_id is None else self.context.replace(user_id=user_id)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id, "user_id": ctx.user_id}, "run_id": uuid.uuid4()}
        return config, ctx

    def ask(
        self,
        question: str,
        *,
        thread_id: str = "default",
        user_id: str | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        approve: Approve | None = None,
    ) -> Answer:
        """Run one turn; ``on_event`` receives the custom stream events (tool status) as they happen.

        A high-impact tool call pauses the turn for approval: with ``approve`` it is asked inline (the CLI's
        y/N), else the answer comes back with ``pending_approvals`` for a later :meth:`resume`.
        While another turn runs on the thread (any process) this waits up to ``turn_wait`` seconds, then
        raises :class:`ThreadBusyError`.
        """
        if not question or not question.strip():
            raise EmptyQuestionError("the question is empty: type what you want to ask")
        config, ctx = self._run_args(thread_id, user_id)
        self.registry.check(thread_id, ctx.user_id)  # another user's thread: refused without waiting
        with self.locks.hold(thread_id, ctx.turn_wait):
            self._undo_unfinished(thread_id)
            payload = {"messages": [HumanMessage(question)]}
            answer = self._drive(payload, config, ctx, on_event, approve, title=question)
        answer.pending_memories = self._pending_memories(ctx.user_id)
        return answer

    def _pending_memories(self, user_id: str) -> int:
        """How many of the user's high-risk memories wait for confirmation (held by earlier turns)."""
        store = getattr(self.memory, "store", None)
        if store is None or not hasattr(store, "audit"):
            return 0
        try:
            return len(pending(store, user_id))
        except Exception:  # a hint for the user: never a reason to fail the answer
            log.exception("could not count pending memories of %s", user_id)
            return 0

    def resume(
        self,
        thread_id: str,
        decision: Any,
        *,
        user_id: str | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        approve: Approve | None = None,
    ) -> Answer:
        """Answer the pending approval of ``thread_id`` (``{"approved": bool, "reason": str}``) and go on."""
        config, ctx = self._run_args(thread_id, user_id)
        self.registry.check(thread_id, ctx.user_id)
        with self.locks.hold(thread_id, ctx.turn_wait):
            self._undo_unfinished(thread_id)
            if not self.pending_approvals(thread_id, user_id=ctx.user_id):
                raise NoPendingApprovalError(f"thread {thread_id!r} is not waiting for an approval")
            value = parse_decision(decision)  # InvalidApprovalError before anything is resumed
            resume = {"approved": value.approved, "reason": value.reason}
            resume.update({k: v for k, v in (("call_id", value.call_id), ("digest", value.digest)) if v})
            return self._drive(Command(resume=resume), config, ctx, on_event, approve)

    def pending_approvals(self, thread_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """The approvals ``thread_id`` is waiting for (interrupt payloads), oldest first."""
        config = self._owned(thread_id, user_id)
        return [i.value for i in self.graph.get_state(config).interrupts if _is_approval(i.value)]

    def _drive(
        self,
        payload: Any,
        config: RunnableConfig,
        ctx: Settings,
        on_event: Callable[[dict[str, Any]], None] | None,
        approve: Approve | None,
        title: str | None = None,
    ) -> Answer:
        thread_id = config["configurable"]["thread_id"]
        before = self.graph.get_state(config).config.get("configurable", {}).get("checkpoint_id")
        # Written before the first step, cleared once the turn is saved or undone: if this process dies
        # in between (kill -9), the next open of the thread finds the marker and undoes the turn.
        self.registry.begin_turn(thread_id, ctx.user_id, before)
        try:
            if title is not None:
                self.registry.claim(thread_id, ctx.user_id, title=title)
            while True:
                for mode, chunk in self.graph.stream(
                    payload, config, context=ctx, stream_mode=["custom", "values"]
                ):
                    if mode == "custom" and on_event is not None and isinstance(chunk, dict):
                        on_event(chunk)
                pending = [i.value for i in self.graph.get_state(config).interrupts]
                if not pending or approve is None or not _is_approval(pending[0]):
                    break
                payload = Command(resume=approve(pending[0]))
        except BaseException:
            # A turn is saved whole or not at all: the steps it did write are discarded.
            try:
                self._undo(thread_id, ctx.user_id, before)
            except Exception:  # the marker stays: the next open of the thread tries again
                log.exception("could not undo the failed turn of thread %s", thread_id)
            raise
        else:
            self.registry.end_turn(thread_id)
        finally:
            self.registry.touch(thread_id)
        if ctx.checkpoint_prune:
            try:
                self.prune(thread_id, user_id=ctx.user_id)
            except Exception:  # housekeeping: the answer is saved whatever happens here
                log.exception("pruning thread %s failed", thread_id)
        state = self.graph.get_state(config)
        values = state.values
        answer = turn_answer(values.get("messages", []), thread_id, ctx.user_id, values.get("stop_reason"))
        answer.pending_approvals = [i.value for i in state.interrupts if _is_approval(i.value)]
        return answer

    def _undo(self, thread_id: str, user_id: str, before: str | None) -> None:
        """Put the thread back as it was at checkpoint ``before`` (None: no thread) and clear the marker."""
        discard_after(self.checkpointer, thread_id, before)
        if before is None:
            self.registry.delete(thread_id, user_id)
        self.registry.end_turn(thread_id)

    def _undo_unfinished(self, thread_id: str) -> None:
        """Undo a turn whose process died mid-way (its marker is still there); the caller holds the lock."""
        unfinished = self.registry.unfinished_turn(thread_id)
        if unfinished is not None:
            log.warning(
                "thread %s: undoing an earlier turn that did not finish (its process stopped, or its store "
                "failed before the turn could be undone)",
                thread_id,
            )
            self._undo(thread_id, *unfinished)

    def _owned(self, thread_id: str, user_id: str | None) -> RunnableConfig:
        self.registry.check(thread_id, user_id or self.context.user_id)
        if self.registry.unfinished_turn(thread_id) is not None:
            # Repair before reading, unless the turn is running right now (its process holds the lock).
            with self.locks.attempt(thread_id) as idle:
                if idle:
                    self._undo_unfinished(thread_id)
        return {"configurable": {"thread_id": thread_id}}

    def history(
        self, thread_id: str, *, user_id: str | None = None, include_folded: bool = False
    ) -> list[AnyMessage]:
        """The thread's messages as the model sees them (after folding), or every one it ever held."""
        config = self._owned(thread_id, user_id)
        if include_folded:
            return full_history(self.graph, config)
        return list(self.graph.get_state(config).values.get("messages", []))

    def summary(self, thread_id: str, *, user_id: str | None = None) -> str:
        """The running summary of the thread's folded rounds ("" while nothing was folded)."""
        return str(self.graph.get_state(self._owned(thread_id, user_id)).values.get("summary", ""))

    def threads(self, user_id: str | None = None) -> list[ThreadInfo]:
        """This user's threads, most recently active first."""
        return self.registry.list(user_id or self.context.user_id)

    def new_thread(self) -> str:
        """A fresh thread id (it becomes the user's on its first question)."""
        return f"t-{uuid.uuid4().hex[:12]}"

    def clear(self, thread_id: str, *, user_id: str | None = None) -> None:
        """Forget a thread's messages, state and registry entry (only its owner may)."""
        self._owned(thread_id, user_id)
        self.checkpointer.delete_thread(thread_id)
        self.registry.delete(thread_id, user_id or self.context.user_id)

    def prune(self, thread_id: str, *, user_id: str | None = None, keep_recent: int = 1) -> PruneReport:
        """Delete the thread's checkpoints that add nothing to its history (see ``stores.checkpoint_prune``).

        The current state and every message ever said (``history(include_folded=True)``) stay; what goes
        is time travel to the intermediate steps.
        """
        self._owned(thread_id, user_id)
        report = prune_thread(
            self.checkpointer, thread_id, keep_recent=keep_recent, since=self._pruned.get(thread_id)
        )
        self._pruned[thread_id] = report.latest
        return report

    def memories(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """This user's long-term memories, newest first (after pending updates are applied)."""
        if self.memory is None:
            return []
        self.memory.drain(10)
        return list(self.memory.store.list(user_id or self.context.user_id))  # type: ignore[attr-defined]

    def forget(self, memory_id: str, user_id: str | None = None) -> Any:
        """Delete one of this user's memories (audited, source "cli"); returns the audit entry."""
        if self.memory is None:
            raise ValueError("long-term memory is switched off (KB_AGENT_LONG_TERM_MEMORY=false)")
        self.memory.drain(10)
        store: Any = self.memory.store
        return store.manage(user_id or self.context.user_id, "DELETE", memory_id=memory_id)


@contextmanager
def open_agent(context: Settings | None = None, **build_kwargs: Any) -> Iterator[Agent]:
    """An :class:`Agent` on its deployment's services: the checkpointer the context asks for (SQLite under
    the data dir by default), the threads' owners and turn locks, long-term memory unless switched off.
    They stay open for the process's later agents and close with the composition root."""
    ctx = context or Settings()
    services = services_for(ctx)
    if "memory" not in build_kwargs and ctx.long_term_memory:
        build_kwargs["memory"] = services.memory()
    memory = build_kwargs.get("memory")
    saver = services.checkpointer()
    try:
        yield Agent(
            build_graph(checkpointer=saver, **build_kwargs),
            saver,
            ctx,
            memory if isinstance(memory, BackgroundMemoryUpdater) else None,
            services.threads(),
            services.turn_locks(),
        )
    finally:
        if isinstance(memory, BackgroundMemoryUpdater) and not memory.drain(10):
            logging.getLogger("kb_agent.memory").warning("memory updates still running at exit")
