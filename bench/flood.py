"""One caller floods the server; does everyone else still get answers? ``langgraph dev`` with tokens.

Per scenario, on a fresh ``langgraph dev`` (10 jobs, no knowledge base, long-term memory and query rewriting
off) whose model is the loopback OpenAI-compatible endpoint answering every request after ``--latency`` s, as
a paid model would (so a run holds a worker while it waits, the way the flood the red team saw did):

1. quiet: bob asks ``--questions`` calculator questions at once (each on a new thread): their median latency;
2. flood: alice sends one ``--big-mb`` MB request body and ``--runs`` background runs of ``--run-kb`` KB each
   (one model request each), all at once, while bob asks the same questions again and ``/ok`` is polled every 0.2 s. Reported: bob's median
   latency against quiet (target <= 2x), the slowest ``/ok`` (target <= 1 s), and what alice's requests got.

Scenarios: ``limits`` (the defaults: 1 MB bodies, 2 runs in flight per caller, 20 queued, 600 requests a
minute) and ``no-limits`` (all of them lifted: the server as it was before they existed).

    python bench/flood.py [--only limits] [--runs 100] [--big-mb 10] [--questions 5] [--latency 0.5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.server_concurrency import model_env, slow_endpoint  # noqa: E402
from tests.fixtures.in_flight import InFlight  # noqa: E402
from tests.fixtures.serve import DevServer, dev_env  # noqa: E402

TOKENS = {"tok-alice": {"user": "alice"}, "tok-bob": {"user": "bob"}}
ALICE, BOB = {"Authorization": "Bearer tok-alice"}, {"Authorization": "Bearer tok-bob"}
GRAPH = "kb_agent"
NO_LIMITS = {
    "KB_AGENT_MAX_BODY_BYTES": str(200_000_000),
    "KB_AGENT_RUNS_PER_USER": "100000",
    "KB_AGENT_RUN_QUEUE_PER_USER": "100000",
    "KB_AGENT_REQUESTS_PER_MINUTE": "100000000",
    "KB_AGENT_MAX_INPUT_MESSAGES": "100000",
}


def _question(n: int) -> dict[str, Any]:
    return {"assistant_id": GRAPH, "input": {"messages": [{"role": "user", "content": f"计算 {n} × 37"}]}}


async def _ask(client: httpx.AsyncClient, n: int) -> float:
    thread = (await client.post("/threads", json={}, headers=BOB)).json()["thread_id"]
    started = time.perf_counter()
    response = await client.post(f"/threads/{thread}/runs/wait", json=_question(n), headers=BOB)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    assert str(n * 37) in json.dumps(response.json(), ensure_ascii=False), response.text[:300]
    return elapsed


async def _bob(client: httpx.AsyncClient, count: int, offset: int) -> list[float]:
    """Bob's questions, all at once (each on its own thread), as a few people of his would ask them."""
    return list(await asyncio.gather(*(_ask(client, offset + i) for i in range(count))))


async def _poll_ok(client: httpx.AsyncClient, stop: asyncio.Event) -> list[float]:
    seen = []
    while not stop.is_set():
        started = time.perf_counter()
        await client.get("/ok")
        seen.append(time.perf_counter() - started)
        await asyncio.sleep(0.2)
    return seen


async def _alice(client: httpx.AsyncClient, threads: list[str], big_mb: int, run_kb: int) -> Counter[str]:
    big = {"assistant_id": GRAPH, "input": {"messages": [{"role": "user", "content": "x" * (big_mb << 20)}]}}
    filler = "请总结这段话。" + "字" * (run_kb * 1024 // 3)  # run_kb KB of UTF-8: one model request each

    async def one(path: str, body: dict[str, Any]) -> str:
        try:
            return str((await client.post(path, json=body, headers=ALICE)).status_code)
        except httpx.HTTPError as exc:
            return type(exc).__name__

    payload = {"assistant_id": GRAPH, "input": {"messages": [{"role": "user", "content": filler}]}}
    jobs = [one(f"/threads/{threads[0]}/runs/wait", big)] if big_mb else []
    jobs += [one(f"/threads/{t}/runs", payload) for t in threads]
    return Counter(await asyncio.gather(*jobs))


async def _scenario(url: str, args: argparse.Namespace) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=args.runs + 20)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        await _ask(client, 1)  # warm: first run imports and opens everything
        threads = [(await client.post("/threads", json={}, headers=ALICE)).json()["thread_id"] for _ in range(args.runs)]
        quiet = await _bob(client, args.questions, 100)
        stop = asyncio.Event()
        poll = asyncio.create_task(_poll_ok(client, stop))
        flood = asyncio.create_task(_alice(client, threads, args.big_mb, args.run_kb))
        await asyncio.sleep(0.5)  # alice's requests are in
        loud = await _bob(client, args.questions, 200)
        got = await flood
        stop.set()
        ok = await poll
    return {
        "quiet_s": [round(x, 2) for x in quiet],
        "flood_s": [round(x, 2) for x in loud],
        "quiet_median_s": round(statistics.median(quiet), 3),
        "flood_median_s": round(statistics.median(loud), 3),
        "ratio": round(statistics.median(loud) / statistics.median(quiet), 2),
        "slowest_ok_s": round(max(ok), 3),
        "alice_statuses": dict(got),
    }


def run(name: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"kb-flood-{name}-") as tmp, slow_endpoint(args.latency, InFlight()) as endpoint:
        env = dev_env(Path(tmp) / "home")
        env.update(model_env(endpoint))
        env.update(
            KB_AGENT_API_TOKENS=json.dumps(TOKENS), KB_AGENT_LONG_TERM_MEMORY="false", KB_AGENT_REWRITE_QUERY="false"
        )
        if name == "no-limits":
            env.update(NO_LIMITS)
        srv = DevServer(env, Path(tmp) / "dev.log", jobs=10).start()
        try:
            return {"scenario": name, **asyncio.run(_scenario(srv.url, args))}
        finally:
            srv.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="limits,no-limits")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--big-mb", type=int, default=10)
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--run-kb", type=int, default=10, help="size of each of alice's runs' question")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = [run(name, args) for name in args.only.split(",")]
    print(f"{'scenario':<10} {'quiet p50':>9} {'flood p50':>9} {'ratio':>6} {'slowest /ok':>11}  alice got")
    for r in results:
        print(
            f"{r['scenario']:<10} {r['quiet_median_s']:>8.3f}s {r['flood_median_s']:>8.3f}s {r['ratio']:>5.2f}x"
            f" {r['slowest_ok_s']:>10.3f}s  {r['alice_statuses']}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
