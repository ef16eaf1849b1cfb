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
    from graph.server import graph

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


def test_an_explicit_value_beats_the_environment_even_when_it_is_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    path = tmp_path / "kb-agent.toml"  # type: ignore[operator]
    path.write_text("top_k = 7\n", "utf-8")
    monkeypatch.setenv("KB_AGENT_CONFIG", str(path))
    monkeypatch.setenv("KB_AGENT_TOP_K", "10")
    assert Settings(top_k=5).top_k == 5  # 5 is the default: still the caller's choice
    assert Settings(top_k=6).top_k == 6
    monkeypatch.delenv("KB_AGENT_TOP_K")
    assert Settings(top_k=5).top_k == 5 and Settings().top_k == 7


def test_replace_never_rereads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    base = Settings(top_k=5, max_rounds=3)
    monkeypatch.setenv("KB_AGENT_TOP_K", "10")
    monkeypatch.setenv("KB_AGENT_MAX_TOKENS", "999")
    copy = base.replace(max_rounds=4)
    assert (copy.top_k, copy.max_rounds, copy.max_tokens) == (5, 4, base.max_tokens)
    assert base.max_rounds == 3  # the original is untouched
    with pytest.raises(ConfigError, match="unknown setting 'no_such_setting'"):
        base.replace(no_such_setting=1)
    with pytest.raises(ConfigError, match="KB_AGENT_MAX_ROUNDS must be at least 1"):
        base.replace(max_rounds=0)


def test_sources_say_where_each_value_came_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    path = tmp_path / "kb-agent.toml"  # type: ignore[operator]
    path.write_text("[kb_agent]\nmax_rounds = 6\ntop_k = 3\n", "utf-8")
    monkeypatch.setenv("KB_AGENT_CONFIG", str(path))
    monkeypatch.setenv("KB_AGENT_TOP_K", "4")
    settings = Settings(temperature=0.3)
    sources = settings.sources()
    assert sources["max_rounds"] == "file" and sources["top_k"] == "environment"
    assert sources["temperature"] == "argument" and sources["max_tool_calls"] == "default"
    assert settings.replace(max_tool_calls=2).sources()["max_tool_calls"] == "argument"


def test_empty_variable_of_a_non_string_setting_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "")
    monkeypatch.setenv("KB_AGENT_REWRITE_QUERY", "")
    settings = Settings()
    assert settings.max_rounds == 10 and settings.rewrite_query is True


def test_kb_agent_variables_that_are_not_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_TOKENS", "x")
    monkeypatch.setenv("KB_AGENT_API_KEY", "k")
    monkeypatch.setenv("KB_AGENT_REDIS_URL", "redis://127.0.0.1:1")
    monkeypatch.setenv("OTHER_TOOL_TOP_K", "x")
    assert Settings().max_rounds == 10


@pytest.mark.parametrize(
    ("variable", "hint"),
    [("KB_AGENT_TOPK", "KB_AGENT_TOP_K"), ("KB_AGENT_MAX_ROUND", "KB_AGENT_MAX_ROUNDS"), ("KB_AGENT_ZZZ", None)],
)
def test_an_unknown_kb_agent_variable_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, hint: str | None
) -> None:
    monkeypatch.setenv(variable, "3")
    with pytest.raises(ConfigError) as info:
        Settings()
    message = str(info.value)
    assert message.startswith(f"{variable} (environment): unknown setting") and "\n" not in message
    assert (f"did you mean {hint}?" in message) if hint else "did you mean" not in message


def test_unknown_or_badly_typed_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown setting 'no_such_setting'"):
        Settings(no_such_setting=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="max_rounds") as info:
        Settings(max_rounds="ten")  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_settings_are_frozen_and_hashable() -> None:
    settings = Settings()
    with pytest.raises((TypeError, ValueError)):
        settings.top_k = 3  # type: ignore[misc]
    assert hash(settings) == hash(Settings()) and settings == Settings()


def test_section_views_read_the_same_values() -> None:
    settings = Settings(top_k=4, max_rounds=2)
    assert settings.retrieval.top_k == 4 and settings.budget.max_rounds == 2
    with pytest.raises(AttributeError):
        _ = settings.retrieval.max_rounds


def test_current_is_reused_while_the_environment_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    first = Settings.current()
    assert Settings.current() is first
    monkeypatch.setenv("KB_AGENT_TOP_K", "6")
    assert Settings.current().top_k == 6


def test_the_variable_named_to_hold_the_api_key_is_not_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY_ENV", "KB_AGENT_DASHSCOPE_KEY")
    monkeypatch.setenv("KB_AGENT_DASHSCOPE_KEY", "sk-x")
    assert Settings().api_key == "sk-x"
