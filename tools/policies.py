"""What the platform does around every tool call: LangGraph ``ToolNode`` wrappers, one concern each.

``ToolNode(tools, wrap_tool_call=..., awrap_tool_call=...)`` runs the calls of a round; :func:`chain` turns
the policies below into those two wrappers, outermost first. Each policy is a small class with a blocking
``wrap`` and an awaiting ``awrap`` (``graph.invoke`` and ``graph.ainvoke``), testable on its own with a
fake ``execute``:

* :class:`Report` — status events, one log line per call, failures worded for the model, long results cut;
* :class:`Permissions` — unknown tools, tools the caller's roles do not grant, tools unavailable here;
* :class:`Arguments` — arguments nested too deep, or invented (names the schema does not have);
* :class:`Approval` — a call that needs a person runs only with the approval given for this exact call;
* :class:`RunOnce` — a call that changes something runs once per call id, a re-run gets the record;
* :class:`Gate` — at most N calls of a round at once; :class:`Deadline` — each call within its timeout.

What a round knows (its caller, approvals, the record of side effects, the cap) travels in the run's
config as a :class:`ToolStep`, put there by the node that runs the ``ToolNode``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError
from langgraph.types import Command

from tools.approval import call_digest
from tools.nesting import depth_message, too_deep
from tools.permissions import Grant, PermissionDeniedError, grant_for
from tools.registry import (
    CURRENT_STEP,
    STEP_KEY,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolRegistry,
    UnknownToolError,
    current_step,
)
from tools.workers import run_with_deadline

log = logging.getLogger("kb_agent.tools")

MAX_OUTPUT_CHARS = 20_000
RESULT_PREVIEW = 300  # characters of a result in its 'done' event (the live trace shows them)

Result = ToolMessage | Command
Execute = Callable[[ToolCallRequest], Result]
AExecute = Callable[[ToolCallRequest], Awaitable[Result]]
Emit = Callable[[dict[str, Any]], None]


@dataclass
class ToolStep:
    """One round of calls: the caller's context, what people approved, where side effects are recorded,
    the default timeout and the cap on calls at once."""

    context: ToolContext
    approved: dict[str, str] = field(default_factory=dict)  # call id -> digest shown to the person
    refused: dict[str, str] = field(default_factory=dict)  # call id -> the answer it gets instead of running
    effects: Any = None  # stores.tool_effects.StepEffects, or None: side effects not recorded
    timeout: float = 90.0
    concurrency: int = 4
    emit: Emit | None = None
    _threads: threading.BoundedSemaphore | None = field(default=None, repr=False)
    _tasks: asyncio.Semaphore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")

    def threads(self) -> threading.BoundedSemaphore:
        if self._threads is None:
            self._threads = threading.BoundedSemaphore(self.concurrency)
        return self._threads

    def tasks(self) -> asyncio.Semaphore:
        if self._tasks is None:
            self._tasks = asyncio.Semaphore(self.concurrency)
        return self._tasks


def step_of(request: ToolCallRequest) -> ToolStep:
    """The round this call belongs to; a ToolNode run without one (an application's own) gets a round
    with no caller, which grants nothing that needs a permission."""
    step = current_step(getattr(request, "runtime", None))
    return step if isinstance(step, ToolStep) else _NO_ROUND


class Round:
    """The outermost policy of the graph's ``ToolNode``: works out the round a call belongs to (once per
    round: its calls share the graph state object) and makes it the call's, for the policies below and
    for the tool (``tools.registry.context_of``). A round already in the run's config is taken as is."""

    def __init__(self, step_for: Callable[[ToolCallRequest], ToolStep] | None) -> None:
        self.step_for = step_for
        self._rounds: dict[int, tuple[weakref.ref[Any], ToolStep]] = {}
        self._lock = threading.Lock()

    def _needed(self, request: ToolCallRequest) -> bool:
        config = getattr(getattr(request, "runtime", None), "config", None) or {}
        return self.step_for is not None and config.get("configurable", {}).get(STEP_KEY) is None

    def _known(self, request: ToolCallRequest) -> ToolStep | None:
        held = self._rounds.get(id(request.state))
        return held[1] if held is not None and held[0]() is request.state else None

    def _step(self, request: ToolCallRequest) -> ToolStep:
        assert self.step_for is not None
        state = request.state
        try:
            ref = weakref.ref(state)
        except TypeError:  # a state that cannot be referred to weakly: each call works its round out
            return self.step_for(request)
        key = id(state)
        with self._lock:
            held = self._rounds.get(key)
            if held is None or held[0]() is not state:  # a new round (an id can be reused later)
                held = (ref, self.step_for(request))
                self._rounds[key] = held
                # Forgotten with its state: a round never outlives the node step that ran it.
                weakref.finalize(state, self._rounds.pop, key, None)
        return held[1]

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        if not self._needed(request):
            return execute(request)
        token = CURRENT_STEP.set(self._step(request))
        try:
            return execute(request)
        finally:
            CURRENT_STEP.reset(token)

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        if not self._needed(request):
            return await execute(request)
        # Working a round out opens its stores (the record of side effects): never on the event loop.
        step = self._known(request) or await asyncio.to_thread(self._step, request)
        token = CURRENT_STEP.set(step)
        try:
            return await execute(request)
        finally:
            CURRENT_STEP.reset(token)


