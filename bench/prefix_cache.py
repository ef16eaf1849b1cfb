"""How much of each model request repeats the previous one's prefix (what a provider's prompt cache reuses).

The agent talks to the loopback OpenAI-compatible server (tests/fixtures/openai_server.py), which records
every request; each turn asks a knowledge-base question (passages retrieved), gets one calculator call and
then an answer, so a turn is two model rounds. For consecutive requests we measure the share of the new
request (tools, then messages, serialised as sent) that is a common prefix with the previous one:

- between the rounds of one turn (round 2 after round 1);
- between turns (round 1 of turn n after the last round of turn n-1), until the first fold.

and what a provider would bill with a cached-token discount (``--discount``, e.g. 0.9 = cached tokens cost
10 %; several values give one figure each): ``billed_share_mean``, the mean over requests after the first of
``1 - share × discount``, and ``billed_share_thread``, the whole thread's billed prompt characters over its
prompt characters (the first request, uncached, included; long requests weigh more). Shares are of
characters, a stand-in for tokens; a real provider caches in blocks (e.g. 64 or 128 tokens, from 1,024 up),
which rounds each cached prefix down a little.

    python bench/prefix_cache.py [--turns 12] [--discount 0.9 0.5] [--json out.json]
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
from graph.services import open_knowledge_base  # noqa: E402
from nodes.settings import Settings  # noqa: E402
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply  # noqa: E402

QUESTIONS = [
    "知识库里关于 RAG 检索增强生成是怎么说的？顺便算一下 {n} 乘以 3",
    "混合检索用什么方法合并两路结果？再算 {n} 加 7",
    "what does the knowledge base say about agents calling tools? also compute {n} times 2",
]


def script(body: dict[str, Any]) -> ScriptedReply:
    """A tool call for a new question, an answer after a tool result; query rewriting keeps the question."""
    messages = body["messages"]
    last = messages[-1]
    if "tools" not in body:  # the retrieve node's query rewrite
        return ScriptedReply(content=json.dumps({"query": last["content"][-200:]}, ensure_ascii=False))
    result = next((m for m in messages[-2:] if m["role"] == "tool"), None)  # a budget note may follow it
    if result is not None:
        return ScriptedReply(
            content=f"The result is {result['content']}. It depends on the passages [rag.md#0]."
        )
    return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": "6*7"}, "id": None}])


def serialised(body: dict[str, Any]) -> str:
    """The request as a provider's prefix cache sees it: tool definitions first, then the messages."""
    return json.dumps(body.get("tools", []), ensure_ascii=False) + json.dumps(
        body["messages"], ensure_ascii=False
    )


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
    parser.add_argument(
        "--discount", type=float, nargs="+", default=[0.9], help="price cut of cached prompt tokens"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    requests = run(args.turns)
    sizes = [len(serialised(body)) for _, body in requests]
    within, between, shares = [], [], []
    for (turn_a, a), (turn_b, b) in itertools.pairwise(requests):
        share = prefix_share(serialised(a), serialised(b))
        (within if turn_a == turn_b else between).append(share)
        shares.append(share)
    result: dict[str, Any] = {
        "requests": len(requests),
        "within_turn_median": statistics.median(within) if within else None,
        "within_turn_min": min(within) if within else None,
        "between_turns_median": statistics.median(between) if between else None,
        "between_turns_min": min(between) if between else None,
    }
    cached = [0.0] + [share * size for share, size in zip(shares, sizes[1:], strict=True)]
    for discount in args.discount:
        result[f"billed_share_mean@{discount:g}"] = (
            statistics.mean(1 - share * discount for share in shares) if shares else None
        )
        result[f"billed_share_thread@{discount:g}"] = sum(
            size - c * discount for size, c in zip(sizes, cached, strict=True)
        ) / sum(sizes)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
