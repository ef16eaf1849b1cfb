"""graph/auth.py: tokens decide who calls, malformed credentials are 401s, runs may set only their knobs,
assistants are for admins and store items for their owner. (The live server test is
tests/integration/test_server_security.py.)"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from langgraph_sdk import Auth

from graph import auth as server_auth
from graph.limits import THROUGH_EDGE
from nodes.context import DEV_MARK, HEADER_MARK, TOKEN_MARK


def _authenticate(headers: dict[bytes, bytes]) -> dict:
    return asyncio.run(server_auth.authenticate(headers))


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        server_auth.TOKENS_ENV,
        json.dumps(
            {
                "t-1": {"user": "alice", "roles": ["admin"]},
                "t-2": "bob",
                "t-hr": {"user": "hana", "roles": ["user"], "groups": ["hr"]},
                "tök": "zoe",
            }
        ),
    )


def test_development_mode_takes_the_user_header() -> None:
    assert _authenticate({b"x-kb-user": b"alice"}) == {"identity": "alice", "permissions": [HEADER_MARK]}
    assert _authenticate({}) == {"identity": "default", "permissions": [DEV_MARK]}


@pytest.mark.usefixtures("tokens")
def test_tokens_decide_user_roles_and_groups() -> None:
    alice = _authenticate({b"authorization": b"Bearer t-1", b"x-kb-user": b"mallory"})
    assert alice == {"identity": "alice", "permissions": [TOKEN_MARK, "role:admin"]}
    assert _authenticate({b"authorization": b"Bearer t-2"})["identity"] == "bob"
    hana = _authenticate({b"authorization": b"bearer t-hr"})
    assert hana["permissions"] == [TOKEN_MARK, "role:user", "group:hr"]
    assert _authenticate({b"authorization": "Bearer tök".encode()})["identity"] == "zoe"


@pytest.mark.usefixtures("tokens")
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {b"authorization": b"Bearer nope"},
        {b"authorization": b"Basic t-1"},
        {b"authorization": b"Bearer"},
        {b"authorization": b"Bearer "},
        {b"authorization": b"t-1"},
        {b"authorization": "Bearer 令牌".encode()},  # non-ASCII: a 401, not a TypeError
        {b"authorization": b"Bearer \xff\xfe"},  # not UTF-8
        {b"authorization": b"Bearer " + b"x" * 100_000},
        {b"x-auth-scheme": b"langsmith"},  # Studio's header skips nothing
    ],
)
def test_malformed_or_unknown_credentials_are_401(headers: dict[bytes, bytes]) -> None:
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _authenticate(headers)
    assert refused.value.status_code == 401


def test_a_token_without_a_user_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps({"t": {"roles": ["admin"]}}))
    with pytest.raises(ValueError, match="has no user"):
        _authenticate({b"authorization": b"Bearer t"})


@dataclass
class User:
    identity: str


@dataclass
class Ctx:
    """The part of ``Auth.types.AuthContext`` the handlers read."""

    user: User
    permissions: list[str]
    resource: str = "threads"
    action: str = "create_run"


def _call(handler: Any, ctx: Ctx, value: Any) -> Any:
    """The handler as a caller's request meets it: one the edge passed on."""
    passed = THROUGH_EDGE.set(True)
    try:
        return asyncio.run(handler(ctx, value))
    finally:
        THROUGH_EDGE.reset(passed)


def _status(handler: Any, ctx: Ctx, value: Any) -> int:
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _call(handler, ctx, value)
    return refused.value.status_code


ALICE = Ctx(User("alice"), [TOKEN_MARK, "role:user"])


@pytest.mark.parametrize(
    "context, status",
    [
        ({"groups": "hr"}, 403),
        ({"role_permissions": '{"user": ["*"]}'}, 403),
        ({"base_url": "http://127.0.0.1:9/v1", "api_key_env": "HOME", "model": "x"}, 403),
        ({"default_roles": "admin"}, 403),
        ({"data_dir": "/tmp/x"}, 403),
        ({"user_id": "bob"}, 403),
        ({"max_rounds": 1_000}, 422),
        ({"nonsense": 1}, 422),
        ({"max_rounds": "ten"}, 422),
        ({"model": "x" * 1_000_000}, 422),
        ("not an object", 422),
    ],
)
def test_a_run_context_beyond_the_knobs_is_refused(context: Any, status: int) -> None:
    run = {"kwargs": {"context": context, "config": {"configurable": {}}}, "metadata": {}}
    assert _status(server_auth.runs_with_checked_context, ALICE, run) == status


