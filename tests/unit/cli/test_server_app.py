"""``kb-agent serve`` builds the deployment's model client before it serves (not on the first runs)."""

from __future__ import annotations

import logging

import pytest

from cli.server_app import warm_model_client
from graph.services import ROOT
from nodes.settings import Settings

LOCAL = "http://127.0.0.1:8000/v1"


@pytest.fixture(autouse=True)
def fresh_clients() -> None:
    ROOT.chat_models.clear()


def test_the_configured_endpoint_client_is_built_at_start_and_reused_by_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KB_AGENT_MODEL", "qwen-plus")
    monkeypatch.setenv("KB_AGENT_BASE_URL", LOCAL)
    monkeypatch.setenv("KB_AGENT_API_KEY", "sk-test")
    warm_model_client()
    assert len(ROOT.chat_models) == 1
    warmed = next(iter(ROOT.chat_models._clients.values()))
    built = ROOT.chat_models(Settings.current())  # what a run asks for
    assert built is warmed and len(ROOT.chat_models) == 1
    assert built.model_name == "qwen-plus"


def test_the_offline_model_needs_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MODEL", "offline")
    warm_model_client()
    assert len(ROOT.chat_models) == 0


def test_a_bad_model_setting_does_not_stop_the_server_it_is_left_to_the_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("KB_AGENT_API_KEY", "OPENAI_API_KEY", "KB_AGENT_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_AGENT_MODEL", "gpt-4o")  # no key, no local endpoint: a run reports it
    with caplog.at_level(logging.WARNING, logger="kb_agent.serve"):
        warm_model_client()
    assert len(ROOT.chat_models) == 0
    assert "could not prepare the model client" in caplog.text
