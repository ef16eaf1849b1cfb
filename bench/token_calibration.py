"""Prompt-token estimate against what the endpoint reports, before and after calibration.

Questions (Chinese, English, mixed) go through the whole graph to the loopback OpenAI-compatible server,
which reports each request's prompt tokens with ``tests.fixtures.openai_server.reference_prompt_tokens``
(a stand-in tokenizer: no real one can be loaded offline). For every request the table compares the raw
CJK-aware estimate and the calibrated one (the running ratio learned from the requests *before* it) with
the reported count: mean absolute error in percent, over all requests and after the first three.

    python bench/token_calibration.py [--turns 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import HumanMessage

from graph.builder import build_graph
from models.tokens import calibration
from nodes.settings import Settings
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply, reference_prompt_tokens

QUESTIONS = [
    "混合检索用什么方法合并两路结果？",
    "What does reciprocal rank fusion do with two ranked lists?",
    "请用三句话解释一下检索增强生成（RAG）的基本流程，并说明它为什么能减少幻觉。",
    "Summarise the trade-offs between BM25 and dense vector retrieval for Chinese documents.",
    "知识库里的文档是怎么切分成片段的？每个片段大概多长？",
    "How does the agent decide when to stop calling tools?",
    "长期记忆和短期记忆在这个系统里分别存在哪里？",
    "Explain the budget: rounds, tool calls, tokens and wall time, and what happens when one is spent.",
    "RAG 和 fine-tuning 各适合什么场景？please answer in both languages.",
    "为什么删除文档需要人工审批？",
]


def measure(turns: int) -> dict[str, Any]:
    """Run ``turns`` questions; per request (estimate, calibrated, reported)."""
    rows: list[tuple[int, int, int]] = []
    observe = calibration.observe

    def recording(model: str, estimated: int, reported: int) -> None:
        rows.append((estimated, calibration.calibrated(model, estimated), reported))
        observe(model, estimated, reported)

    calibration.reset()
    calibration.observe = recording  # type: ignore[method-assign]
    server = OpenAIServer(
        [ScriptedReply(content="好的。") for _ in range(turns)], prompt_tokens=reference_prompt_tokens
    ).start()
    try:
        graph = build_graph()
        ctx = Settings(base_url=server.base_url, model="scripted-gpt", model_max_retries=0, model_timeout=10)
        for i in range(turns):
            graph.invoke({"messages": [HumanMessage(QUESTIONS[i % len(QUESTIONS)])]}, context=ctx)
    finally:
        server.stop()
        calibration.observe = observe  # type: ignore[method-assign]

    def error(col: int, skip: int = 0) -> float:
        return statistics.fmean(abs(r[col] - r[2]) / r[2] * 100 for r in rows[skip:])

    return {
        "requests": len(rows),
        "raw_error_pct": round(error(0), 1),
        "calibrated_error_pct": round(error(1), 1),
        "raw_error_pct_after_3": round(error(0, 3), 1),
        "calibrated_error_pct_after_3": round(error(1, 3), 1),
        "final_ratio": round(calibration.ratio("scripted-gpt"), 3),
        "reported_range": [min(r[2] for r in rows), max(r[2] for r in rows)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("KB_AGENT_HOME", tempfile.mkdtemp(prefix="kb-calibration-"))
    os.environ.setdefault("KB_AGENT_API_KEY", "test-key")
    os.environ.setdefault("KB_AGENT_EMBEDDER", "hashing")
    result = measure(args.turns)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
