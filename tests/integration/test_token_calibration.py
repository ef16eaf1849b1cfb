"""Token counts calibrate: the estimate is corrected by the usage an endpoint reports."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from graph.builder import build_graph
from models.tokens import TokenCalibration, calibration
from nodes.settings import Settings
from nodes.state import State
from nodes.summarize import HistoryLimits, measure
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply, reference_prompt_tokens

pytestmark = pytest.mark.timeout(120)
MODEL = "scripted-gpt"


def test_the_ratio_is_per_model_bounded_and_ignores_tiny_requests() -> None:
    cal = TokenCalibration()
    assert cal.ratio("m") == 1.0 and cal.calibrated("m", 1_000) == 1_000
    cal.observe("m", 1_000, 800)
    assert cal.ratio("m") == pytest.approx(0.8) and cal.calibrated("m", 1_000) == 800
    assert cal.ratio("other") == 1.0
    cal.observe("m", 10, 10_000)  # too small to say anything about the tokenizer
    assert cal.ratio("m") == pytest.approx(0.8)
    cal.observe("wild", 1_000, 100_000)
    assert cal.ratio("wild") == cal.high == 2.0
    cal.observe("tiny", 1_000, 1)
    assert cal.ratio("tiny") == cal.low == 0.5


def test_newer_reports_outweigh_older_ones() -> None:
    cal = TokenCalibration()
    for _ in range(5):
        cal.observe("m", 1_000, 1_500)
    for _ in range(30):
        cal.observe("m", 1_000, 700)
    assert cal.ratio("m") == pytest.approx(0.7, abs=0.05)


def test_the_history_budget_is_corrected_by_the_ratio() -> None:
    limits = HistoryLimits.resolve(10_000)
    state = State(messages=[HumanMessage("你好")])
    ctx = Settings(model=MODEL, base_url="http://127.0.0.1:9/v1")
    before, _ = measure(limits, state, ctx, [])
    calibration.observe(MODEL, 1_000, 2_000)  # the endpoint counts twice what we estimate
    after, _ = measure(limits, state, ctx, [])
    assert before.input_budget == limits.input_budget and after.input_budget == limits.input_budget // 2


def test_reported_usage_through_the_graph_brings_the_estimate_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_AGENT_API_KEY", "test-key")
    questions = ["混合检索用什么方法合并两路结果？", "How does the agent decide when to stop calling tools?"] * 5
    rows: list[tuple[int, int, int]] = []
    observe = calibration.observe

    def recording(model: str, estimated: int, reported: int) -> None:
        rows.append((estimated, calibration.calibrated(model, estimated), reported))
        observe(model, estimated, reported)

    monkeypatch.setattr(calibration, "observe", recording)
    server = OpenAIServer([ScriptedReply(content="好的。") for _ in questions], prompt_tokens=reference_prompt_tokens)
    server.start()
    try:
        graph = build_graph()
        ctx: Any = Settings(base_url=server.base_url, model=MODEL, model_max_retries=0, model_timeout=10)
        for question in questions:
            graph.invoke({"messages": [HumanMessage(question)]}, context=ctx)
    finally:
        server.stop()
    assert len(rows) == len(questions)
    assert [r[2] for r in rows] == [
        reference_prompt_tokens(body) for body in server.requests
    ]  # the reports really are the endpoint's counts of what was sent

    def error(col: int) -> float:
        return statistics.fmean(abs(r[col] - r[2]) / r[2] for r in rows[2:])

    assert error(0) > 0.1  # the generic estimate is off for this tokenizer
    assert error(1) < error(0) / 4 and error(1) < 0.05
    assert 0.5 < calibration.ratio(MODEL) < 1.0
