"""Many threads at once in one process, without a server: what the graph itself overlaps.

``server_concurrency.py`` measures the graph behind a LangGraph server, where the runtime's own CPU per run
(Aegra's run bookkeeping, its event broker) dominates on this machine. This bench takes the server away and
drives the same load, N threads x T turns (default 50 x 3) of "计算 a × b" (a calculator call, then an
answer: two model rounds) against the loopback OpenAI-compatible endpoint answering every request after
``--latency`` (0.5 s), through a real checkpointer (SQLite under a temporary data dir, or Postgres with
``--postgres URL`` / ``KB_TEST_POSTGRES_URL``, a database of its own per scenario). Scenarios:

- ``async``: every turn is ``graph.ainvoke`` on one event loop, with the async checkpointer (what a
  LangGraph server does with our async nodes);
- ``sync-pool``: ``graph.invoke`` on a pool of ``--pool`` threads (6: what a server's default executor gives
  sync nodes on 2 cores), the peer: how the graph fared on a server before its nodes were async;
- ``sync-threads``: ``graph.invoke`` from one OS thread per conversation (the in-process Python developer's
  sync path), with the sync checkpointer;
- ``peer-async`` and ``peer-sync-threads``: the same two drivers on ``langchain.agents.create_agent`` with
  the same calculator (``tools.calculator.evaluate``), a ``ChatOpenAI`` client of the same endpoint with our
  timeout and retries, and the same checkpointer: what the load costs an agent with no knowledge base,
  budget, memory or tool platform, so ours/peer is what those cost.

Per scenario: wall time of the turns, turns/s, p50/p95 of a turn, the process's CPU per turn, the
endpoint's requests in flight (peak, mean while busy), and the wall time against the ideal (turns x model
rounds per turn x latency, all threads in parallel). Every answer is checked: a turn
counts as ok only if its last message carries the product.

    python bench/graph_concurrency.py [--only async,sync-pool] [--threads 50] [--turns 3] [--rounds 5] [--postgres URL] [--json out.json]
    python bench/graph_concurrency.py --only async,peer-async,sync-threads,peer-sync-threads --threads 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.server_concurrency import percentile, question, slow_endpoint  # noqa: E402
from tests.fixtures.in_flight import InFlight  # noqa: E402


class Endpoint:
    """The slow endpoint in a child process of its own: its HTTP threads must not share the graph's GIL.

    (A provider's endpoint costs the agent's process nothing; in-process it took about a third of the CPU.)
    """

    def __init__(self, latency: float) -> None:
        import multiprocessing

        self._conn, child = multiprocessing.Pipe()
        self._proc = multiprocessing.get_context("fork").Process(
            target=_serve, args=(latency, child), daemon=True
        )
        self._proc.start()
        self.base_url, self.model, self.api_key = self._conn.recv()

    def ask(self, command: str) -> Any:
        self._conn.send(command)
        return self._conn.recv()

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.ask("stop")
        self._proc.join(timeout=10)


def _serve(latency: float, conn: Any) -> None:
    """The child: answer requests until told to stop; report requests and in-flight figures when asked."""
    inflight = InFlight()
    with slow_endpoint(latency, inflight) as endpoint:
        conn.send((endpoint.base_url, endpoint.model, endpoint.api_key))
        while (command := conn.recv()) != "stop":
            if command == "reset":
                inflight.reset()
                endpoint.requests.clear()
                conn.send(None)
            else:  # "stats"
                conn.send((len(endpoint.requests), inflight.peak, inflight.mean()))
    conn.send(None)


SCENARIOS = ("async", "sync-pool", "sync-threads", "peer-async", "peer-sync-threads")
PEER_TARGET = 1.15  # our wall time over the peer's, same driver, same run


@dataclass
class Result:
    """One scenario's figures."""

    scenario: str
    backend: str
    round: int = 1
    turns: int = 0
    failed: int = 0
    wall_s: float = 0.0
    turns_per_s: float = 0.0
    p50_s: float = 0.0
    p95_s: float = 0.0
    cpu_ms_per_turn: float = 0.0
    model_requests: int = 0
    ideal_s: float = 0.0
    wall_over_ideal: float = 0.0
    peak_in_flight: int = 0
    mean_in_flight: float = 0.0
    errors: list[str] = field(default_factory=list)


