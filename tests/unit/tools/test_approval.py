"""Approval of high-impact calls in the executor: asked before anything runs, one call at a time."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import Field

from tests.fixtures.tool_rounds import Call, Calls
from tools.approval import (
    ApprovalDecision,
    ApprovalRequest,
    InvalidApprovalError,
    describe_call,
    parse_decision,
)
from tools.permissions import resolve_grant
from tools.registry import ToolContext, ToolError, ToolRegistry, ToolSpec

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"doc_id": {"type": "string", "minLength": 1}},
    "required": ["doc_id"],
}


def _registry(ran: list[str], describe: Any = None) -> ToolRegistry:
    def drop(doc_id: Annotated[str, Field(min_length=1)]) -> str:
        ran.append(f"drop:{doc_id}")
        return f"dropped {doc_id}"

    def read() -> str:
        ran.append("read")
        return "read"

    return ToolRegistry(
        [
            ToolSpec.of(
                drop,
                name="drop",
                description="d",
                requires_approval=True,
                permissions=("kb:admin",),
                describe=describe,
            ),
            ToolSpec.from_schema(name="read", description="r", parameters={"type": "object"}, handler=read),
        ]
    )


class Recorder:
    """An approver that answers from a script and remembers what it was shown."""

    def __init__(self, *answers: ApprovalDecision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return self.answers.pop(0)


ADMIN = ToolContext(user_id="alice", grant=resolve_grant(user_id="alice", roles="admin"))


def test_approved_call_runs_with_the_exact_arguments_shown() -> None:
    ran: list[str] = []
    approver = Recorder(ApprovalDecision(True, "ok"))
    events: list[dict[str, Any]] = []
    outcomes = Calls(_registry(ran)).run(
        [Call("c1", "drop", {"doc_id": "a.md"})], ADMIN, events.append, approver=approver
    )
    assert ran == ["drop:a.md"] and outcomes[0].content == "dropped a.md"
    [request] = approver.asked
    assert request.args == {"doc_id": "a.md"} and request.tool == "drop"
    assert request.description == describe_call("drop", {"doc_id": "a.md"})
    assert [e["status"] for e in events] == ["approval_requested", "approval_granted", "executing", "done"]


def test_rejected_call_has_no_side_effect_and_the_model_is_told_why() -> None:
    ran: list[str] = []
    events: list[dict[str, Any]] = []
    outcomes = Calls(_registry(ran)).run(
        [Call("c1", "drop", {"doc_id": "a.md"}), Call("c2", "read", {})],
        ADMIN,
        events.append,
        approver=Recorder(ApprovalDecision(False, "keep it")),
    )
    assert ran == ["read"]
    assert outcomes[0].status == "error" and "rejected" in outcomes[0].content
    assert "keep it" in outcomes[0].content and outcomes[1].content == "read"
    assert {"approval_requested", "approval_denied"} <= {e["status"] for e in events}


def test_every_call_is_asked_separately_and_all_before_any_runs() -> None:
    ran: list[str] = []
    order: list[str] = []

    class Watching(Recorder):
        def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
            order.append(f"asked with {len(ran)} run")
            return super().__call__(request)

    approver = Watching(ApprovalDecision(True), ApprovalDecision(False))
    Calls(_registry(ran)).run(
        [
            Call("c0", "read", {}),
            Call("c1", "drop", {"doc_id": "a"}),
            Call("c2", "drop", {"doc_id": "b"}),
        ],
        ADMIN,
        approver=approver,
    )
    assert order == ["asked with 0 run", "asked with 0 run"]  # nothing ran before the questions
    assert [r.call_id for r in approver.asked] == ["c1", "c2"] and sorted(ran) == ["drop:a", "read"]


def test_no_way_to_ask_means_not_run() -> None:
    ran: list[str] = []
    [outcome] = Calls(_registry(ran)).run([Call("c1", "drop", {"doc_id": "a"})], ADMIN)
    assert ran == [] and "needs a person's approval" in outcome.content


def test_calls_that_would_fail_anyway_are_not_put_to_a_person() -> None:
    ran: list[str] = []
    approver = Recorder()
    user = ToolContext(user_id="bob", grant=resolve_grant(user_id="bob"))
    executor = Calls(_registry(ran))
    [denied] = executor.run([Call("c1", "drop", {"doc_id": "a"})], user, approver=approver)
    [invalid] = executor.run([Call("c2", "drop", {"doc_id": ""})], ADMIN, approver=approver)
    [broken] = executor.run(
        [Call("c3", "drop", None, error="Expecting value")], ADMIN, approver=approver
    )
    assert approver.asked == [] and ran == []
    assert "permission denied" in denied.content
    assert "at least 1 character" in invalid.content and "not valid JSON" in broken.content


def test_a_describer_that_finds_nothing_to_do_refuses_without_asking() -> None:
    def describe(args: dict[str, Any], _ctx: ToolContext) -> str:
        raise ToolError(f"no document {args['doc_id']!r}")

    ran: list[str] = []
    approver = Recorder()
    [outcome] = Calls(_registry(ran, describe)).run(
        [Call("c1", "drop", {"doc_id": "x"})], ADMIN, approver=approver
    )
    assert approver.asked == [] and ran == [] and "no document 'x'" in outcome.content


def test_a_broken_describer_falls_back_to_the_arguments() -> None:
    def describe(_args: dict[str, Any], _ctx: ToolContext) -> str:
        raise RuntimeError("bug")

    approver = Recorder(ApprovalDecision(False))
    Calls(_registry([], describe)).run(
        [Call("c1", "drop", {"doc_id": "x"})], ADMIN, approver=approver
    )
    assert approver.asked[0].description == describe_call("drop", {"doc_id": "x"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"approved": True}, ApprovalDecision(True, "")),
        ({"approved": False, "reason": " not now "}, ApprovalDecision(False, "not now")),
        ({"approved": True, "reason": None}, ApprovalDecision(True, "")),
        ('{"approved": false}', ApprovalDecision(False, "")),
        ({"approved": True, "call_id": "c1", "digest": "d"}, ApprovalDecision(True, "", "c1", "d")),
    ],
)
def test_parse_decision_accepts_approvals(value: Any, expected: ApprovalDecision) -> None:
    assert parse_decision(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        True,
        "yes",
        None,
        1,
        [],
        {},
        {"approved": "yes"},
        {"approved": 1},
        {"approved": True, "extra": 1},
        {"approved": True, "reason": 5},
        {"approved": True, "call_id": 7},
        {"approved": True, "digest": ["x"]},
    ],
)
def test_parse_decision_refuses_anything_else(value: Any) -> None:
    with pytest.raises(InvalidApprovalError, match="approv"):
        parse_decision(value)


def test_request_payload_is_json_safe() -> None:
    import json

    request = ApprovalRequest("c1", "drop", {"doc_id": "a"}, "delete a", "builtin")
    payload = request.payload("bad answer")
    assert json.loads(json.dumps(payload)) == payload
    assert payload["kind"] == "tool_approval" and payload["error"] == "bad answer"


def test_a_decision_names_the_call_it_was_shown() -> None:
    request = ApprovalRequest("c1", "drop", {"doc_id": "a"}, "delete a", "builtin")
    assert request.payload()["digest"] == request.digest == ApprovalRequest("c1", "drop", {"doc_id": "a"}, "x").digest
    assert ApprovalDecision(True).mismatch(request) == ""
    assert ApprovalDecision(True, call_id="c1", digest=request.digest).mismatch(request) == ""
    assert "c2" in ApprovalDecision(True, call_id="c2").mismatch(request)
    other = ApprovalRequest("c1", "drop", {"doc_id": "b"}, "delete b").digest
    assert "digest" in ApprovalDecision(True, call_id="c1", digest=other).mismatch(request)
