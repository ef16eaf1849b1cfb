"""graph/auth.py and how a run's Context takes the authenticated user: tokens decide, headers in dev."""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.runtime import Runtime
from langgraph_sdk import Auth

from graph import auth as server_auth
from graph.context import Context


def _authenticate(headers: dict[bytes, bytes]) -> dict:
    return asyncio.run(server_auth.authenticate(headers))


def test_development_mode_takes_the_user_header() -> None:
    assert _authenticate({b"x-kb-user": b"alice"}) == {"identity": "alice", "permissions": ["kb-auth:header"]}
    assert _authenticate({}) == {"identity": "default", "permissions": []}


def test_tokens_decide_user_and_roles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        server_auth.TOKENS_ENV, json.dumps({"t-1": {"user": "alice", "roles": ["admin"]}, "t-2": "bob"})
    )
    alice = _authenticate({b"authorization": b"Bearer t-1", b"x-kb-user": b"mallory"})
    assert alice == {"identity": "alice", "permissions": ["kb-auth:token", "role:admin"]}
    assert _authenticate({b"authorization": b"Bearer t-2"})["identity"] == "bob"
    for bad in ({}, {b"authorization": b"Bearer nope"}, {b"authorization": b"Basic t-1"}):
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            _authenticate(bad)
        assert refused.value.status_code == 401


def test_a_token_without_a_user_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps({"t": {"roles": ["admin"]}}))
    with pytest.raises(ValueError, match="has no user"):
        _authenticate({b"authorization": b"Bearer t"})


def _ctx_in_run(configurable: dict, context: Context) -> Context:
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    class S(TypedDict, total=False):
        seen: object

    seen: list[Context] = []

    def node(state: S, runtime: Runtime[Context]) -> dict:
        seen.append(Context.from_runtime(runtime))
        return {}

    g = StateGraph(S, context_schema=Context)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    g.compile().invoke({}, {"configurable": configurable}, context=context)
    return seen[0]


def test_an_authenticated_run_cannot_choose_its_user_or_roles() -> None:
    ctx = _ctx_in_run(
        {"langgraph_auth_user_id": "alice", "langgraph_auth_permissions": ["kb-auth:token", "role:reader"]},
        Context(user_id="mallory", roles="admin"),
    )
    assert (ctx.user_id, ctx.roles) == ("alice", "reader")
    plain = _ctx_in_run(
        {"langgraph_auth_user_id": "bob", "langgraph_auth_permissions": ["kb-auth:token"]},
        Context(roles="admin"),
    )
    assert (plain.user_id, plain.roles) == ("bob", "")  # no roles in the token: the configured ones


def test_development_header_sets_the_user_but_not_roles() -> None:
    ctx = _ctx_in_run(
        {"langgraph_auth_user_id": "carol", "langgraph_auth_permissions": ["kb-auth:header"]},
        Context(user_id="mallory", roles="admin"),
    )
    assert (ctx.user_id, ctx.roles) == ("carol", "admin")
    anonymous = _ctx_in_run({"langgraph_auth_user_id": "default"}, Context(user_id="dave"))
    assert anonymous.user_id == "dave"