_NO_ROUND = ToolStep(ToolContext())


class Policy(Protocol):
    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result: ...

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result: ...


def error_message(request: ToolCallRequest, text: str) -> ToolMessage:
    call = request.tool_call
    return ToolMessage(content=f"Error: {text}", tool_call_id=call.get("id") or "", name=call["name"], status="error")


class Check:
    """A policy that only decides whether the call may go on: ``refusal`` is the reason it may not."""

    error: type[ToolError] = ToolError

    def refusal(self, request: ToolCallRequest) -> str:
        raise NotImplementedError

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        return self.decide(request) or execute(self.adjust(request))

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        return self.decide(request) or await execute(self.adjust(request))

    def decide(self, request: ToolCallRequest) -> Result | None:
        reason = self.refusal(request)
        if reason:
            raise self.error(reason)
        return None

    def adjust(self, request: ToolCallRequest) -> ToolCallRequest:
        return request


class Permissions(Check):
    """Unknown names, tools the caller's roles do not grant, tools that cannot work in this run: refused
    before the arguments are even read (a denied tool reveals nothing more)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def refusal(self, request: ToolCallRequest) -> str:
        name = request.tool_call["name"]
        spec = self.registry.find(name)
        if spec is None or request.tool is None:
            known = ", ".join(self.registry.names()) or "none"
            raise UnknownToolError(f"unknown tool {name!r}; available tools: {known}")
        context = step_of(request).context
        grant(context).check(spec)
        reason = spec.unavailable_for(context.settings)
        return f"tool {name!r} is not available here: {reason}" if reason else ""


class Arguments(Check):
    """Arguments nested past any real tool's, or named differently from the schema: a model that invents
    an argument misunderstood the tool, and dropping it silently would hide that."""

    error = ToolArgumentError

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def refusal(self, request: ToolCallRequest) -> str:
        call = request.tool_call
        args = call.get("args")
        if not isinstance(args, dict):
            return f"arguments for {call['name']!r} must be a JSON object, got {type(args).__name__}"
        if too_deep(args):
            return depth_message(f"the arguments for {call['name']!r}")
        spec = self.registry.find(call["name"])
        if spec is None:
            return ""
        allowed = spec.parameters.get("properties") or {}
        extra = sorted(set(args) - set(allowed))
        problems = spec.argument_problems({k: v for k, v in args.items() if k not in extra})
        if (extra and allowed) or (extra and spec.parameters.get("additionalProperties") is False):
            problems.append(
                f"unexpected argument(s) {', '.join(repr(e) for e in extra)}; allowed: {', '.join(allowed) or 'none'}"
            )
        return f"invalid arguments for {call['name']!r}: " + "; ".join(problems) if problems else ""


class Approval(Check):
    """A call that needs a person runs only when the person approved this call id with this tool and
    these arguments (the node asked before any call of the round ran)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def decide(self, request: ToolCallRequest) -> Result | None:
        refused = step_of(request).refused.get(request.tool_call.get("id") or "")
        if refused is not None:  # rejected by the person, or past the turn's budget: answered, not run
            call = request.tool_call
            return ToolMessage(content=refused, tool_call_id=call.get("id") or "", name=call["name"], status="error")
        return super().decide(request)

    def refusal(self, request: ToolCallRequest) -> str:
        call = request.tool_call
        spec = self.registry.find(call["name"])
        if spec is None or not spec.requires_approval:
            return ""
        shown = step_of(request).approved.get(call.get("id") or "")
        if shown is not None and shown == call_digest(call["name"], call.get("args") or {}):
            return ""
        return f"tool {call['name']!r} needs a person's approval of this exact call, and it has none; nothing was changed"


