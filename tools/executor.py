"""Running the model's tool calls: concurrently, bounded, each with a timeout, results in call order.

Nothing a tool does may break the loop: unknown names, bad arguments, exceptions and timeouts all come
back as an error outcome with the call's id, so the model can read what went wrong and try another way.
At most ``concurrency`` calls run at once; a hung synchronous handler is abandoned on its
daemon worker so it cannot hold the turn past its timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tools.approval import ApprovalRequest, Approver, describe_call
from tools.nesting import is_depth_refusal, too_deep
from tools.permissions import Grant, PermissionDeniedError, grant_for
from tools.registry import (
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolSpec,
    validate_arguments,
)
from tools.workers import run_on_daemon_worker, run_on_thread_loop

RESULT_PREVIEW = 300  # characters of a result in its 'done' event (the live trace shows them)
log = logging.getLogger("kb_agent.tools")

MAX_OUTPUT_CHARS = 20_000
Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ToolCallRequest:
    """One call the model asked for. ``error`` is set when its arguments could not even be parsed."""

    id: str
    name: str
    args: Any
    error: str | None = None


@dataclass(frozen=True)
class ToolOutcome:
    call_id: str
    name: str
    content: str
    status: Literal["success", "error"]
    duration_ms: float
    error: str | None = None


def render_result(value: Any) -> str:
    """Tool results go to the model as text: JSON for structures, truncated when huge."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, dict | list | tuple | int | float | bool) or value is None:
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n…[truncated: {len(text) - MAX_OUTPUT_CHARS} more characters]"
    return text


