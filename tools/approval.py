"""Human approval for high-impact tools: the exact action is shown, a person says yes or no.

The graph asks through LangGraph's ``interrupt()``, so the question survives restarts in the checkpoint and
works the same from Python, the CLI and a LangGraph server; the answer comes back with
``Command(resume={"approved": true|false, "reason": ...})``. An approval covers one call: the next call to the
same tool asks again. The question carries the call's id and a digest of its tool and arguments; a decision
that names them is applied only to that call (any other call pending in its place is asked about again).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langgraph.types import interrupt

from tools.registry import ToolError

APPROVAL_KIND = "tool_approval"
RESUME_HINT = (
    'resume with Command(resume={"approved": true|false, "reason": "...", "call_id": "...", "digest": "..."}) '
    "(call_id and digest as shown, optional)"
)
MAX_INVALID_ANSWERS = 5


class InvalidApprovalError(ValueError):
    """A resume value that is not an approval decision."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One pending call shown to a person: which tool, the exact arguments and what it will do."""

    call_id: str
    tool: str
    args: dict[str, Any]
    description: str
    source: str = "builtin"

    @property
    def digest(self) -> str:
        """What the call does, in a form a decision can name: the tool and its exact arguments."""
        return call_digest(self.tool, self.args)

    def payload(self, error: str = "") -> dict[str, Any]:
        """The JSON-safe value carried by the interrupt (shown by Studio, the SDK and the CLI)."""
        data: dict[str, Any] = {
            "kind": APPROVAL_KIND,
            "tool": self.tool,
            "call_id": self.call_id,
            "digest": self.digest,
            "args": self.args,
            "description": self.description,
            "source": self.source,
            "how_to_answer": RESUME_HINT,
        }
        if error:
            data["error"] = error
        return data


@dataclass(frozen=True)
class ApprovalDecision:
    approved: bool
    reason: str = ""
    call_id: str | None = None  # the call the person saw, when the decision names it
    digest: str | None = None

    def mismatch(self, request: ApprovalRequest) -> str:
        """Why this decision is not about ``request`` ('' when it is, or names nothing)."""
        if self.call_id is not None and self.call_id != request.call_id:
            return f"the decision names call {self.call_id!r:.80}, but the call waiting is {request.call_id!r}"
        if self.digest is not None and self.digest != request.digest:
            return "the decision names another tool or other arguments than the call waiting now (digest differs)"
        return ""


def call_digest(tool: str, args: dict[str, Any]) -> str:
    shown = json.dumps([tool, args], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(shown.encode("utf-8")).hexdigest()


Approver = Callable[[ApprovalRequest], ApprovalDecision]


def parse_decision(value: Any) -> ApprovalDecision:
    """Read a resume value; anything but ``{"approved": bool, "reason"?: str}`` is refused with the reason.

    A bare ``True``/``False`` is not accepted on purpose: the answer must say what it is an answer to.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise InvalidApprovalError(
                f"the answer {value!r:.80} is not an approval; {RESUME_HINT}"
            ) from None
    if not isinstance(value, dict):
        raise InvalidApprovalError(f"the answer {value!r:.80} is not an approval; {RESUME_HINT}")
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise InvalidApprovalError(f"'approved' must be true or false, got {approved!r:.40}; {RESUME_HINT}")
    extra = set(value) - {"approved", "reason", "call_id", "digest"}
    if extra:
        raise InvalidApprovalError(f"unexpected field(s) {', '.join(sorted(extra))}; {RESUME_HINT}")
    reason = value.get("reason", "")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise InvalidApprovalError(f"'reason' must be text, got {type(reason).__name__}; {RESUME_HINT}")
    named = {}
    for key in ("call_id", "digest"):
        if value.get(key) is not None:
            if not isinstance(value[key], str):
                raise InvalidApprovalError(f"{key!r} must be text as shown, got {type(value[key]).__name__}; {RESUME_HINT}")
            named[key] = value[key]
    return ApprovalDecision(approved=approved, reason=reason.strip()[:500], **named)


def interrupt_approver(request: ApprovalRequest) -> ApprovalDecision:
    """Pause the graph with the request; a malformed answer asks again, saying what was wrong.

    After :data:`MAX_INVALID_ANSWERS` unusable answers the call is treated as rejected, so a broken client
    cannot keep a thread paused for ever.
    """
    error = ""
    for _ in range(MAX_INVALID_ANSWERS):
        answer = interrupt(request.payload(error))
        try:
            decision = parse_decision(answer)
        except InvalidApprovalError as exc:
            error = str(exc)
            continue
        error = decision.mismatch(request)
        if not error:
            return decision
        error += "; this is the call waiting now, decide again"
    return ApprovalDecision(False, f"no valid approval was given ({error})")


def describe_call(tool: str, args: dict[str, Any]) -> str:
    """The default description: the tool and its exact arguments."""
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True, default=str)
    return f"run tool {tool!r} with arguments {shown}"


@dataclass(frozen=True)
class Review:
    """What the people asked decided for one round of calls: the digest each approved call was shown
    with, and the answer each call that must not run gets instead."""

    approved: dict[str, str]  # call id -> digest of the tool and arguments the person saw
    refused: dict[str, str]  # call id -> the error text the model reads


def review_calls(
    calls: list[dict[str, Any]],
    needs_approval: Callable[[dict[str, Any]], bool],
    describe: Callable[[dict[str, Any]], str],
    approver: Approver | None,
    emit: Callable[[dict[str, Any]], None],
    *,
    source: Callable[[str], str] = lambda _name: "builtin",
    log: Callable[[ApprovalRequest, ApprovalDecision], None] = lambda _r, _d: None,
) -> Review:
    """Ask about every call that needs a person, one by one, before any call of the round runs.

    All questions come first so a pause (``interrupt``) never happens after a side effect: when the graph
    resumes, the step runs again from the start and nothing has run twice. ``needs_approval`` leaves out
    calls that would fail anyway (unknown, denied, bad arguments): they are not put to a person.
    ``describe`` may raise ``ValueError`` (e.g. no such document): the call is refused without asking.
    """
    approved: dict[str, str] = {}
    refused: dict[str, str] = {}
    for call in calls:
        if not needs_approval(call):
            continue
        call_id, name, args = call.get("id") or "", call["name"], call.get("args") or {}
        event = {"type": "tool_call", "tool": name, "call_id": call_id, "source": source(name)}
        if approver is None:
            message = f"tool {name!r} needs a person's approval and this run has no way to ask; nothing was changed"
            refused[call_id] = f"Error: {message}"
            emit({**event, "status": "approval_denied", "reason": message})
            continue
        try:
            description = describe(call)
        except (ToolError, ValueError) as exc:  # the action cannot happen: nothing to ask
            refused[call_id] = f"Error: {exc}"
            emit({**event, "status": "error", "error": str(exc)})
            continue
        request = ApprovalRequest(call_id, name, args, description, source(name))
        emit({**event, "status": "approval_requested", "args": args, "description": request.description})
        decision = approver(request)
        log(request, decision)
        if decision.approved:
            approved[call_id] = request.digest
            emit({**event, "status": "approval_granted", "reason": decision.reason})
            continue
        why = f": {decision.reason}" if decision.reason else ""
        refused[call_id] = f"Error: the user rejected {name!r}{why}. Nothing was changed; do not retry it unasked"
        emit({**event, "status": "approval_denied", "reason": decision.reason})
    return Review(approved, refused)
