"""Postgres restarted under load: runs fail cleanly, later runs succeed, the server
stays up.

The server runs on a Postgres cluster of the test's own (``private_postgres``: initdb + pg_ctl as the
postgres user, on a free port); the shared cluster other jobs use is never touched. Clients keep asking
sums while the cluster is stopped for a few seconds and started again. Nothing of ours is restarted.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from langgraph_sdk import get_sync_client

from tests.fixtures.serve import (
    FINAL,
    PrivatePostgres,
    ServeProcess,
    private_postgres,
    private_redis,
    serve_env,
    server_kb_agent,
)

pytestmark = pytest.mark.server

GRAPH_ID = "kb_agent"
CLIENTS = 4
DOWN_SECONDS = 4.0
TURN_TIMEOUT = 60.0  # a turn that hangs longer than this while Postgres is away is not "failing cleanly"


@dataclass
class Outcomes:
    """(monotonic time the turn ended, 'ok' or why it failed, seconds it took) per client turn."""

    turns: list[tuple[float, str, float]] = field(default_factory=list)
    threads: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, PrivatePostgres]]:
    exe = server_kb_agent()
    tmp = tmp_path_factory.mktemp("serve-pg-restart")
    with private_postgres() as cluster, private_redis(tmp) as redis_url:
        env = serve_env(tmp / "home", cluster.url, redis_url)
        env["KB_AGENT_LONG_TERM_MEMORY"] = "false"
        srv = ServeProcess(exe, env, tmp / "server.log").start()
        try:
            yield srv, cluster
        finally:
            srv.stop()


def _client_loop(url: str, index: int, out: Outcomes, stop: threading.Event) -> None:
    client = get_sync_client(url=url, timeout=TURN_TIMEOUT, headers={"Authorization": "Bearer tok-alice"})
    thread_id: str | None = None
    turn = 0
    try:
        while not stop.is_set():
            turn += 1
            began = time.monotonic()
            try:
                thread_id = thread_id or client.threads.create()["thread_id"]
                with out.lock:
                    out.threads.add(thread_id)
                a = 100 * index + turn
                result = client.runs.wait(
                    thread_id,
                    GRAPH_ID,
                    input={"messages": [{"role": "user", "content": f"计算 {a} × 3"}]},
                    raise_error=False,
                )
                ok = isinstance(result, dict) and "__error__" not in result and str(a * 3) in str(result)
                outcome = "ok" if ok else f"run failed: {str(result)[:200]}"
            except httpx.HTTPStatusError as exc:
                outcome = f"HTTP {exc.response.status_code}"
            except httpx.HTTPError as exc:
                outcome = f"{type(exc).__name__}"
            with out.lock:
                out.turns.append((time.monotonic(), outcome, time.monotonic() - began))
            if outcome != "ok":
                thread_id = None  # a failed turn may leave its thread busy a while: go on on a new one
                time.sleep(0.5)
    finally:
        client.close()


@pytest.mark.timeout(600)
def test_postgres_restarted_mid_load_fails_runs_cleanly_and_later_runs_succeed(
    stack: tuple[ServeProcess, PrivatePostgres],
) -> None:
    srv, cluster = stack
    out, stop = Outcomes(), threading.Event()
    clients = [
        threading.Thread(target=_client_loop, args=(srv.url, i, out, stop), daemon=True)
        for i in range(CLIENTS)
    ]
    for thread in clients:
        thread.start()
    deadline = time.monotonic() + 120
    while sum(o == "ok" for _, o, _ in out.turns) < 2 * CLIENTS and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.ctl("stop", "-m", "fast")  # every connection of the server is cut
    down_at = time.monotonic()
    asked = httpx.get(f"{srv.url}/health", timeout=30)  # each check has a deadline: the answer comes in seconds
    health_took = time.monotonic() - down_at
    time.sleep(max(0.0, DOWN_SECONDS - health_took))
    cluster.ctl("start")
    up_at = time.monotonic()
    assert asked.status_code == 503 and health_took < 5, (asked.status_code, health_took, asked.text)
    assert any(name.startswith("postgres") and v.startswith("down") for name, v in asked.json()["checks"].items())
    # Later runs must succeed: wait for some turns that started after Postgres was back.
    deadline = up_at + 180
    while time.monotonic() < deadline:
        with out.lock:
            later = [o for t, o, took in out.turns if t - took > up_at + 1.0 and o == "ok"]
        if len(later) >= 2 * CLIENTS:
            break
        time.sleep(0.5)
    stop.set()
    for thread in clients:
        thread.join(timeout=TURN_TIMEOUT + 30)

    failures = [(round(t - down_at, 1), o, round(took, 1)) for t, o, took in out.turns if o != "ok"]
    later_ok = [o for t, o, took in out.turns if t - took > up_at + 1.0 and o == "ok"]
    print(
        f"\nturns {len(out.turns)}: ok before the restart "
        f"{sum(o == 'ok' and t < down_at for t, o, _ in out.turns)}, failed {len(failures)} "
        f"(kinds {sorted({o.split(':')[0] for _, o, _ in failures})}), ok after {len(later_ok)}"
    )
    assert srv.proc is not None and srv.proc.poll() is None, f"the server died\n{srv.log_tail()}"
    assert httpx.get(f"{srv.url}/health", timeout=30).status_code == 200
    assert len(later_ok) >= 2 * CLIENTS, f"later runs did not succeed: {failures[-10:]}\n{srv.log_tail()}"
    assert all(took <= TURN_TIMEOUT for _, _, took in failures), f"a turn hung: {failures}"
    alice = get_sync_client(url=srv.url, timeout=60.0, headers={"Authorization": "Bearer tok-alice"})
    try:
        deadline = time.monotonic() + 90  # a run cut by the restart is given up by the reaper in time
        while True:
            left = [
                (t, r["run_id"], r["status"])
                for t in out.threads
                for r in alice.runs.list(t, limit=100)
                if r["status"] not in FINAL
            ]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(2)
        unreadable = []
        for t in out.threads:
            try:
                alice.threads.get_state(t)
            except httpx.HTTPStatusError as exc:
                unreadable.append((t, exc.response.status_code))
    finally:
        alice.close()
    assert not left, (
        f"runs left pending/running after Postgres came back: {left}\n{srv.log_about(*(r for _, r, _ in left))}"
    )
    assert not unreadable, f"threads whose state cannot be read: {unreadable}"
