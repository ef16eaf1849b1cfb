"""Permissions: roles grant patterns, a denied call never reaches its handler, denials are reported."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from nodes.settings import ConfigError, Settings
from tests.fixtures.tool_rounds import Call, Calls
from tools.permissions import (
    DEFAULT_ROLE_PERMISSIONS,
    EVERYTHING,
    NOBODY,
    Grant,
    PermissionConfigError,
    PermissionDeniedError,
    grant_for,
    resolve_grant,
    role_table,
)
from tools.registry import ToolContext, ToolRegistry, ToolSpec

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def _spec(name: str, *perms: str, seen: list[str] | None = None) -> ToolSpec:
    def handler() -> str:
        if seen is not None:
            seen.append(name)
        return f"{name} ran"

    return ToolSpec.from_schema(name=name, description=name, parameters=OBJ, handler=handler, permissions=perms)


def test_default_user_reads_but_does_not_administer() -> None:
    grant = resolve_grant(user_id="bob")
    assert grant.roles == ("user",)
    assert grant.permits(_spec("search", "kb:read"))
    assert grant.permits(_spec("mcp_tool", "mcp:files"))  # operator-configured MCP servers: allowed
    assert grant.missing(_spec("delete", "kb:admin")) == ["kb:admin"]
    assert grant.permits(_spec("free"))  # a tool that needs nothing


def test_every_needed_permission_must_be_granted() -> None:
    grant = Grant(roles=("x",), patterns=("kb:read",))
    assert grant.missing(_spec("both", "kb:read", "kb:write")) == ["kb:write"]


def test_wildcards_and_admin() -> None:
    ops = Grant(roles=("ops",), patterns=("kb:*",))
    assert ops.permits(_spec("d", "kb:admin")) and not ops.permits(_spec("f", "feedback:write"))
    assert EVERYTHING.permits(_spec("any", "anything:at-all"))
    assert resolve_grant(user_id="u", roles="admin").permits(_spec("d", "kb:admin"))


def test_roles_resolution_order() -> None:
    users = json.dumps({"alice": ["admin"], "carol": "reader"})
    assert resolve_grant(user_id="alice", user_roles_json=users).roles == ("admin",)
    assert resolve_grant(user_id="carol", user_roles_json=users).roles == ("reader",)
    assert resolve_grant(user_id="dave", user_roles_json=users, default_roles="reader").roles == ("reader",)
    # Roles given for the run win over the configured ones.
    assert resolve_grant(user_id="alice", roles="user", user_roles_json=users).roles == ("user",)


def test_unknown_role_grants_nothing() -> None:
    grant = resolve_grant(user_id="u", roles="admn")  # a typo must not widen access
    assert grant.patterns == () and not grant.permits(_spec("s", "kb:read"))
    with pytest.raises(Exception, match=r"roles \(admn\)"):
        grant.check(_spec("s", "kb:read"))


def test_role_table_extends_and_replaces_defaults(tmp_path: Path) -> None:
    table = role_table(json.dumps({"ops": ["kb:*"], "user": ["kb:read"]}))
    assert table["ops"] == ("kb:*",) and table["user"] == ("kb:read",)
    assert table["admin"] == DEFAULT_ROLE_PERMISSIONS["admin"]
    path = tmp_path / "roles.json"
    path.write_text(json.dumps({"auditor": ["feedback:*"]}), encoding="utf-8")
    assert role_table(str(path))["auditor"] == ("feedback:*",)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("role_permissions", "{not json", "not valid JSON"),
        ("role_permissions", "[1, 2]", "must be an object"),
        ("role_permissions", '{"ops": [1]}', "expected a list of names"),
        ("user_roles", "/no/such/file.json", "neither JSON nor an existing JSON file"),
        ("user_roles", '{"alice": 3}', "expected a list of names"),
    ],
)
def test_bad_role_settings_are_clear_config_errors(field: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings(**{field: value})


def test_env_settings_reach_the_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_USER_ROLES", '{"alice": ["admin"]}')
    assert grant_for(Settings(user_id="alice")).permits(_spec("d", "kb:admin"))
    assert not grant_for(Settings(user_id="bob")).permits(_spec("d", "kb:admin"))
    monkeypatch.setenv("KB_AGENT_DEFAULT_ROLES", "")
    assert grant_for(Settings(user_id="bob")).roles == ()


def test_a_call_without_a_resolved_caller_gets_no_permission_at_all() -> None:
    assert grant_for(None) is NOBODY
    seen: list[str] = []
    registry = ToolRegistry(
        [
            _spec("admin_only", "kb:admin", seen=seen),
            _spec("writes", "memory:write", seen=seen),
            _spec("open", seen=seen),
        ]
    )
    calls = [
        Call("c1", "admin_only", {}),
        Call("c2", "writes", {}),
        Call("c3", "open", {}),
    ]
    outcomes = Calls(registry).run(calls, ToolContext())
    assert [o.status for o in outcomes] == ["error", "error", "success"]
    assert all("no resolved caller" in o.content for o in outcomes[:2])
    assert seen == ["open"]  # the refused ones never reached their handler; a tool needing nothing runs
    # code that means to act with every right says so
    assert Calls(registry).run(calls[:1], ToolContext(grant=EVERYTHING))[0].status == "success"


def test_an_empty_grant_from_roles_is_told_apart_from_no_caller() -> None:
    refused = resolve_grant(user_id="bob", default_roles="")
    with pytest.raises(PermissionDeniedError, match=r"roles \(none\)"):
        refused.check(_spec("d", "kb:admin"))


def test_denied_call_never_reaches_the_handler(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    registry = ToolRegistry([_spec("admin_only", "kb:admin", seen=seen), _spec("open", seen=seen)])
    events: list[dict[str, Any]] = []
    ctx = ToolContext(user_id="bob", grant=resolve_grant(user_id="bob"), run_id="r1")
    with caplog.at_level(logging.WARNING, logger="kb_agent.tools"):
        outcomes = Calls(registry).run(
            [Call("c1", "admin_only", {}), Call("c2", "open", {})],
            ctx,
            emit=events.append,
        )
    assert seen == ["open"]
    assert outcomes[0].status == "error" and "permission denied" in outcomes[0].content
    assert "kb:admin" in outcomes[0].content and outcomes[1].content == "open ran"
    denied = [e for e in events if e["status"] == "denied"]
    assert denied == [
        {
            "type": "tool_call",
            "tool": "admin_only",
            "call_id": "c1",
            "source": "builtin",
            "status": "denied",
            "error": outcomes[0].error,
            "duration_ms": denied[0]["duration_ms"],
        }
    ]
    assert denied[0]["duration_ms"] >= 0
    assert any("permission denied" in r.getMessage() and "user=bob" in r.getMessage() for r in caplog.records)


def test_permission_is_checked_before_arguments() -> None:
    """A denied tool says only that it is denied, not what its arguments should be."""
    strict = ToolSpec.from_schema(
        name="strict",
        description="d",
        parameters={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        handler=lambda x: x,
        permissions=("kb:admin",),
    )
    ctx = ToolContext(grant=resolve_grant(user_id="bob"))
    [outcome] = Calls(ToolRegistry([strict])).run([Call("c", "strict", {})], ctx)
    assert "permission denied" in outcome.content and "missing required" not in outcome.content


def test_bad_role_json_is_a_permission_config_error() -> None:
    with pytest.raises(PermissionConfigError):
        role_table("{broken")
