"""`kb-agent tools call` exit codes agree with docs/tools.md: 2 for bad arguments, 1 when the tool fails."""

from __future__ import annotations

import logging

import pytest
from typer.testing import CliRunner

from cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    "args", ['{"expr": "1+1"}', "{}", '{"expression": 12}', '{"expression": "1", "x": 1}']
)
def test_arguments_the_schema_refuses_exit_2(args: str) -> None:
    result = runner.invoke(app, ["tools", "call", "calculator", "--args", args])
    assert result.exit_code == 2, result.output
    assert "invalid arguments for 'calculator'" in result.output


@pytest.mark.parametrize("as_json", [False, True])
def test_a_tool_that_fails_on_valid_arguments_exits_1(as_json: bool) -> None:
    extra = ["--json"] if as_json else []
    result = runner.invoke(app, ["tools", "call", "calculator", "--args", '{"expression": "1/0"}', *extra])
    assert result.exit_code == 1, result.output


def test_a_call_leaves_the_logging_level_as_it_found_it() -> None:
    """The CLI quiets the kb_agent logger during the call only: an in-process caller keeps its warnings."""
    logger = logging.getLogger("kb_agent")
    before = logger.level
    result = runner.invoke(app, ["tools", "call", "calculator", "--args", '{"expression": "1+1"}'])
    assert result.exit_code == 0, result.output
    assert logger.level == before and logger.level != logging.ERROR
