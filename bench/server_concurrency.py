"""Many threads at once against the LangGraph server: ``langgraph dev`` against ``kb-agent serve``.

Every scenario drives N threads x T turns (default 50 x 3) with ``langgraph-sdk``: the threads are created
first, then all of them ask their turns at once, each turn a ``runs.wait`` ("计算 a × b": one calculator
call and an answer, so two model rounds). Per scenario: wall time of the turns, throughput (turns/s) and
the p50/p95 of a turn's latency as the client saw it. Scenarios, each on fresh state (its own data dir,
Postgres database made with CREATE DATABASE on the running cluster, and redis-server on a free port):

- ``dev``: ``langgraph dev`` (the peer), offline model;
- ``serve``: one ``kb-agent serve`` replica, offline model;
- ``serve-2``: two replicas on two ports, one Postgres + Redis, threads spread over them by the client;
- ``dev-slow`` / ``serve-slow`` / ``serve-2-slow``: the model is the loopback OpenAI-compatible endpoint
  (tests/fixtures/openai_server.py) answering every request after ``--latency`` (0.5 s); reported against
  the ideal wall time, turns x model rounds per turn x latency (all threads in parallel), target <= 1.5x;
- ``peer-slow``: the same ``kb-agent serve`` (one replica, the same auth, edge, Postgres, Redis and 500 ms
  endpoint) driving ``create_agent`` (``bench/peer_graph.py``, the second graph of ``bench/langgraph.json``)
  instead of our graph: the peer on the same runtime. Every serve scenario reports the server process's CPU
  seconds per turn (``/proc``: user + system, the turns only), so ``serve-slow`` / ``peer-slow`` is what our
  graph costs the server against ``create_agent``'s;
- ``kill``: one replica under the same offline load, killed with SIGKILL once a third of the turns are
  done and restarted at once: restart time, and how long after the kill the runs it cut were final.

Long-term memory and query rewriting are off (they would add model calls per turn), and no knowledge base is
ingested: what is measured is the server and the agent loop. Aegra's own defaults are kept (3 workers x
10 jobs, 30 s leases); ``langgraph dev`` gets ``--n-jobs-per-worker 10`` (``--dev-jobs``), what its help
calls the default: without the flag langgraph-cli 0.4 runs one run at a time (``--dev-jobs 0`` measures that).
For the slow scenarios the endpoint also reports the most requests it answered at once and the mean while busy.

    KB_TEST_SERVER_VENV=/path/to/py312-venv KB_TEST_POSTGRES_URL=postgresql://postgres:postgres@127.0.0.1:5432/postgres \\
        python bench/server_concurrency.py [--only serve-slow,dev-slow] [--threads 50] [--turns 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from langgraph_sdk import get_sync_client  # noqa: E402

from models.offline.request_reading import split_appended  # noqa: E402
from tests.fixtures.in_flight import InFlight  # noqa: E402
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply  # noqa: E402
from tests.fixtures.serve import (  # noqa: E402
    FINAL,
    LEASE,
    TOKENS,
    DevServer,
    ServeProcess,
    dev_env,
    missing_turns,
    private_database,
    private_redis,
    recovery_seconds,
    serve_env,
    until_final,
)

GRAPH_ID = "kb_agent"
PEER_GRAPH_ID = "create_agent"
BENCH_CONFIG = ROOT / "bench" / "langgraph.json"  # our graph and the peer, served side by side
SCENARIOS = ("dev", "serve", "serve-2", "dev-slow", "serve-slow", "serve-2-slow", "peer-slow", "kill")
QUIET = {
    "KB_AGENT_LONG_TERM_MEMORY": "false",
    "KB_AGENT_REWRITE_QUERY": "false",
    # One token drives every thread here: what is measured is the server, not the per-caller limits.
    "KB_AGENT_RUNS_PER_USER": "100000",
    "KB_AGENT_RUN_QUEUE_PER_USER": "100000",
    "KB_AGENT_REQUESTS_PER_MINUTE": "10000000",
}
TOKEN = next(t for t, who in TOKENS.items() if who["user"] == "alice")


@dataclass
class Result:
    """One scenario's figures."""

    scenario: str
    turns: int = 0
    failed: int = 0
    wall_s: float = 0.0
    turns_per_s: float = 0.0
    p50_s: float = 0.0
    p95_s: float = 0.0
    model_requests: int = 0
    rounds_per_turn: float = 0.0
    ideal_s: float = 0.0
    wall_over_ideal: float = 0.0
    server_cpu_ms_per_turn: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def question(worker: int, turn: int) -> tuple[str, str]:
    a, b = 1000 + 7 * worker + turn, 3 + turn
    return f"计算 {a} × {b}", str(a * b)