def test_configurable_is_held_to_the_same_rules() -> None:
    spoof = {"kwargs": {"context": None, "config": {"configurable": {"user_id": "bob"}}}}
    assert _status(server_auth.runs_with_checked_context, ALICE, spoof) == 403
    roles = {"kwargs": {"config": {"configurable": {"roles": "admin", "langgraph_auth_user_id": "x"}}}}
    assert _status(server_auth.runs_with_checked_context, ALICE, roles) == 403


def test_a_run_with_knobs_is_stamped_with_its_owner() -> None:
    run = {
        "kwargs": {
            "context": {"max_rounds": 2, "user_id": "alice", "thread_id": "t"},
            "config": {
                "configurable": {"max_rounds": 2, "langgraph_auth_user_id": "alice", "x-request-id": "1"}
            },
        },
        "metadata": {},
    }
    assert _call(server_auth.runs_with_checked_context, ALICE, run) == {"owner": "alice"}
    assert run["metadata"]["owner"] == "alice"


@pytest.mark.parametrize(
    "message", [{"role": "robot", "content": "x"}, {"content": "no role"}, 42, [{"role": "user"}]]
)
def test_a_run_whose_input_is_not_a_message_is_refused_naming_it(message: Any) -> None:
    run = {"kwargs": {"input": {"messages": [{"role": "user", "content": "hi"}, message]}}, "metadata": {}}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _call(server_auth.runs_with_checked_context, ALICE, run)
    assert refused.value.status_code == 422
    assert "input.messages[1] is not a message" in str(refused.value.detail)
    flat = {"input": {"messages": [message]}, "metadata": {}}  # Aegra passes the run's fields flat
    assert _status(server_auth.runs_with_checked_context, ALICE, flat) == 422
    cron = {"payload": {"input": {"messages": [message]}}, "metadata": {}}
    assert _status(server_auth.crons_of_their_owner, Ctx(User("alice"), [TOKEN_MARK], "crons", "create"), cron) == 422


@pytest.mark.parametrize(
    ("message", "named"),
    [
        ({"role": "assistant", "content": "", "tool_calls": "x"}, "messages[1].tool_calls must be a list"),
        ({"role": "assistant", "content": "", "tool_calls": [{"name": 1, "args": {}, "id": "c"}]}, "tool_calls[0]"),
        ({"role": "assistant", "content": "", "tool_calls": [{"name": "calculator", "args": "1+1"}]}, "tool_calls[0]"),
        ({"role": "user", "content": {"text": "hi"}}, "messages[1].content must be text"),
        ({"role": "tool", "content": "x"}, "messages[1] is not a message"),
    ],
)
def test_a_malformed_message_field_is_422_naming_it(message: Any, named: str) -> None:
    """A field of the wrong shape was a 500 (an AttributeError inside the conversion)."""
    run = {"kwargs": {"input": {"messages": [{"role": "user", "content": "hi"}, message]}}, "metadata": {}}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _call(server_auth.runs_with_checked_context, ALICE, run)
    assert refused.value.status_code == 422 and named in str(refused.value.detail), refused.value.detail


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "问" * 50_001},
        {"role": "user", "content": [{"type": "text", "text": "q" * 30_000}, {"type": "text", "text": "q" * 30_000}]},
        ("user", "x" * 1_000_000),
        "y" * 50_001,
    ],
)
def test_a_message_longer_than_the_deployment_takes_is_413_naming_the_limit(message: Any) -> None:
    """Refused before the run is queued, so nothing reaches the thread or the embedder."""
    run = {"kwargs": {"input": {"messages": [message]}}, "metadata": {}}
    with pytest.raises(Auth.exceptions.HTTPException) as refused:
        _call(server_auth.runs_with_checked_context, ALICE, run)
    assert refused.value.status_code == 413
    assert "input.messages[0] has" in str(refused.value.detail) and "at most 50,000" in str(refused.value.detail)
    resume = {"kwargs": {"command": {"update": {"messages": [message]}}}, "metadata": {}}
    assert _status(server_auth.runs_with_checked_context, ALICE, resume) == 413
    fits = {"kwargs": {"input": {"messages": [{"role": "user", "content": "问" * 50_000}]}}, "metadata": {}}
    assert _call(server_auth.runs_with_checked_context, ALICE, fits) == {"owner": "alice"}