@dataclass
class Seen:
    """What the conversations saw: each ok turn's latency, and what went wrong."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def record(self, began: float, messages: list[Any], answer: str) -> None:
        last = messages[-1] if messages else None
        ok = last is not None and answer in str(getattr(last, "content", ""))
        with self.lock:
            if ok:
                self.latencies.append(time.monotonic() - began)
            else:
                self.errors.append(f"wrong answer: {getattr(last, 'content', last)!r:.80}")

    def failed(self, exc: BaseException) -> None:
        with self.lock:
            self.errors.append(f"{type(exc).__name__}: {exc}"[:200])


def payload(worker: int, turn: int) -> tuple[dict[str, Any], str]:
    text, answer = question(worker, turn)
    return {"messages": [{"role": "user", "content": text}]}, answer


def config(worker: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"bench-{worker}"}}


async def run_async(
    graph_of: Callable[[Any], Any], data_dir: Path, url: str, args: argparse.Namespace, seen: Seen
) -> float:
    from stores.checkpoint import open_async_checkpointer

    async with open_async_checkpointer(data_dir, url) as saver:
        graph = graph_of(saver)

        async def conversation(worker: int) -> None:
            for turn in range(args.turns):
                body, answer = payload(worker, turn)
                began = time.monotonic()
                try:
                    out = await graph.ainvoke(body, config(worker))
                except Exception as exc:
                    seen.failed(exc)
                    continue
                seen.record(began, out["messages"], answer)

        began = time.monotonic()
        await asyncio.gather(*(conversation(w) for w in range(args.threads)))
        return time.monotonic() - began


def run_sync(
    graph_of: Callable[[Any], Any],
    data_dir: Path,
    url: str,
    args: argparse.Namespace,
    seen: Seen,
    workers: int,
) -> float:
    from stores.checkpoint import open_checkpointer

    with open_checkpointer(data_dir, url) as saver:
        graph = graph_of(saver)

        def conversation(worker: int) -> None:
            for turn in range(args.turns):
                body, answer = payload(worker, turn)
                began = time.monotonic()
                try:
                    out = graph.invoke(body, config(worker))
                except Exception as exc:
                    seen.failed(exc)
                    continue
                seen.record(began, out["messages"], answer)

        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(conversation, range(args.threads)))
        return time.monotonic() - began


@contextlib.contextmanager
def database(url: str) -> Iterator[str]:
    """A database of its own on ``url``'s cluster (dropped afterwards), or SQLite when ``url`` is empty."""
    if not url:
        yield ""
        return
    os.environ.setdefault("KB_TEST_POSTGRES_URL", url)
    from tests.fixtures.serve import private_database

    with private_database() as private:
        yield private


def run_scenario(name: str, tmp: Path, args: argparse.Namespace, endpoint: Endpoint) -> Result:
    from graph.builder import build_graph
    from graph.services import RunMemory

    def graph_of(saver: Any) -> Any:
        if name.startswith("peer-"):
            return peer_agent(saver)
        return build_graph(saver, memory=RunMemory())  # as graph/server.py's graph

    seen = Seen()
    endpoint.ask("reset")
    cpu = time.process_time()
    with database(args.postgres) as url:
        if name in ("async", "peer-async"):
            wall = asyncio.run(run_async(graph_of, tmp, url, args, seen))
        else:
            wall = run_sync(
                graph_of, tmp, url, args, seen, args.pool if name == "sync-pool" else args.threads
            )
    cpu = time.process_time() - cpu
    requests, peak, mean = endpoint.ask("stats")
    n = len(seen.latencies)
    rounds = requests / max(1, n + len(seen.errors))
    ideal = args.turns * rounds * args.latency
    return Result(
        scenario=name,
        backend="postgres" if args.postgres else "sqlite",
        turns=n,
        failed=len(seen.errors),
        wall_s=round(wall, 2),
        turns_per_s=round(n / wall, 2) if wall else 0.0,
        p50_s=round(percentile(seen.latencies, 0.5), 3),
        p95_s=round(percentile(seen.latencies, 0.95), 3),
        cpu_ms_per_turn=round(1000 * cpu / max(1, n), 1),
        model_requests=requests,
        ideal_s=round(ideal, 2),
        wall_over_ideal=round(wall / ideal, 2) if ideal else 0.0,
        peak_in_flight=peak,
        mean_in_flight=round(mean, 1),
        errors=sorted(set(seen.errors))[:5],
    )


def peer_agent(saver: Any) -> Any:
    """``create_agent`` with our calculator (``bench/peer_graph.py``), a client of the same endpoint, and
    ``saver``.

    Its HTTP clients are its own: langchain-openai shares one default async client per process, and the
    one an earlier scenario's event loop made fails on this one's ("Event loop is closed")."""
    import httpx

    from bench.peer_graph import make_peer
    from nodes.settings import Settings

    timeout = Settings().model_timeout
    return make_peer(
        saver, http_client=httpx.Client(timeout=timeout), http_async_client=httpx.AsyncClient(timeout=timeout)
    )


