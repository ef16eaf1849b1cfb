"""``get_chat_model``: offline by default, an OpenAI-compatible client when configured (construct only)."""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from models import ChatModels, OfflineChatModel, get_chat_model
from models.errors import ModelConfigError
from nodes.settings import Settings

LOCAL = "http://127.0.0.1:8000/v1"


def _key(model: ChatOpenAI) -> str:
    assert model.openai_api_key is not None
    return model.openai_api_key.get_secret_value()


def test_default_context_gives_the_offline_model() -> None:
    ctx = Settings()
    assert ctx.uses_offline_model
    assert ctx.model_name == "offline"
    assert isinstance(get_chat_model(ctx), OfflineChatModel)


def test_offline_by_name_even_with_a_key_and_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    ctx = Settings(model="offline", base_url=LOCAL)
    assert ctx.uses_offline_model
    assert isinstance(get_chat_model(ctx), OfflineChatModel)


def test_offline_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MODEL", "offline")
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    assert isinstance(get_chat_model(Settings()), OfflineChatModel)


def test_key_and_base_url_give_a_chat_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test-key")
    ctx = Settings(model="qwen-plus", base_url=LOCAL, temperature=0.3, model_timeout=12.5, model_max_retries=5)
    model = get_chat_model(ctx)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "qwen-plus"
    assert model.openai_api_base == LOCAL
    assert _key(model) == "sk-test-key"
    assert model.temperature == 0.3
    assert model.request_timeout == 12.5
    assert model.max_retries == 5
    assert model.stream_usage is True


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-env")
    monkeypatch.setenv("KB_AGENT_MODEL", "deepseek-chat")
    monkeypatch.setenv("KB_AGENT_BASE_URL", LOCAL)
    model = get_chat_model(Settings())
    assert isinstance(model, ChatOpenAI)
    assert (model.model_name, model.openai_api_base, _key(model)) == ("deepseek-chat", LOCAL, "sk-env")


def test_key_alone_defaults_to_gpt_4o_mini(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    model = get_chat_model(Settings())
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert model.openai_api_base is None


def test_model_without_key_or_base_url_is_a_config_error() -> None:
    with pytest.raises(ModelConfigError, match="KB_AGENT_API_KEY") as info:
        get_chat_model(Settings(model="gpt-4o"))
    message = str(info.value)
    assert "'gpt-4o'" in message
    assert "OPENAI_API_KEY" in message and "KB_AGENT_BASE_URL" in message


def test_config_error_names_a_custom_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-wrong-variable")  # not the one asked for...
    ctx = Settings(model="qwen-plus", api_key_env="DASHSCOPE_API_KEY")
    with pytest.raises(ModelConfigError, match="DASHSCOPE_API_KEY"):
        get_chat_model(ctx)
    monkeypatch.setenv("DASHSCOPE_API_KEY", "sk-dash")
    assert _key(get_chat_model(ctx)) == "sk-dash"


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        get_chat_model(Settings(model="gpt-4o"))


def test_base_url_without_key_uses_a_placeholder_key() -> None:
    model = get_chat_model(Settings(model="llama3", base_url=LOCAL))
    assert isinstance(model, ChatOpenAI)
    assert model.openai_api_base == LOCAL
    assert _key(model) == "not-needed"


def test_base_url_alone_is_not_offline() -> None:
    ctx = Settings(base_url=LOCAL)
    assert not ctx.uses_offline_model
    model = get_chat_model(ctx)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini"
    assert _key(model) == "not-needed"


def test_openai_api_key_alone_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    ctx = Settings()
    assert not ctx.uses_offline_model
    model = get_chat_model(ctx)
    assert isinstance(model, ChatOpenAI)
    assert _key(model) == "sk-openai"


def test_named_key_wins_over_openai_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-kb")
    assert _key(get_chat_model(Settings(model="gpt-4o"))) == "sk-kb"


def test_same_settings_reuse_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    clients = ChatModels()
    first = clients(Settings(model="gpt-4o", base_url=LOCAL))
    assert clients(Settings(model="gpt-4o", base_url=LOCAL)) is first
    assert clients(Settings(model="gpt-4o-mini", base_url=LOCAL)) is not first
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-rotated")
    rotated = clients(Settings(model="gpt-4o", base_url=LOCAL))
    assert rotated is not first and _key(rotated) == "sk-rotated"
    assert len(clients) == 3
    clients.clear()
    assert len(clients) == 0 and clients(Settings(model="gpt-4o", base_url=LOCAL)) is not rotated


def test_a_one_off_caller_gets_its_own_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    ctx = Settings(model="gpt-4o", base_url=LOCAL)
    assert get_chat_model(ctx) is not get_chat_model(ctx)


def test_the_root_shares_its_clients_across_deployments(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Two deployments (data dirs) on one endpoint share the client; the root's close forgets it."""
    from graph.services import Root

    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    root = Root()
    one = Settings(model="gpt-4o", base_url=LOCAL, data_dir=str(tmp_path / "a"))
    two = Settings(model="gpt-4o", base_url=LOCAL, data_dir=str(tmp_path / "b"))
    assert root.services(one) is not root.services(two)
    assert root.chat_models(one) is root.chat_models(two)
    root.close()
    assert len(root.chat_models) == 0


def test_offline_models_are_fresh_instances() -> None:
    assert get_chat_model(Settings()) is not get_chat_model(Settings())


def test_runs_starting_together_share_one_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first round of many runs at once builds the endpoint's client once, not once per pool thread."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import models

    built: list[str] = []
    entered = threading.Barrier(6, timeout=5)
    real = models._build_openai

    def slow_build(*args: object) -> ChatOpenAI:
        built.append("x")
        return real(*args)

    monkeypatch.setattr(models, "_build_openai", slow_build)
    clients = ChatModels()
    ctx = Settings(model="qwen-plus", base_url=LOCAL)

    def first_round(_: int) -> ChatOpenAI:
        entered.wait()  # all six ask at the same moment, as the node pool's threads do
        return clients(ctx)

    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(first_round, range(6)))
    assert len(built) == 1
    assert all(c is got[0] for c in got)