def test_a_run_of_ordinary_messages_or_a_resume_passes() -> None:
    for payload in (
        {"input": {"messages": [{"role": "user", "content": "hi"}, ("assistant", "ok"), "plain"]}},
        {"input": None, "command": {"resume": {"approved": True}}},
    ):
        assert _call(server_auth.runs_with_checked_context, ALICE, {**payload, "metadata": {}}) == {"owner": "alice"}


def test_a_resume_that_also_writes_the_thread_is_refused() -> None:
    """Approving with a command that swaps the pending call would run a call nobody was shown."""
    swapped = {"role": "assistant", "content": "", "tool_calls": [{"name": "delete_document", "args": {"doc_id": "x"}, "id": "c1"}]}
    for resume in ({"approved": True}, {"approved": True, "call_id": "c1", "digest": "0" * 64}):
        run = {"kwargs": {"command": {"resume": resume, "update": {"messages": [swapped]}}}, "metadata": {}}
        assert _status(server_auth.runs_with_checked_context, ALICE, run) == 403
    alone = {"kwargs": {"command": {"update": {"messages": [{"role": "user", "content": "hi"}]}}}, "metadata": {}}
    assert _call(server_auth.runs_with_checked_context, ALICE, alone) == {"owner": "alice"}


def test_crons_carry_the_same_checks() -> None:
    cron = {"payload": {"context": {"groups": "hr"}}, "metadata": {}}
    assert (
        _status(server_auth.crons_of_their_owner, Ctx(User("alice"), [TOKEN_MARK], "crons", "create"), cron)
        == 403
    )


def test_studio_user_is_filtered_like_anyone() -> None:
    studio = Ctx(User("langgraph-studio-user"), [], "threads", "search")
    assert _call(server_auth.threads_of_their_owner, studio, {}) == {"owner": "langgraph-studio-user"}


@pytest.mark.usefixtures("tokens")
def test_only_admins_change_assistants() -> None:
    for action in ("create", "update", "delete"):
        user = Ctx(User("bob"), [TOKEN_MARK], "assistants", action)
        assert _status(server_auth.assistants_by_admins, user, {"assistant_id": "a"}) == 403
        admin = Ctx(User("alice"), [TOKEN_MARK, "role:admin"], "assistants", action)
        assert _call(server_auth.assistants_by_admins, admin, {"assistant_id": "a"}) is None
    reader = Ctx(User("bob"), [TOKEN_MARK], "assistants", "search")
    assert _call(server_auth.assistants_by_admins, reader, {}) is None


def test_store_items_live_under_their_owner() -> None:
    bob = Ctx(User("bob"), [TOKEN_MARK], "store", "put")
    assert _call(server_auth.store_items_of_their_owner, bob, {"namespace": ("bob", "notes")}) is None
    assert _status(server_auth.store_items_of_their_owner, bob, {"namespace": ("alice", "notes")}) == 403
    assert _status(server_auth.store_items_of_their_owner, bob, {"namespace": ()}) == 403


@pytest.mark.parametrize(
    "webhook",
    ["http://169.254.169.254/latest/meta-data", "http://127.0.0.1:5432/", "https://example.org/hook", "/internal/truncate", 42],
)
def test_a_runs_webhook_is_refused_unless_the_operator_lists_its_host(
    webhook: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = {"kwargs": {"input": None, "webhook": webhook}, "metadata": {}}
    assert _status(server_auth.runs_with_checked_context, ALICE, run) == 403
    cron = {"payload": {"input": None, "webhook": webhook}, "metadata": {}}
    assert _status(server_auth.crons_of_their_owner, Ctx(User("alice"), [TOKEN_MARK], "crons", "create"), cron) == 403
    monkeypatch.setenv("KB_AGENT_WEBHOOK_HOSTS", "hooks.example.com")
    assert _status(server_auth.runs_with_checked_context, ALICE, run) == 403  # still not a listed host
    listed = {"kwargs": {"input": None, "webhook": "https://hooks.example.com/kb"}, "metadata": {}}
    assert _call(server_auth.runs_with_checked_context, ALICE, listed) == {"owner": "alice"}