# -- the model endpoint ---------------------------------------------------------------------------------


def slow_endpoint(latency: float, inflight: InFlight) -> OpenAIServer:
    """The loopback endpoint answering after ``latency``: a calculator call for a question, then an answer."""
    import re

    def unmarked(message: dict[str, Any]) -> str:
        return split_appended(f"\n\n{message.get('content') or ''}")[0].strip()

    def reply(body: dict[str, Any]) -> ScriptedReply:
        with inflight.request():
            time.sleep(latency)  # each request on its own server thread: they overlap as a provider's would
        # the turn's budget note travels appended to the question, or alone as a last user message after a
        # tool result (the prompt-prefix layout): read past it, or every round looks like a new question
        messages = [m for m in body["messages"] if m.get("role") != "user" or unmarked(m)]
        last = messages[-1]
        if last.get("role") == "tool":
            return ScriptedReply(content=f"计算结果：{last.get('content')}。")
        text = unmarked(last)
        numbers = re.findall(r"\d+", text)
        if "tools" not in body or len(numbers) < 2:
            return ScriptedReply(content="好的。")
        expression = f"{numbers[-2]} * {numbers[-1]}"
        return ScriptedReply(tool_calls=[{"name": "calculator", "arguments": {"expression": expression}}])

    return OpenAIServer(reply, keep_alive=True)  # a provider keeps connections open


