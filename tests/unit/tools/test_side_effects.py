"""The executor records side-effecting calls by ``tool_call_id`` and never runs one twice in a step."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stores.tool_effects import ToolEffectLog
from tests.fixtures.tool_rounds import Call, Calls
from tools.registry import ToolContext, ToolRegistry, ToolSpec

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def _setup(tmp_path: Path, side_effects: bool = True) -> tuple[Calls, ToolEffectLog, list[str]]:
    ran: list[str] = []

    def remember() -> str:
        ran.append("x")
        return f"stored #{len(ran)}"

    registry = ToolRegistry()
    registry.register(ToolSpec.from_schema("remember", "store", OBJ, remember, side_effects=side_effects))
    return Calls(registry), ToolEffectLog(tmp_path), ran


def test_a_recorded_call_is_replayed_not_run_and_another_step_runs_its_own(tmp_path: Path) -> None:
    executor, log, ran = _setup(tmp_path)
    call = [Call("call_1", "remember", {})]
    step = ToolContext(effects=log.step("t1|tools:a"))
    first = executor.run(call, step)
    events: list[dict[str, Any]] = []
    again = executor.run(call, step, emit=events.append)
    assert ran == ["x"] and first[0].content == again[0].content == "stored #1"
    assert events[-1]["replayed"] is True
    other = executor.run(call, ToolContext(effects=log.step("t1|tools:b")))  # a model reusing ids
    assert ran == ["x", "x"] and other[0].content == "stored #2"


def test_a_call_cut_off_by_a_crash_is_not_run_again_and_the_model_is_told(tmp_path: Path) -> None:
    executor, log, ran = _setup(tmp_path)
    log.claim("t1|tools:a", "call_1", "remember")  # claimed, then the process died: no result
    [outcome] = executor.run([Call("call_1", "remember", {})], ToolContext(effects=log.step("t1|tools:a")))
    assert ran == [] and outcome.status == "error" and "may or may not have taken effect" in outcome.content


def test_read_only_tools_are_not_recorded(tmp_path: Path) -> None:
    executor, log, ran = _setup(tmp_path, side_effects=False)
    step = ToolContext(effects=log.step("t1|tools:a"))
    executor.run([Call("call_1", "remember", {})], step)
    executor.run([Call("call_1", "remember", {})], step)
    assert ran == ["x", "x"] and log.claim("t1|tools:a", "call_1", "remember") is None


def test_records_past_the_retention_are_pruned_when_the_log_opens(tmp_path: Path) -> None:
    log = ToolEffectLog(tmp_path)
    assert log.claim("t1|tools", "call_old", "remember") is None
    assert log.claim("t1|tools", "call_new", "remember") is None
    old = (datetime.now(UTC) - timedelta(days=31)).isoformat()
    log._run("UPDATE kb_tool_effects SET recorded_at = ? WHERE call_id = ?", (old, "call_old"))
    log.close()

    reopened = ToolEffectLog(tmp_path)
    assert reopened.claim("t1|tools", "call_old", "remember") is None  # gone: claimable again
    assert reopened.claim("t1|tools", "call_new", "remember") is not None  # recent: still guards its call
    assert reopened.prune(timedelta(0)) == 2
