"""A run's context is LangGraph's own: checked before the first step, resolved once into the settings every
node of the run reads."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

import nodes.context as run_context
from graph import build_graph
from models import ScriptedChatModel
from nodes.context import ConfigError, ForbiddenSettingError, RunContext, resolve_run
from nodes.settings import Settings


@dataclass
class ServerUser:
    """What a LangGraph server puts under ``langgraph_auth_user``."""

    identity: str
    permissions: tuple[str, ...] = ()


def _graph(tmp_path: Path, answers: list[Any]) -> CompiledStateGraph:
    settings = Settings(data_dir=str(tmp_path), long_term_memory=False)
    return build_graph(InMemorySaver(), model=ScriptedChatModel(answers), knowledge=None, settings=settings)


def test_every_node_of_a_run_reads_the_one_context_resolved_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolved: list[Any] = []
    real = run_context._checked

    def counting(base: Settings, knobs: Any) -> dict[str, Any]:
        resolved.append(dict(knobs))
        return real(base, knobs)

    monkeypatch.setattr(run_context, "_checked", counting)
    graph = _graph(tmp_path, ["first", "second"])
    config = {"configurable": {"thread_id": "t", "user_id": "alice"}}
    graph.invoke({"messages": [("user", "hello")]}, config, context={"top_k": 3})
    assert resolved == [{"top_k": 3}]  # once for the run, not once per node
    asyncio.run(graph.ainvoke({"messages": [("user", "again")]}, config, context={"top_k": 2}))
    assert resolved == [{"top_k": 3}, {"top_k": 2}]


def test_a_refused_context_stops_the_run_before_anything_is_written(tmp_path: Path) -> None:
    graph = _graph(tmp_path, ["never"])
    config = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(ForbiddenSettingError, match="data_dir"):
        graph.invoke({"messages": [("user", "hello")]}, config, context={"data_dir": "/etc"})
    with pytest.raises(ConfigError, match="max_rounds"):
        asyncio.run(graph.ainvoke({"messages": [("user", "hello")]}, config, context={"max_rounds": 10_000}))
    assert graph.get_state(config).values == {}  # not even the question was checkpointed


def test_a_server_run_takes_its_identity_from_the_authenticated_user_never_from_the_context() -> None:
    deployment = Settings(user_id="operator", roles="admin", groups="finance")
    user = ServerUser("bob", ("role:analyst", "group:hr"))
    run = resolve_run({"top_k": 2}, {"langgraph_auth_user": user, "user_id": "alice"}, deployment)
    assert isinstance(run, RunContext)
    assert (run.user_id, run.settings.roles, run.settings.groups, run.settings.top_k) == ("bob", "analyst", "hr", 2)
    with pytest.raises(ForbiddenSettingError, match="credentials"):
        resolve_run({"user_id": "mallory"}, {"langgraph_auth_user": user}, deployment)


def test_in_process_the_callers_user_id_names_the_user() -> None:
    run = resolve_run(None, {"user_id": "alice"}, Settings(user_id="default"))
    assert run.user_id == "alice"
    assert resolve_run(run, {"user_id": "someone-else"}) is run  # resolved once, kept


def test_the_graph_is_langgraphs_own_and_its_schema_is_the_callers_knobs(tmp_path: Path) -> None:
    graph = _graph(tmp_path, ["ok"])
    assert type(graph) is CompiledStateGraph  # no subclass, no copied internals
    copy = graph.copy(update={"checkpointer": InMemorySaver()})  # what a server does with it
    assert copy.get_context_jsonschema()["title"] == "Context"  # Studio shows only the caller's knobs
    with pytest.raises(ConfigError, match="max_rounds"):
        copy.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c"}}, context={"max_rounds": 10_000})


def test_a_run_acts_with_the_rights_its_user_holds_now(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A run requested earlier (a cron) keeps only what the owner's tokens grant when it runs; a runtime
    that names the user alone gets what every token of theirs grants; no token, no run."""
    import json

    from nodes.context import GROUP_PREFIX, ROLE_PREFIX, TOKEN_MARK
    from nodes.tokens import TOKENS_ENV

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"t1": {"user": "ann", "roles": ["admin"], "groups": ["hr"]}}), "utf-8")
    monkeypatch.setenv(TOKENS_ENV, str(tokens))
    deployment = Settings(data_dir=str(tmp_path))
    at_creation = ServerUser("ann", (TOKEN_MARK, ROLE_PREFIX + "admin", GROUP_PREFIX + "hr"))

    def settings(user: ServerUser) -> Settings:
        return resolve_run(None, {"langgraph_auth_user": user}, deployment).settings

    assert (settings(at_creation).roles, settings(at_creation).groups) == ("admin", "hr")
    bare = ServerUser("ann")  # Aegra fires a cron as the owner's id alone
    assert (settings(bare).roles, settings(bare).groups) == ("admin", "hr")
    tokens.write_text(json.dumps({"t1": {"user": "ann", "roles": ["reader"]}, "t2": {"user": "ann", "roles": ["reader", "user"]}}), "utf-8")
    assert (settings(at_creation).roles, settings(at_creation).groups) == ("", "")  # narrowed: admin, hr gone
    assert settings(bare).roles == "reader"  # what every token of hers grants
    tokens.write_text(json.dumps({"t3": {"user": "bob", "roles": ["admin"]}}), "utf-8")
    for user in (at_creation, bare):
        with pytest.raises(ForbiddenSettingError, match="holds no token"):
            settings(user)
