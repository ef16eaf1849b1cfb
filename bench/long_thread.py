"""One thread of N turns (default 1,000) with the offline model and the SQLite checkpointer.

    python bench/long_thread.py                  # 1,000 turns in a temp dir
    python bench/long_thread.py --turns 200 --json out.json
    python bench/long_thread.py --prune          # the same with KB_AGENT_CHECKPOINT_PRUNE

Per turn: wall time of ``Agent.ask``, prompt tokens of every model request of the turn (the offline
model's ``usage_metadata["input_tokens"]`` = the request's messages, plus the tool definitions the
budget counts), and the size of ``threads.sqlite`` + ``-wal`` + ``-shm`` after the turn. The run fails
(exit 1) if any request exceeds the input budget. Long-term memory is off (no embedding in the loop).
"""

from __future__ import annotations

import argparse
import json
import logging
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


def question(i: int) -> str:
    """Turn ``i`` (1-based): arithmetic, date and plain questions in both languages; every 10th is long."""
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


def run(turns: int, prune: bool = False) -> dict[str, Any]:
    logging.disable(logging.WARNING)  # the summarize node logs every fold at INFO
    model = OfflineChatModel()
    # What the budget charges per request: the definitions offered to this (default-role) caller.
    tools = count_tool_tokens(offered_definitions(default_registry(), [], _context("")))
    settings = HistoryLimits.from_context(Settings(model=OFFLINE_MODEL), OFFLINE_MODEL)
    with tempfile.TemporaryDirectory() as warm, open_agent(_context(warm), model=model) as agent:
        agent.ask("计算 1 + 1", thread_id="warm-up")  # imports and caches outside the measured thread
    latencies: list[float] = []
    prompts: list[int] = []
    sizes: list[int] = []
    requests = 0
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        with open_agent(_context(tmp, prune), model=model) as agent:
            for i in range(1, turns + 1):
                started = time.perf_counter()
                agent.ask(question(i), thread_id=THREAD)
                latencies.append(time.perf_counter() - started)
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
    return {
        "turns": turns,
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
        "pruning": "after every turn (KB_AGENT_CHECKPOINT_PRUNE): freed pages are reused, the file is "
        "not vacuumed"
        if prune
        else "none (KB_AGENT_CHECKPOINT_PRUNE off)",
        "per_turn": {"latency_ms": [round(x * 1000, 3) for x in latencies], "prompt": prompts, "db": sizes},
    }


def _context(data_dir: str, prune: bool = False) -> Settings:
    return Settings(
        model=OFFLINE_MODEL,
        data_dir=data_dir,
        long_term_memory=False,
        checkpoint_url="",
        checkpoint_prune=prune,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="write all figures (with per-turn series) here")
    parser.add_argument("--prune", action="store_true", help="prune checkpoints after every turn")
    args = parser.parse_args(argv)
    if args.turns < 20:
        parser.error("--turns must be at least 20 (first 10 vs last 10)")
    result = run(args.turns, args.prune)
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
