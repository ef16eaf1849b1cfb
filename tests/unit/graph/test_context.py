"""A run's context: only the caller's knobs, within the deployment's caps; identity from the server's user."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from nodes.context import (
    DEV_MARK,
    HEADER_MARK,
    TOKEN_MARK,
    ConfigError,
    Context,
    ForbiddenSettingError,
    check_run_values,
    run_settings,
)
from nodes.settings import Settings

KNOBS = {f.name for f in fields(Context)}
OPERATOR_ONLY = sorted(set(Settings.model_fields) - KNOBS)


class S(TypedDict, total=False):
    seen: object


def _run(
    context: Any = None, configurable: dict | None = None, deployment: Settings | None = None
) -> Settings:
    """The settings a node of a one-node graph sees for this context and config."""
    seen: list[Settings] = []

    def node(state: S, runtime: Runtime[Context]) -> dict:
        seen.append(run_settings(runtime, deployment))
        return {}

    g = StateGraph(S, context_schema=Context)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    g.compile().invoke({}, {"configurable": configurable or {}}, context=context)
    return seen[0]


@dataclass
class ServerUser:
    """What a LangGraph server puts in ``configurable["langgraph_auth_user"]`` (a BaseUser)."""

    identity: str
    permissions: tuple[str, ...] = ()


def _as(user: ServerUser, context: Any = None, deployment: Settings | None = None) -> Settings:
    return _run(context, {"langgraph_auth_user": user}, deployment)


def test_the_deployment_settings_are_not_run_knobs() -> None:
    for name in (
        "base_url",
        "api_key_env",
        "data_dir",
        "roles",
        "groups",
        "role_permissions",
        "user_roles",
        "mcp_config",
        "embedder",
        "checkpoint_url",
        "database_url",
        "chroma_url",
        "reranker",
    ):
        assert name in OPERATOR_ONLY


@pytest.mark.parametrize("key", OPERATOR_ONLY)
def test_every_operator_setting_in_a_run_is_refused_by_name(key: str) -> None:
    with pytest.raises(ForbiddenSettingError, match=f"'{key}' is a deployment setting"):
        Context(**{key: "x"})
    with pytest.raises(ForbiddenSettingError, match=f"'{key}'"):
        check_run_values({key: "x"}, Settings(), configurable=True)


def test_an_unknown_key_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="'colour' is not a run setting") as refused:
        Context(colour="blue")
    assert not isinstance(refused.value, ForbiddenSettingError)


@pytest.mark.parametrize("bad", ["max_rounds=3", ["max_rounds"], 42, None.__class__])
def test_a_context_that_is_not_an_object_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigError, match="must be an object"):
        check_run_values(bad)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"max_rounds": "ten"}, "max_rounds must be a number"),
        ({"max_rounds": 2.5}, "max_rounds must be a whole number"),
        ({"max_rounds": True}, "max_rounds must be a number"),
        ({"max_rounds": 0}, "max_rounds must be at least 1"),
        ({"max_seconds": -1}, "max_seconds must be positive"),
        ({"max_seconds": float("nan")}, "max_seconds must be a number"),
        ({"temperature": 7}, "temperature must be between 0 and 2"),
        ({"rewrite_query": "yes"}, "rewrite_query must be true or false"),
        ({"model": 5}, "model must be a string"),
        ({"timezone": "Mars/Olympus"}, "not an IANA time zone"),
        ({"model": "x" * 1_000_000}, "1000000 characters long"),
        ({"user_id": "u" * 1_000_000}, "1000000 characters long"),
    ],
)
def test_wrong_types_and_oversized_values_are_refused(values: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Context(**values)


def test_a_run_may_lower_budgets_but_never_raise_them() -> None:
    deployment = Settings(
        max_rounds=6, max_tool_calls=10, max_seconds=60.0, tool_timeout=30.0, max_tokens=5000
    )
    lowered = _run(Context(max_rounds=2, tool_timeout=5.0), deployment=deployment)
    assert (lowered.max_rounds, lowered.tool_timeout, lowered.max_tool_calls) == (2, 5.0, 10)
    for key, value in [
        ("max_rounds", 7),
        ("max_tool_calls", 11),
        ("max_seconds", 61.5),
        ("tool_timeout", 31.5),
        ("max_tokens", 5001),
    ]:
        with pytest.raises(ConfigError, match=f"{key}={value} is above this deployment's limit"):
            _run({key: value}, deployment=deployment)


def test_top_k_is_capped_by_max_top_k() -> None:
    deployment = Settings(top_k=5, max_top_k=8)
    assert _run({"top_k": 8}, deployment=deployment).top_k == 8
    with pytest.raises(ConfigError, match="top_k=9 is above"):
        _run({"top_k": 9}, deployment=deployment)


def test_a_run_picks_only_models_the_operator_offers() -> None:
    deployment = Settings(base_url="http://127.0.0.1:9/v1", model="qwen-plus", allowed_models="qwen-max")
    assert _run({"model": "qwen-max"}, deployment=deployment).model == "qwen-max"
    assert _run({"model": "qwen-plus"}, deployment=deployment).model == "qwen-plus"
    with pytest.raises(ConfigError, match="model 'gpt-5' is not offered"):
        _run({"model": "gpt-5"}, deployment=deployment)


def test_a_refused_context_runs_nothing() -> None:
    calls: list[int] = []

    def node(state: S, runtime: Runtime[Context]) -> dict:
        calls.append(1)
        return {}

    g = StateGraph(S, context_schema=Context)
    g.add_node("n", node)
    g.add_edge(START, "n")
    saver = InMemorySaver()
    compiled = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(ForbiddenSettingError, match="'data_dir'"):
        compiled.invoke({}, config, context={"data_dir": "/tmp/elsewhere"})
    assert calls == [] and saver.get_tuple(config) is None


def test_the_in_process_developer_sets_everything_with_a_settings_object(tmp_path: Any) -> None:
    mine = Settings(data_dir=str(tmp_path), roles="admin", groups="hr", max_rounds=50)
    seen = _run(mine)
    assert (seen.data_dir, seen.roles, seen.group_list, seen.max_rounds) == (
        str(tmp_path),
        "admin",
        ("public", "hr"),
        50,
    )


def test_a_token_decides_user_roles_and_groups() -> None:
    alice = ServerUser("alice", (TOKEN_MARK, "role:user", "group:hr"))
    seen = _as(alice, deployment=Settings(roles="admin", groups="finance"))
    assert (seen.user_id, seen.roles, seen.group_list) == ("alice", "user", ("public", "hr"))
    with pytest.raises(ForbiddenSettingError, match="user_id is decided by the caller's credentials"):
        _as(alice, {"user_id": "bob"})
    assert _as(alice, {"user_id": "alice"}).user_id == "alice"


def test_a_server_user_without_token_groups_gets_the_user_groups_table() -> None:
    deployment = Settings(user_groups='{"bob": ["hr"]}', groups="finance", roles="admin")
    bob = _as(ServerUser("bob", (TOKEN_MARK,)), deployment=deployment)
    assert (bob.roles, bob.group_list) == ("", ("public", "hr"))  # roles: user_roles, else default_roles
    carol = _as(ServerUser("carol", (TOKEN_MARK,)), deployment=deployment)
    assert carol.group_list == ("public",)  # the operator's own KB_AGENT_GROUPS never reach a caller


def test_development_identities() -> None:
    header = _as(ServerUser("carol", (HEADER_MARK,)))
    assert header.user_id == "carol"
    with pytest.raises(ForbiddenSettingError):
        _as(ServerUser("carol", (HEADER_MARK,)), {"user_id": "mallory"})
    anonymous = _as(ServerUser("default", (DEV_MARK,)), {"user_id": "dave"})
    assert anonymous.user_id == "dave"


def test_identity_without_server_info_falls_back_to_the_auth_keys() -> None:
    seen = _run(
        None, {"langgraph_auth_user_id": "erin", "langgraph_auth_permissions": [TOKEN_MARK, "role:reader"]}
    )
    assert (seen.user_id, seen.roles) == ("erin", "reader")


def test_a_user_of_another_auth_is_taken_by_identity() -> None:
    seen = _as(ServerUser("frank", ("read",)), deployment=Settings(user_groups='{"frank": ["ops"]}'))
    assert (seen.user_id, seen.group_list) == ("frank", ("public", "ops"))
    with pytest.raises(ForbiddenSettingError):
        _as(ServerUser("frank"), {"user_id": "grace"})


def test_in_process_users_get_their_table_groups_too() -> None:
    seen = _run({"user_id": "hana"}, deployment=Settings(groups="eng", user_groups='{"hana": ["hr"]}'))
    assert seen.group_list == ("public", "eng", "hr")