def model_env(endpoint: OpenAIServer | None) -> dict[str, str]:
    if endpoint is None:
        return {"KB_AGENT_MODEL": "offline"}
    return {
        "KB_AGENT_MODEL": endpoint.model,
        "KB_AGENT_BASE_URL": endpoint.base_url,
        "OPENAI_API_KEY": endpoint.api_key,
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children, from ``/proc`` (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


# -- the servers ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def serve_stack(tmp: Path, exe: Path, replicas: int, extra: dict[str, str]) -> Iterator[list[ServeProcess]]:
    """``replicas`` kb-agent serve processes on a fresh database and Redis, Aegra's default leases."""
    with private_redis(tmp) as redis_url, private_database() as database_url:
        env = serve_env(tmp / "home", database_url, redis_url)
        for key in LEASE:
            env.pop(key, None)  # production leases (30 s), not the tests' short ones
        env.pop("STUCK_PENDING_THRESHOLD_SECONDS", None)
        env.update(QUIET, **extra)
        servers = [ServeProcess(exe, env, tmp / f"serve-{i}.log") for i in range(replicas)]
        try:
            for srv in servers:
                srv.start("--config", str(BENCH_CONFIG))
            yield servers
        finally:
            for srv in servers:
                srv.stop()


# -- the load ---------------------------------------------------------------------------------------------


@dataclass
class Load:
    """What the clients saw: per-turn latencies, failures, and (for the kill) the runs a kill cut."""

    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    confirmed: list[tuple[str, str, str]] = field(default_factory=list)  # thread, question, answer
    runs: list[tuple[str, str]] = field(default_factory=list)  # thread, run id of every durable turn
    lock: threading.Lock = field(default_factory=threading.Lock)


def client_for(url: str, authenticated: bool) -> Any:
    headers = {"Authorization": f"Bearer {TOKEN}"} if authenticated else None
    return get_sync_client(url=url, timeout=600.0, headers=headers)


def drive(
    urls: list[str],
    threads: int,
    turns: int,
    authenticated: bool,
    *,
    durable: bool = False,
    load: Load | None = None,
    graph_id: str = GRAPH_ID,
) -> tuple[Load, float]:
    """All ``threads`` at once, ``turns`` each; returns what they saw and the wall time of the turns.

    ``durable`` makes each turn ``runs.create`` + ``runs.join`` (the run id survives a dead connection, and
    the run is followed to its end after a restart) instead of one ``runs.wait``.
    """
    load = load if load is not None else Load()
    clients = [client_for(urls[i % len(urls)], authenticated) for i in range(threads)]
    thread_ids = [c.threads.create()["thread_id"] for c in clients]
    start = threading.Barrier(threads + 1)

    def worker(index: int) -> None:
        client, thread_id = clients[index], thread_ids[index]
        start.wait()
        for turn in range(turns):
            text, answer = question(index, turn)
            payload = {"messages": [{"role": "user", "content": text}]}
            began = time.monotonic()
            try:
                if durable:
                    status = durable_turn(client, thread_id, payload, load)
                else:
                    result = client.runs.wait(thread_id, graph_id, input=payload, raise_error=False)
                    failed = not isinstance(result, dict) or "__error__" in result
                    status = "error" if failed else "success"
            except httpx.HTTPError as exc:
                status = f"{type(exc).__name__}: {exc}"
            with load.lock:
                if status == "success":
                    load.latencies.append(time.monotonic() - began)
                    load.confirmed.append((thread_id, text, answer))
                else:
                    load.failures.append(status)

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    start.wait()
    began = time.monotonic()
    for w in workers:
        w.join()
    wall = time.monotonic() - began
    for c in clients:
        c.close()
    return load, wall


def durable_turn(client: Any, thread_id: str, payload: dict[str, Any], load: Load) -> str:
    """One turn that outlives a kill -9: a run the client lost track of is followed until it is final."""
    run_id = None
    for _ in range(600):  # the server may be restarting: ask again until it takes the run
        try:
            run_id = client.runs.create(thread_id, GRAPH_ID, input=payload)["run_id"]
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    if run_id is None:
        return "never accepted"
    with load.lock:
        load.runs.append((thread_id, run_id))
    with contextlib.suppress(httpx.HTTPError):  # the join reconnects by itself; if it gives up, poll
        client.runs.join(thread_id, run_id)
    final = until_final(client, thread_id, run_id, time.monotonic() + 300)
    return "stuck" if final is None else str(final["status"])


def unanswered(url: str, load: Load) -> list[tuple[str, str, int]]:
    """Every confirmed turn read back from its thread: the question once, its product in an answer after it."""
    client = client_for(url, True)
    try:
        states = {
            t: client.threads.get_state(t)["values"].get("messages", [])
            for t in {t for t, *_ in load.confirmed}
        }
    finally:
        client.close()
    return missing_turns(states, load.confirmed)


def figures(name: str, load: Load, wall: float) -> Result:
    n = len(load.latencies)
    return Result(
        scenario=name,
        turns=n,
        failed=len(load.failures),
        wall_s=round(wall, 2),
        turns_per_s=round(n / wall, 2) if wall else 0.0,
        p50_s=round(percentile(load.latencies, 0.5), 3),
        p95_s=round(percentile(load.latencies, 0.95), 3),
        extra={"failures": sorted(set(load.failures))[:5]} if load.failures else {},
    )


# -- the scenarios ----------------------------------------------------------------------------------------


def run_dev(name: str, tmp: Path, args: argparse.Namespace, endpoint: OpenAIServer | None) -> Result:
    env = dev_env(tmp / "home")
    env.update(QUIET, **model_env(endpoint))
    srv = DevServer(env, tmp / "dev.log", jobs=args.dev_jobs or None).start()
    try:
        load, wall = drive([srv.url], args.threads, args.turns, authenticated=False)
    finally:
        srv.stop()
    result = figures(name, load, wall)
    result.extra.update(startup_s=round(srv.startup_seconds, 1), jobs=args.dev_jobs or "cli default")
    return result


def run_serve(
    name: str,
    tmp: Path,
    args: argparse.Namespace,
    endpoint: OpenAIServer | None,
    replicas: int,
    graph_id: str = GRAPH_ID,
) -> Result:
    with serve_stack(tmp, args.exe, replicas, model_env(endpoint)) as servers:
        pids = [s.proc.pid for s in servers if s.proc is not None]
        before = sum(cpu_seconds(pid) for pid in pids)
        load, wall = drive(
            [s.url for s in servers], args.threads, args.turns, authenticated=True, graph_id=graph_id
        )
        cpu = sum(cpu_seconds(pid) for pid in pids) - before
        startups = [round(s.startup_seconds, 1) for s in servers]
        wrong = unanswered(servers[0].url, load)
    result = figures(name, load, wall)
    result.extra["startup_s"] = startups
    result.extra["graph"] = graph_id
    if wrong:  # a turn that succeeded without its product in the thread is not a turn
        result.failed += len(wrong)
        result.extra["wrong_answers"] = wrong[:5]
    if load.latencies:
        result.server_cpu_ms_per_turn = round(1000 * cpu / len(load.latencies), 1)
    return result


def run_kill(name: str, tmp: Path, args: argparse.Namespace) -> Result:
    """Kill -9 the one replica once a third of the turns are done; restart it at once; follow the cut runs."""
    total = args.threads * args.turns
    with serve_stack(tmp, args.exe, 1, model_env(None)) as (srv,):
        outcome: dict[str, Any] = {}
        load = Load()

        def killer() -> None:
            while len(load.confirmed) < total // 3:
                time.sleep(0.05)
            outcome["killed_at"] = time.time()
            outcome["killed_after_turns"] = len(load.confirmed)
            srv.kill9()
            srv.start()
            outcome["restart_s"] = round(srv.startup_seconds, 1)

        kill = threading.Thread(target=killer, daemon=True)
        kill.start()
        load, wall = drive([srv.url], args.threads, args.turns, authenticated=True, durable=True, load=load)
        kill.join(timeout=300)
        client = client_for(srv.url, True)
        try:
            runs = [client.runs.get(t, r) for t, r in load.runs]
            states = {
                t: client.threads.get_state(t)["values"].get("messages", [])
                for t in {t for t, *_ in load.confirmed}
            }
        finally:
            client.close()
    kills = [outcome["killed_at"]] if "killed_at" in outcome else []
    # The runs the kill cut: created before it, final after it.
    cut = [
        r
        for r in runs
        if kills
        and datetime.fromisoformat(r["created_at"]).timestamp()
        < kills[0]
        < datetime.fromisoformat(r["updated_at"]).timestamp()
    ]
    after = recovery_seconds(kills, [r["updated_at"] for r in cut])
    result = figures(name, load, wall)
    result.extra.update(
        killed_after_turns=outcome.get("killed_after_turns"),
        restart_s=outcome.get("restart_s"),
        runs_cut=len(cut),
        cut_final={s: sum(r["status"] == s for r in cut) for s in {r["status"] for r in cut}},
        not_final=sum(r["status"] not in FINAL for r in runs),
        recovery_worst_s=round(max(after, default=0.0), 1),
        recovery_median_s=round(statistics.median(after), 1) if after else 0.0,
        confirmed_lost=len(missing_turns(states, load.confirmed)),
    )
    return result


def run_scenario(name: str, tmp: Path, args: argparse.Namespace, endpoint: OpenAIServer | None) -> Result:
    if name.startswith("dev"):
        return run_dev(name, tmp, args, endpoint)
    if name == "kill":
        return run_kill(name, tmp, args)
    if name == "peer-slow":
        return run_serve(name, tmp, args, endpoint, 1, PEER_GRAPH_ID)
    return run_serve(name, tmp, args, endpoint, 2 if name.startswith("serve-2") else 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=50)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per request of the slow endpoint")
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"comma-separated, of {', '.join(SCENARIOS)}"
    )
    parser.add_argument(
        "--dev-jobs",
        type=int,
        default=10,
        help="langgraph dev's --n-jobs-per-worker (0: leave it out, 1 run at a time)",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}: choose from {SCENARIOS}")
    venv = os.environ.get("KB_TEST_SERVER_VENV", "")
    args.exe = Path(venv) / "bin" / "kb-agent"
    served = [s for s in chosen if s.startswith(("serve", "peer", "kill"))]
    if served and not args.exe.exists():
        parser.error("KB_TEST_SERVER_VENV must name a Python 3.12 venv with .[server] installed")
    if served and not os.environ.get("KB_TEST_POSTGRES_URL"):
        parser.error("KB_TEST_POSTGRES_URL must name a Postgres this script may CREATE DATABASE on")

    results: list[Result] = []
    inflight = InFlight()
    with (
        tempfile.TemporaryDirectory(prefix="kb-server-bench-") as temp,
        slow_endpoint(args.latency, inflight) as slow,
    ):
        for name in chosen:
            tmp = Path(temp) / name
            tmp.mkdir()
            endpoint = slow if name.endswith("-slow") else None
            asked = len(slow.requests)
            inflight.reset()
            print(f"[{time.strftime('%H:%M:%S')}] {name} ...", flush=True)
            result = run_scenario(name, tmp, args, endpoint)
            if endpoint is not None and result.turns:
                result.model_requests = len(slow.requests) - asked
                result.rounds_per_turn = round(result.model_requests / (result.turns + result.failed), 2)
                result.ideal_s = round(args.turns * result.rounds_per_turn * args.latency, 2)
                result.wall_over_ideal = round(result.wall_s / result.ideal_s, 2)
                result.extra.update(
                    endpoint_peak_in_flight=inflight.peak, endpoint_mean_in_flight=round(inflight.mean(), 2)
                )
            print(f"    {json.dumps(asdict(result), ensure_ascii=False)}", flush=True)
            results.append(result)
    report(results, args)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], ensure_ascii=False, indent=2), "utf-8")
    return 0 if all(r.failed == 0 for r in results) else 1


