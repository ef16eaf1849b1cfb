"""``kb-agent config`` shows the values in force and where each came from, never a password."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli.app import app

runner = CliRunner()


def test_config_json_shows_effective_values_and_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "4")
    result = runner.invoke(app, ["config", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["KB_AGENT_MAX_ROUNDS"] == {"value": 4, "source": "environment"}
    assert shown["KB_AGENT_TOOL_CONCURRENCY"] == {"value": 4, "source": "default"}
    assert "KB_AGENT_HOME" in shown and "KB_AGENT_API_KEY" not in shown


def test_config_masks_a_password_in_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_DATABASE_URL", "postgresql://kb:s3cret@db:5432/kb")
    result = runner.invoke(app, ["config", "--json"])
    assert "s3cret" not in result.stdout
    assert json.loads(result.stdout)["KB_AGENT_DATABASE_URL"]["value"] == "postgresql://kb:***@db:5432/kb"
    table = runner.invoke(app, ["config"])
    assert "s3cret" not in table.stdout and "environment" in table.stdout


def test_config_reports_a_bad_setting_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_MAX_ROUNDS", "ten")
    result = runner.invoke(app, ["config"])
    assert result.exit_code == 1
    assert "KB_AGENT_MAX_ROUNDS='ten' is not a valid int" in result.output
    assert "Traceback" not in result.output