class RunOnce:
    """A call that changes something runs once per call id: a re-run of the round (resume after a crash)
    returns what the first run recorded, or says it may have happened if that run never finished."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def _effects(self, request: ToolCallRequest) -> Any:
        spec = self.registry.find(request.tool_call["name"])
        if spec is None or not spec.side_effects or not request.tool_call.get("id"):
            return None
        return step_of(request).effects

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        effects = self._effects(request)
        if effects is None:
            return execute(request)
        recorded = effects.claim(request.tool_call["id"], request.tool_call["name"])
        if recorded is not None:
            return _replayed(request, recorded)
        result = execute(request)
        effects.record(request.tool_call["id"], *_outcome(result))
        return result

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        effects = self._effects(request)
        if effects is None:
            return await execute(request)
        # Off the event loop: the record is a database (and the server forbids blocking calls there).
        recorded = await asyncio.to_thread(effects.claim, request.tool_call["id"], request.tool_call["name"])
        if recorded is not None:
            return _replayed(request, recorded)
        result = await execute(request)
        await asyncio.to_thread(effects.record, request.tool_call["id"], *_outcome(result))
        return result


class Gate:
    """At most the round's ``concurrency`` calls run at once."""

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        with step_of(request).threads():
            return execute(request)

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        async with step_of(request).tasks():
            return await execute(request)