def report(results: list[Result], args: argparse.Namespace) -> None:
    """A markdown table, and each kb-agent serve figure against ``langgraph dev`` of the same run."""
    print(f"\n{args.threads} threads x {args.turns} turns, all at once\n")
    print(
        "| scenario | turns ok / failed | wall s | turns/s | p50 s | p95 s | wall / ideal | in flight: peak, mean "
        "| server CPU ms / turn |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ideal = f"{r.wall_over_ideal:.2f}x (ideal {r.ideal_s:.1f} s)" if r.ideal_s else ""
        peak, mean = r.extra.get("endpoint_peak_in_flight"), r.extra.get("endpoint_mean_in_flight")
        flight = f"{peak}, {mean:.1f}" if peak is not None else ""
        print(
            f"| {r.scenario} | {r.turns} / {r.failed} | {r.wall_s:.1f} | {r.turns_per_s:.2f} | {r.p50_s:.2f} "
            f"| {r.p95_s:.2f} | {ideal} | {flight} | {r.server_cpu_ms_per_turn or ''} |"
        )
    by = {r.scenario: r for r in results}
    for ours, peer in (
        ("serve", "dev"),
        ("serve-2", "dev"),
        ("serve-2", "serve"),
        ("serve-slow", "dev-slow"),
        ("serve-2-slow", "serve-slow"),
    ):
        if ours in by and peer in by and by[peer].turns_per_s and by[peer].p50_s:
            a, b = by[ours], by[peer]
            print(
                f"{ours} / {peer}: throughput {a.turns_per_s / b.turns_per_s:.2f}x, "
                f"p50 {a.p50_s / b.p50_s:.2f}x, p95 {a.p95_s / b.p95_s:.2f}x"
            )
    if "serve-slow" in by and "peer-slow" in by and by["peer-slow"].server_cpu_ms_per_turn:
        a, b = by["serve-slow"], by["peer-slow"]
        print(
            f"serve-slow / peer-slow (create_agent on the same server): server CPU per turn "
            f"{a.server_cpu_ms_per_turn / b.server_cpu_ms_per_turn:.2f}x, wall {a.wall_s / b.wall_s:.2f}x, "
            f"p50 {a.p50_s / b.p50_s:.2f}x"
        )
    if "kill" in by:
        print(f"kill: {json.dumps(by['kill'].extra)}")


if __name__ == "__main__":
    sys.exit(main())
