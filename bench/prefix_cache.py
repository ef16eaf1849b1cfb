"""How much of each model request repeats the previous one's prefix (what a provider's prompt cache reuses).

The agent talks to the loopback OpenAI-compatible server (tests/fixtures/openai_server.py), which records
every request; each turn asks a knowledge-base question (passages retrieved), gets one calculator call and
then an answer, so a turn is two model rounds. For consecutive requests we measure the share of the new
request (tools, then messages, serialised as sent) that is a common prefix with the previous one:

- between the rounds of one turn (round 2 after round 1);
- between turns (round 1 of turn n after the last round of turn n-1), until the first fold.

and what a provider would bill with a cached-token discount (``--discount``, e.g. 0.9 = cached tokens cost
10 %): the mean billed share of prompt tokens.

    python bench/prefix_cache.py [--turns 12] [--discount 0.9] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from graph.builder import build_graph  # noqa: E402
from graph.open_stores import open_knowledge_base  # noqa: E402
from graph.settings import Settings  # noqa: E402
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply  # noqa: E402

QUESTIONS = [
    "知识库里关于 RAG 检索增强生成是怎么说的？顺便算一下 {n} 乘以 3",
    "混合检索用什么方法合并两路结果？再算 {n} 加 7",
    "what does the knowledge base say about agents calling tools? also compute {n} times 2",
]


def script(body: dict[str, Any]) -> ScriptedReply:
    """A tool call for a new question, an answer after a tool result; query rewriting keeps the question."""
    last = body["messages"][-1]
    if "tools" not in body:  # the retrieve node's query rewrite
        return ScriptedReply(content=json.dumps({"query": last["content"][-200:]}, ensure_ascii=False))
    if last["role"] == "tool":
        return ScriptedReply(content=f"The result is {last['content']}. It depends on the passages [rag.md#0].")
    return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": "6*7"}, "id": None}])


def serialised(body: dict[str, Any]) -> str:
    """The request as a provider's prefix cache sees it: tool definitions first, then the messages."""
    return json.dumps(body.get("tools", []), ensure_ascii=False) + json.dumps(body["messages"], ensure_ascii=False)


def prefix_share(previous: str, current: str) -> float:
    """Share of ``current`` that repeats ``previous`` from the start."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        n += 1
    return n / len(current) if current else 0.0


def run(turns: int) -> list[tuple[int, dict[str, Any]]]:
    """(turn number, request body) for every model request of a ``turns``-turn thread."""
    home = Path(tempfile.mkdtemp(prefix="kb-prefix-"))
    os.environ["KB_AGENT_EMBEDDER"] = "hashing"
    try:
        ctx = Settings(data_dir=str(home), embedder="hashing", long_term_memory=False)
        open_knowledge_base(ctx, create=True).ingest([ROOT / "tests" / "fixtures" / "rag"])
        seen: list[tuple[int, dict[str, Any]]] = []
        with OpenAIServer(script) as server:
            run_ctx = Settings(
                data_dir=str(home),
                embedder="hashing",
                long_term_memory=False,
                base_url=server.base_url,
                model=server.model,
                api_key_env="KB_PREFIX_BENCH_KEY",
                context_window=128_000,
            )
            os.environ["KB_PREFIX_BENCH_KEY"] = server.api_key
            graph = build_graph(InMemorySaver(), memory=None, settings=run_ctx)
            config = {"configurable": {"thread_id": "bench"}}
            for turn in range(turns):
                before = len(server.requests)
                question = QUESTIONS[turn % len(QUESTIONS)].format(n=turn + 1)
                graph.invoke({"messages": [HumanMessage(question)]}, config, context=run_ctx)
                seen += [(turn, body) for body in server.requests[before:] if "tools" in body]
        return seen
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--discount", type=float, default=0.9, help="price cut of cached prompt tokens")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    requests = run(args.turns)
    within, between, billed = [], [], []
    for (turn_a, a), (turn_b, b) in itertools.pairwise(requests):
        share = prefix_share(serialised(a), serialised(b))
        (within if turn_a == turn_b else between).append(share)
        billed.append(1 - share * args.discount)
    result = {
        "requests": len(requests),
        "within_turn_median": statistics.median(within) if within else None,
        "between_turns_median": statistics.median(between) if between else None,
        "billed_share_mean": statistics.mean(billed) if billed else None,
        "discount": args.discount,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