class ToolExecutor:
    """Executes calls against a registry under a concurrency cap and per-call timeout."""

    def __init__(self, registry: ToolRegistry, *, concurrency: int = 4, timeout: float = 90.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.registry = registry
        self.concurrency = concurrency
        self.timeout = timeout

    def review(
        self,
        calls: Sequence[ToolCallRequest],
        context: ToolContext,
        approver: Approver | None,
        emit: Emit | None = None,
    ) -> dict[str, ToolOutcome]:
        """Ask for approval of every high-impact call, one by one, before any call runs.

        Returns the outcomes of the calls that must not run (rejected, or no way to ask), by call id.
        All questions come first so that a pause (``interrupt``) can never happen after a side effect:
        when the graph resumes, the node runs again from the start and nothing has run twice.
        Calls that would fail anyway (unknown, denied, bad arguments) are not put to a person.
        """
        emit = _safe(emit)
        grant = _grant(context)
        refused: dict[str, ToolOutcome] = {}
        for call in calls:
            spec = self.registry.find(call.name)
            if spec is None or not spec.requires_approval or call.error is not None:
                continue
            if not grant.permits(spec):
                continue
            try:
                args = validate_arguments(spec, call.args)
            except ToolError:
                continue
            event = {"type": "tool_call", "tool": call.name, "call_id": call.id, "source": spec.source}
            if approver is None:
                message = (
                    f"tool {call.name!r} needs a person's approval and this run has no way to ask; "
                    "nothing was changed"
                )
                refused[call.id] = ToolOutcome(call.id, call.name, f"Error: {message}", "error", 0.0, message)
                emit({**event, "status": "approval_denied", "reason": message})
                continue
            try:
                description = _describe(spec, args, context)
            except ToolError as exc:  # the action cannot happen (e.g. no such document): nothing to ask
                refused[call.id] = ToolOutcome(call.id, call.name, f"Error: {exc}", "error", 0.0, str(exc))
                emit({**event, "status": "error", "error": str(exc)})
                continue
            request = ApprovalRequest(call.id, call.name, args, description, spec.source)
            emit({**event, "status": "approval_requested", "args": args, "description": request.description})
            decision = approver(request)
            log.info(
                "run=%s tool=%s call_id=%s approval=%s user=%s reason=%s",
                context.run_id or "-",
                call.name,
                call.id,
                "granted" if decision.approved else "denied",
                context.user_id,
                decision.reason or "-",
            )
            if decision.approved:
                emit({**event, "status": "approval_granted", "reason": decision.reason})
                continue
            why = f": {decision.reason}" if decision.reason else ""
            message = f"the user rejected {call.name!r}{why}. Nothing was changed; do not retry it unasked"
            refused[call.id] = ToolOutcome(call.id, call.name, f"Error: {message}", "error", 0.0, message)
            emit({**event, "status": "approval_denied", "reason": decision.reason})
        return refused

    async def arun(
        self,
        calls: Sequence[ToolCallRequest],
        context: ToolContext,
        emit: Emit | None = None,
        *,
        approver: Approver | None = None,
        reviewed: dict[str, ToolOutcome] | None = None,
    ) -> list[ToolOutcome]:
        """Run all calls; the returned list is in the order of ``calls``.

        High-impact calls are put to ``approver`` first (see :meth:`review`), unless ``reviewed`` holds
        the result of a review already done by the caller.
        """
        emit = _safe(emit)
        if reviewed is None:
            reviewed = self.review(calls, context, approver, emit)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(call: ToolCallRequest) -> ToolOutcome:
            if call.id in reviewed:
                return reviewed[call.id]
            async with gate:
                return await self._execute(call, context, emit)

        return list(await asyncio.gather(*(one(call) for call in calls)))

    def run(
        self,
        calls: Sequence[ToolCallRequest],
        context: ToolContext,
        emit: Emit | None = None,
        *,
        approver: Approver | None = None,
        reviewed: dict[str, ToolOutcome] | None = None,
    ) -> list[ToolOutcome]:
        """Synchronous entry point (``graph.invoke``): runs :meth:`arun` on this thread's event loop.

        Approvals are asked here, in the caller's thread, so an ``interrupt()`` sees the graph's run.
        """
        if reviewed is None:
            reviewed = self.review(calls, context, approver, emit)
        work_on = self.arun(calls, context, emit, reviewed=reviewed)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_on_thread_loop(work_on)
        # Called from inside a running loop (e.g. a notebook): use a helper thread with its own loop.
        box: dict[str, Any] = {}
        ctx = contextvars.copy_context()

        def work() -> None:
            try:
                box["result"] = ctx.run(asyncio.run, work_on)
            except BaseException as exc:  # re-raised in the caller's thread below
                box["error"] = exc

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    async def _execute(self, call: ToolCallRequest, context: ToolContext, emit: Emit) -> ToolOutcome:
        started = time.perf_counter()
        spec = self.registry.find(call.name)
        event = {
            "type": "tool_call",
            "tool": call.name,
            "call_id": call.id,
            "source": spec.source if spec is not None else "unknown",
        }
        effects = context.effects if spec is not None and spec.side_effects and call.id else None
        if effects is not None:
            # Off the event loop: the record is a database (and the server forbids blocking calls there).
            recorded = await asyncio.to_thread(effects.claim, call.id, call.name)
            if recorded is not None:  # this step is being re-run (resume after a crash): never twice
                return _replayed(call, recorded, event, emit)
        shown = call.args if isinstance(call.args, dict) and not too_deep(call.args) else None
        emit({**event, "status": "executing", "args": shown})  # events get encoded: never too deep
        try:
            content = await self._invoke(call, context)
        except PermissionDeniedError as exc:
            message = str(exc)
            outcome = ToolOutcome(call.id, call.name, f"Error: {message}", "error", _ms(started), message)
            emit({**event, "status": "denied", "error": message, "duration_ms": outcome.duration_ms})
            log.warning(
                "run=%s tool=%s call_id=%s permission denied user=%s roles=%s",
                context.run_id or "-",
                call.name,
                call.id,
                context.user_id,
                ",".join(_grant(context).roles) or "-",
            )
        except Exception as exc:  # every failure becomes a message the model can act on
            message = _describe_failure(call, exc, self._timeout_for(call))
            if not isinstance(exc, ToolError | ValueError | TimeoutError | asyncio.TimeoutError):
                log.error("run=%s tool=%s call_id=%s failed", context.run_id or "-", call.name, call.id, exc_info=exc)
            outcome = ToolOutcome(call.id, call.name, f"Error: {message}", "error", _ms(started), message)
            emit({**event, "status": "error", "error": message, "duration_ms": outcome.duration_ms})
        else:
            outcome = ToolOutcome(call.id, call.name, content, "success", _ms(started))
            emit({**event, "status": "done", "duration_ms": outcome.duration_ms, "result": content[:RESULT_PREVIEW]})
        if effects is not None:
            await asyncio.to_thread(effects.record, call.id, outcome.status, outcome.content)
        log.info(
            "run=%s tool=%s call_id=%s status=%s duration_ms=%.1f user=%s thread=%s",
            context.run_id or "-",
            call.name,
            call.id,
            outcome.status,
            outcome.duration_ms,
            context.user_id,
            context.thread_id,
        )
        return outcome

    def _timeout_for(self, call: ToolCallRequest) -> float:
        spec = self.registry.find(call.name)
        return spec.timeout if spec is not None and spec.timeout else self.timeout

    async def _invoke(self, call: ToolCallRequest, context: ToolContext) -> str:
        if call.error is not None:
            if is_depth_refusal(call.error):
                raise ToolArgumentError(call.error)
            raise ToolArgumentError(
                f"the arguments for {call.name!r} were not valid JSON ({call.error}); send a JSON object "
                "that matches the tool's parameters"
            )
        spec = self.registry.get(call.name)
        _grant(context).check(spec)  # before the arguments: a denied tool reveals nothing more
        reason = spec.unavailable_for(context.settings)
        if reason:
            raise ToolError(f"tool {spec.name!r} is not available here: {reason}")
        kwargs = validate_arguments(spec, call.args)
        if spec.wants_context:
            kwargs["tool_context"] = context
        if spec.is_async:
            pending: Any = spec.handler(**kwargs)
        else:
            pending = run_on_daemon_worker(spec.handler, kwargs)
        result = await asyncio.wait_for(pending, timeout=self._timeout_for(call))
        if inspect.isawaitable(result):  # a sync-looking handler that returned a coroutine
            result = await asyncio.wait_for(result, timeout=self._timeout_for(call))
        return render_result(result)


def _replayed(call: ToolCallRequest, recorded: Any, event: dict[str, Any], emit: Emit) -> ToolOutcome:
    """The outcome an earlier run of a side-effecting call recorded, or a warning if it never finished."""
    if recorded.status == "running":
        message = (
            f"tool {call.name!r} was cut off by a crash before its result was saved, so it may or may not "
            "have taken effect; check before asking for it again"
        )
        outcome = ToolOutcome(call.id, call.name, f"Error: {message}", "error", 0.0, message)
    else:
        kind: Any = "success" if recorded.status == "success" else "error"
        outcome = ToolOutcome(call.id, call.name, recorded.content, kind, 0.0)
    status = "done" if outcome.status == "success" else "error"
    emit({**event, "status": status, "replayed": True, "duration_ms": 0.0, "error": outcome.error})
    log.info("tool=%s call_id=%s replayed the recorded outcome (%s)", call.name, call.id, recorded.status)
    return outcome


def _grant(context: ToolContext) -> Grant:
    return context.grant if isinstance(context.grant, Grant) else grant_for(context.settings, context.user_id)


def _describe(spec: ToolSpec, args: dict[str, Any], context: ToolContext) -> str:
    """The tool's own account of the exact action, falling back to name and arguments."""
    if spec.describe is not None:
        try:
            return spec.describe(args, context)
        except ToolError:
            raise
        except Exception:
            log.exception("describing %s for approval failed", spec.name)
    return describe_call(spec.name, args)


def _safe(emit: Emit | None) -> Emit:
    """Status events are for watching; a broken listener must not break the tool calls."""
    if emit is None:
        return lambda _event: None

    def guarded(event: dict[str, Any]) -> None:
        try:
            emit(event)
        except Exception:
            log.exception("tool status listener failed on %s", event.get("status"))

    return guarded


def _describe_failure(call: ToolCallRequest, exc: Exception, timeout: float) -> str:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"tool {call.name!r} timed out after {timeout:g} s; try a narrower request or another tool"
    if isinstance(exc, ToolError):
        return str(exc)
    if isinstance(exc, ValueError):
        return f"tool {call.name!r} rejected the input: {exc}"
    # The reply reaches the model and the user: what went wrong in the error's own words, never the
    # exception's class (the traceback is in the log).
    if isinstance(exc, OSError):
        return f"tool {call.name!r} could not read or write its storage: {exc.strerror or exc}"
    words = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"tool {call.name!r} failed: {words[:300] or 'an unexpected error'}"


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
