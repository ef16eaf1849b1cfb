"""Settings fields fill from KB_AGENT_* variables, with clear errors for values that cannot work."""

from __future__ import annotations

import pytest

from nodes.settings import ConfigError, Settings, env_table


def test_defaults_without_environment() -> None:
    ctx = Settings()
    assert ctx.max_rounds == 10 and ctx.tool_concurrency == 4 and ctx.tool_timeout == 90.0
    assert ctx.data_dir.endswith(".kb-agent") or ctx.data_dir  # conftest points KB_AGENT_HOME at tmp
    assert ctx.uses_offline_model and ctx.model_name == "offline"


def test_fields_fill_from_environment_with_types(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "4")
    monkeypatch.setenv("KB_AGENT_TEMPERATURE", "0.5")
    monkeypatch.setenv("KB_AGENT_HOME", "/tmp/somewhere")
    monkeypatch.setenv("KB_AGENT_USER_ID", "alice")
    ctx = Settings()
    assert (ctx.max_rounds, ctx.temperature, ctx.data_dir, ctx.user_id) == (4, 0.5, "/tmp/somewhere", "alice")


def test_explicit_values_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "4")
    assert Settings(max_rounds=7).max_rounds == 7


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
        Settings()


def test_endpoint_or_key_switches_off_the_offline_model(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not Settings(base_url="http://127.0.0.1:8000/v1").uses_offline_model
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    ctx = Settings()
    assert not ctx.uses_offline_model and ctx.model_name == "gpt-4o-mini" and ctx.api_key == "sk-test"
    assert Settings(model="offline").uses_offline_model


def test_api_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dash")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert Settings(api_key_env="DASHSCOPE_API_KEY").api_key == "sk-dash"
    assert "sk-dash" not in repr(Settings(api_key_env="DASHSCOPE_API_KEY"))


def test_env_table_lists_every_field() -> None:
    names = [row[0] for row in env_table()]
    assert "KB_AGENT_HOME" in names and "KB_AGENT_MODEL" in names and len(names) == len(set(names))


def test_studio_sees_only_the_caller_knobs_in_the_context_schema() -> None:
    from graph import graph

    schema = graph.get_context_jsonschema()
    assert schema is not None
    properties = schema["properties"]
    for name in ("model", "max_rounds", "tool_timeout", "user_id", "top_k", "timezone"):
        assert name in properties
    for name in ("base_url", "api_key_env", "data_dir", "roles", "groups", "role_permissions", "mcp_config"):
        assert name not in properties  # deployment settings are never a run's to choose
    assert "api_key" not in properties  # the secret is never part of the context


def test_a_config_file_fills_what_the_environment_leaves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    path = tmp_path / "kb-agent.toml"  # type: ignore[operator]
    path.write_text('[kb_agent]\nmax_rounds = 6\ntop_k = 3\nallowed_models = "qwen-max"\n', "utf-8")
    monkeypatch.setenv("KB_AGENT_CONFIG", str(path))
    monkeypatch.setenv("KB_AGENT_TOP_K", "4")
    settings = Settings()
    assert (settings.max_rounds, settings.top_k, settings.allowed_models) == (6, 4, "qwen-max")


@pytest.mark.parametrize(
    "text, message",
    [
        ("max_rounds = 'six'", "max_rounds must be a int"),
        ("no_such_setting = 1", "unknown setting 'no_such_setting'"),
        ("max_rounds = ", "is not valid TOML"),
    ],
)
def test_a_bad_config_file_names_the_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory, text: str, message: str
) -> None:
    path = tmp_path / "bad.toml"  # type: ignore[operator]
    path.write_text(text, "utf-8")
    monkeypatch.setenv("KB_AGENT_CONFIG", str(path))
    with pytest.raises(ConfigError, match=message):
        Settings()
    monkeypatch.setenv("KB_AGENT_CONFIG", str(path) + ".missing")
    with pytest.raises(ConfigError, match="no such file"):
        Settings()