class Deadline:
    """Each call within its tool's timeout (else the round's). A blocking tool that hangs is left on a
    daemon worker, so it cannot hold the turn or the process's exit."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def seconds(self, request: ToolCallRequest) -> float:
        spec = self.registry.find(request.tool_call["name"])
        return spec.timeout if spec is not None and spec.timeout else step_of(request).timeout

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        seconds = self.seconds(request)
        try:
            return run_with_deadline(lambda: execute(request), seconds)
        except TimeoutError:
            raise TimeoutError(_timed_out(request, seconds)) from None

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        seconds = self.seconds(request)
        try:
            return await asyncio.wait_for(execute(request), timeout=seconds)
        except TimeoutError:
            raise TimeoutError(_timed_out(request, seconds)) from None


class Report:
    """The outermost policy: every failure below becomes an error message the model can act on (the loop
    never breaks on a tool), each call is logged and reported on the run's custom stream, and a result
    too long for the model is cut with a note."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    def wrap(self, request: ToolCallRequest, execute: Execute) -> Result:
        started = self._start(request)
        try:
            result = execute(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            result = self._failure(request, exc)
        return self._finish(request, result, started)

    async def awrap(self, request: ToolCallRequest, execute: AExecute) -> Result:
        started = self._start(request)
        try:
            result = await execute(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            result = self._failure(request, exc)
        return self._finish(request, result, started)

    def _event(self, request: ToolCallRequest) -> dict[str, Any]:
        spec = self.registry.find(request.tool_call["name"])
        return {
            "type": "tool_call",
            "tool": request.tool_call["name"],
            "call_id": request.tool_call.get("id") or "",
            "source": spec.source if spec is not None else "unknown",
        }

    def _start(self, request: ToolCallRequest) -> float:
        args = request.tool_call.get("args")
        shown = args if isinstance(args, dict) and not too_deep(args) else None  # events get encoded
        _emit(request, {**self._event(request), "status": "executing", "args": shown})
        return time.perf_counter()

    def _failure(self, request: ToolCallRequest, exc: Exception) -> ToolMessage:
        name = request.tool_call["name"]
        context = step_of(request).context
        if isinstance(exc, PermissionDeniedError):
            log.warning(
                "run=%s tool=%s call_id=%s permission denied user=%s roles=%s",
                context.run_id or "-",
                name,
                request.tool_call.get("id"),
                context.user_id,
                ",".join(grant(context).roles) or "-",
            )
        elif not isinstance(exc, ToolError | ValueError | TimeoutError | ToolInvocationError):
            log.error("run=%s tool=%s call_id=%s failed", context.run_id or "-", name, request.tool_call.get("id"), exc_info=exc)
        message = error_message(request, describe_failure(name, exc))
        if isinstance(exc, PermissionDeniedError):
            message.additional_kwargs["kb_cause"] = "denied"
        elif isinstance(exc, ToolArgumentError | ToolInvocationError):
            message.additional_kwargs["kb_cause"] = "arguments"
        return message

    def _finish(self, request: ToolCallRequest, result: Result, started: float) -> Result:
        if not isinstance(result, ToolMessage):
            return result  # a Command: the tool updates the state itself
        result = _capped(result)
        duration = round((time.perf_counter() - started) * 1000, 3)
        event = self._event(request)
        replayed = bool(result.additional_kwargs.pop("kb_replayed", False))
        cause = result.additional_kwargs.pop("kb_cause", None)
        text = result.text
        if result.status == "error":
            status = "denied" if cause == "denied" else "error"
            extra: dict[str, Any] = {"replayed": True} if replayed else {}
            if cause == "arguments":
                extra["cause"] = "arguments"
            _emit(request, {**event, "status": status, "error": text.removeprefix("Error: "), "duration_ms": duration, **extra})
        else:
            _emit(request, {**event, "status": "done", "duration_ms": duration, "result": text[:RESULT_PREVIEW], **({"replayed": True} if replayed else {})})
        context = step_of(request).context
        log.info(
            "run=%s tool=%s call_id=%s status=%s duration_ms=%.1f user=%s thread=%s",
            context.run_id or "-",
            request.tool_call["name"],
            request.tool_call.get("id"),
            result.status,
            duration,
            context.user_id,
            context.thread_id,
        )
        return result


def chain(policies: Sequence[Any]) -> tuple[Callable[[ToolCallRequest, Execute], Result], Callable[[ToolCallRequest, AExecute], Awaitable[Result]]]:
    """``wrap_tool_call`` and ``awrap_tool_call`` for a ``ToolNode``: ``policies`` outermost first."""

    def wrap(request: ToolCallRequest, execute: Execute) -> Result:
        def at(i: int) -> Execute:
            if i == len(policies):
                return execute
            return lambda req: policies[i].wrap(req, at(i + 1))

        return at(0)(request)

    async def awrap(request: ToolCallRequest, execute: AExecute) -> Result:
        def at(i: int) -> AExecute:
            if i == len(policies):
                return execute
            return lambda req: policies[i].awrap(req, at(i + 1))

        return await at(0)(request)

    return wrap, awrap


def platform_policies(
    registry: ToolRegistry, step_for: Callable[[ToolCallRequest], ToolStep] | None = None
) -> list[Any]:
    """The platform's policies in the order they apply (outermost first); ``step_for`` works out a call's
    round from the graph (its state and runtime) when the run's config does not carry one."""
    return [
        Round(step_for),
        Report(registry),
        Permissions(registry),
        Arguments(registry),
        Approval(registry),
        RunOnce(registry),
        Gate(),
        Deadline(registry),
    ]


def grant(context: ToolContext) -> Grant:
    return context.grant if isinstance(context.grant, Grant) else grant_for(context.settings, context.user_id)


def describe_failure(name: str, exc: BaseException) -> str:
    """A failure in words the model (and the user) can act on; the exception's class stays in the log."""
    if isinstance(exc, ToolInvocationError):
        return f"invalid arguments for {name!r}: {_pydantic_problems(exc)}"
    if isinstance(exc, TimeoutError):
        return str(exc) or f"tool {name!r} timed out; try a narrower request or another tool"
    if isinstance(exc, ToolError):
        return str(exc)
    if isinstance(exc, ValueError):
        return f"tool {name!r} rejected the input: {exc}"
    if isinstance(exc, OSError):
        return f"tool {name!r} could not read or write its storage: {exc.strerror or exc}"
    if isinstance(exc, NotImplementedError):
        return f"tool {name!r} cannot run here: {exc}"
    words = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return f"tool {name!r} failed: {words[:300] or 'an unexpected error'}"


def _pydantic_problems(exc: ToolInvocationError) -> str:
    errors = exc.filtered_errors or []
    if not errors:
        return str(exc.source)[:300]
    parts = []
    for error in errors[:10]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "arguments"
        if error.get("type") == "missing":
            parts.append(f"missing required argument {where!r}")
        else:
            parts.append(f"{where}: {error.get('msg', 'invalid')} (got {error.get('input')!r:.60})")
    return "; ".join(parts)


def _timed_out(request: ToolCallRequest, seconds: float) -> str:
    return f"tool {request.tool_call['name']!r} timed out after {seconds:g} s; try a narrower request or another tool"


def _emit(request: ToolCallRequest, event: dict[str, Any]) -> None:
    """Status events are for watching; a broken listener must not break the tool calls."""
    emit = step_of(request).emit
    if emit is None:
        return
    try:
        emit(event)
    except Exception:
        log.exception("tool status listener failed on %s", event.get("status"))


def _capped(message: ToolMessage) -> ToolMessage:
    text = message.content if isinstance(message.content, str) else json.dumps(message.content, ensure_ascii=False, default=str)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[:MAX_OUTPUT_CHARS] + f"\n…[truncated: {len(text) - MAX_OUTPUT_CHARS} more characters]"
    if text is not message.content:
        message = message.model_copy(update={"content": text})
    return message


def _outcome(result: Result) -> tuple[str, str]:
    if isinstance(result, ToolMessage):
        content = result.content if isinstance(result.content, str) else json.dumps(result.content, ensure_ascii=False, default=str)
        return ("error" if result.status == "error" else "success"), content
    return "success", ""


def _replayed(request: ToolCallRequest, recorded: Any) -> ToolMessage:
    """What an earlier run of a side-effecting call recorded, or a warning if it never finished."""
    call = request.tool_call
    log.info("tool=%s call_id=%s replayed the recorded outcome (%s)", call["name"], call.get("id"), recorded.status)
    if recorded.status == "running":
        text = (
            f"Error: tool {call['name']!r} was cut off by a crash before its result was saved, so it may or may "
            "not have taken effect; check before asking for it again"
        )
        status = "error"
    else:
        text, status = recorded.content, "success" if recorded.status == "success" else "error"
    message = ToolMessage(content=text, tool_call_id=call["id"], name=call["name"], status=status)
    message.additional_kwargs["kb_replayed"] = True
    return message