def quiet_environment(home: Path, endpoint: Endpoint) -> None:
    """The deployment this process plays: the loopback endpoint, hashing embedder, one model call per round."""
    for key in [k for k in os.environ if k.startswith(("KB_AGENT_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_"))]:
        del os.environ[key]
    os.environ.update(
        KB_AGENT_HOME=str(home),
        KB_AGENT_EMBEDDER="hashing",
        KB_AGENT_MODEL=endpoint.model,
        KB_AGENT_BASE_URL=endpoint.base_url,
        KB_AGENT_API_KEY=endpoint.api_key,
        KB_AGENT_LONG_TERM_MEMORY="false",  # no background extraction calls
        KB_AGENT_REWRITE_QUERY="false",
    )


def warm_up() -> None:
    """One turn before any scenario, so none of them pays for first imports and the model client."""
    from langgraph.checkpoint.memory import InMemorySaver

    from graph.builder import build_graph
    from graph.services import RunMemory

    body, answer = payload(0, 0)
    out = build_graph(InMemorySaver(), memory=RunMemory()).invoke(body, config(0))
    if answer not in str(out["messages"][-1].content):
        raise SystemExit(f"the warm-up turn did not answer {answer}: {out['messages'][-1].content!r}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"comma-separated, of {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the endpoint takes per request")
    parser.add_argument(
        "--pool", type=int, default=min(32, (os.cpu_count() or 1) + 4), help="sync-pool's threads"
    )
    parser.add_argument(
        "--postgres", default=os.environ.get("KB_TEST_POSTGRES_URL", ""), help="checkpoints in Postgres"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the scenarios this many times, in alternating order; ratios are the median over rounds",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}: choose from {SCENARIOS}")

    results: list[Result] = []
    endpoint = Endpoint(args.latency)  # forked first, before this process has threads
    try:
        with tempfile.TemporaryDirectory(prefix="kb-graph-bench-") as temp:
            quiet_environment(Path(temp) / "home", endpoint)
            warm_up()
            for round_ in range(1, max(1, args.rounds) + 1):
                # alternating order: a machine getting busier or quieter favours neither side
                for name in chosen if round_ % 2 else reversed(chosen):
                    tmp = Path(temp) / f"{name}-{round_}"
                    tmp.mkdir()
                    print(f"[{time.strftime('%H:%M:%S')}] {name} (round {round_}) ...", flush=True)
                    result = run_scenario(name, tmp, args, endpoint)
                    result.round = round_
                    print(f"    {json.dumps(asdict(result), ensure_ascii=False)}", flush=True)
                    results.append(result)
    finally:
        endpoint.close()
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], ensure_ascii=False, indent=2), "utf-8")
    return 0 if all(r.failed == 0 for r in results) else 1


def report(results: list[Result], args: argparse.Namespace) -> None:
    """A markdown table, and each pair's ratios: per round, and their median when there are several."""
    print(
        f"\n{args.threads} threads x {args.turns} turns in one process, {args.latency} s per model request\n"
    )
    print(
        "| scenario | round | checkpoints | turns ok / failed | wall s | turns/s | p50 s | p95 s | CPU ms/turn | wall / ideal | in flight: peak, mean |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.scenario} | {r.round} | {r.backend} | {r.turns} / {r.failed} | {r.wall_s:.1f} | {r.turns_per_s:.2f} "
            f"| {r.p50_s:.2f} | {r.p95_s:.2f} | {r.cpu_ms_per_turn:.0f} | {r.wall_over_ideal:.2f}x (ideal {r.ideal_s:.1f} s) "
            f"| {r.peak_in_flight}, {r.mean_in_flight:.1f} |"
        )
    rounds: dict[int, dict[str, Result]] = {}
    for r in results:
        rounds.setdefault(r.round, {})[r.scenario] = r
    for ours, peer, target in [
        *((o, "sync-pool", None) for o in ("async", "sync-threads")),
        *((o, f"peer-{o}", PEER_TARGET) for o in ("async", "sync-threads")),
    ]:
        pairs = [
            (by[ours], by[peer]) for by in rounds.values() if ours in by and peer in by and by[peer].wall_s
        ]
        if not pairs:
            continue
        walls = [a.wall_s / b.wall_s for a, b in pairs]
        cpus = [a.cpu_ms_per_turn / b.cpu_ms_per_turn for a, b in pairs if b.cpu_ms_per_turn]
        line = f"{ours} / {peer}: wall {statistics.median(walls):.2f}x"
        if target is not None:
            line += f" (target <= {target})"
        if cpus:
            line += f", CPU per turn {statistics.median(cpus):.2f}x"
        if len(pairs) > 1:
            line += f"; median of {len(pairs)} rounds, wall per round " + " ".join(f"{w:.2f}" for w in walls)
        print(line)


if __name__ == "__main__":
    sys.exit(main())
