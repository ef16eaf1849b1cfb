"""Context fields fill from KB_AGENT_* variables, with clear errors for values that cannot work."""

from __future__ import annotations

import pytest

from graph.context import ConfigError, Context, env_table


def test_defaults_without_environment() -> None:
    ctx = Context()
    assert ctx.max_rounds == 10 and ctx.tool_concurrency == 4 and ctx.tool_timeout == 90.0
    assert ctx.data_dir.endswith(".kb-agent") or ctx.data_dir  # conftest points KB_AGENT_HOME at tmp
    assert ctx.uses_offline_model and ctx.model_name == "offline"


def test_fields_fill_from_environment_with_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "4")
    monkeypatch.setenv("KB_AGENT_TEMPERATURE", "0.5")
    monkeypatch.setenv("KB_AGENT_HOME", "/tmp/somewhere")
    monkeypatch.setenv("KB_AGENT_USER_ID", "alice")
    ctx = Context()
    assert (ctx.max_rounds, ctx.temperature, ctx.data_dir, ctx.user_id) == (4, 0.5, "/tmp/somewhere", "alice")


def test_explicit_values_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "4")
    assert Context(max_rounds=7).max_rounds == 7


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("KB_AGENT_MAX_ROUNDS", "ten", "KB_AGENT_MAX_ROUNDS='ten' is not a valid int"),
        ("KB_AGENT_TOOL_TIMEOUT", "soon", "is not a valid float"),
        ("KB_AGENT_MAX_ROUNDS", "0", "KB_AGENT_MAX_ROUNDS must be at least 1"),
        ("KB_AGENT_TOOL_TIMEOUT", "-1", "KB_AGENT_TOOL_TIMEOUT must be positive"),
    ],
)
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=message):
        Context()


def test_endpoint_or_key_switches_off_the_offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not Context(base_url="http://127.0.0.1:8000/v1").uses_offline_model
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ctx = Context()
    assert not ctx.uses_offline_model and ctx.model_name == "gpt-4o-mini" and ctx.api_key == "sk-test"
    assert Context(model="offline").uses_offline_model


def test_api_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dash")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert Context(api_key_env="DASHSCOPE_API_KEY").api_key == "sk-dash"
    assert "sk-dash" not in repr(Context(api_key_env="DASHSCOPE_API_KEY"))


def test_env_table_lists_every_field() -> None:
    names = [row[0] for row in env_table()]
    assert "KB_AGENT_HOME" in names and "KB_AGENT_MODEL" in names and len(names) == len(set(names))


def test_studio_sees_every_setting_in_the_context_schema() -> None:
    from graph import graph

    schema = graph.get_context_jsonschema()
    assert schema is not None
    properties = schema["properties"]
    for name in ("model", "base_url", "max_rounds", "tool_timeout", "user_id", "data_dir"):
        assert name in properties
    assert properties["max_rounds"]["default"] == 10
    assert "api_key" not in properties  # the secret is never part of the context
