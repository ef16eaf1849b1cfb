"""graph/limits.py: a caller's request rate and runs in flight, queued beyond, 429 past the queue; and the
edge applying them per caller, so one caller's flood leaves everyone else's requests alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from graph import auth as server_auth
from graph.edge import Edge
from graph.limits import Busy, CallerLimits, created_runs


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_request_rate_refills_over_the_minute() -> None:
    clock = Clock()
    limits = CallerLimits(clock)
    for _ in range(3):
        limits.take_request("alice", 3)
    with pytest.raises(Busy) as busy:
        limits.take_request("alice", 3)
    assert busy.value.retry_after >= 1 and "requests_per_minute" in busy.value.detail
    limits.take_request("bob", 3)  # another caller has a bucket of their own
    clock.now += 20  # a third of a minute: one request back
    limits.take_request("alice", 3)
    with pytest.raises(Busy):
        limits.take_request("alice", 3)


def test_runs_past_the_limit_wait_in_the_queue_and_past_the_queue_are_busy() -> None:
    async def go() -> None:
        limits = CallerLimits()
        await limits.acquire("alice", 1, limit=2, queue=1)
        await limits.acquire("alice", 1, limit=2, queue=1)
        third = asyncio.create_task(limits.acquire("alice", 1, limit=2, queue=1))
        await asyncio.sleep(0.05)
        assert not third.done()
        with pytest.raises(Busy, match="runs_per_user"):
            await limits.acquire("alice", 1, limit=2, queue=1)
        await limits.acquire("bob", 1, limit=2, queue=1)  # bob's slots are his own
        limits.release("alice", 1)
        await asyncio.wait_for(third, 2)
        assert limits.in_flight("alice") == 2
        with pytest.raises(Busy, match="more than the 2"):
            await limits.acquire("carol", 3, limit=2, queue=5)

    asyncio.run(go())


def test_background_runs_hold_their_slot_until_the_runtime_says_they_ended() -> None:
    running = {"r1": True, "r2": True}
    asked: list[str] = []

    def still_running(run: str) -> Any:
        async def alive() -> bool:
            asked.append(run)
            return running[run]

        return alive

    async def go() -> None:
        limits = CallerLimits()
        limits.track("alice", [still_running("r1"), still_running("r2")])
        waiting = asyncio.create_task(limits.acquire("alice", 1, limit=2, queue=1))
        await asyncio.sleep(0.1)
        assert not waiting.done() and set(asked) == {"r1", "r2"}
        running["r1"] = False
        await asyncio.wait_for(waiting, 3)
        assert limits.in_flight("alice") == 2  # r2 and the new one

    asyncio.run(go())


def test_created_runs_reads_one_run_or_a_batch() -> None:
    assert created_runs(b'{"run_id": "r", "thread_id": "t", "status": "pending"}') == [("t", "r")]
    assert created_runs(b'[{"run_id": "a", "thread_id": "t"}, {"run_id": "b", "thread_id": "u"}]') == [
        ("t", "a"),
        ("u", "b"),
    ]
    assert created_runs(b"not json") == [] and created_runs(b'{"detail": "x"}') == []


class Runtime:
    """A server behind the edge: /runs/wait answers when released, background runs end when told."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.status: dict[str, str] = {}
        self.started = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        path = scope["path"]
        if scope["method"] == "GET" and "/runs/" in path:
            body = json.dumps({"status": self.status.get(path.rsplit("/", 1)[-1], "success")}).encode()
        elif path.endswith("/runs/wait"):
            self.started += 1
            await self.release.wait()
            body = b'{"messages": []}'
        elif path.endswith("/runs/stream"):  # the caller hangs up at once; the run goes on
            run_id = f"r{len(self.status)}"
            self.status[run_id] = "running"
            location = f"/threads/t/runs/{run_id}".encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-location", location)]})
            await send({"type": "http.response.body", "body": b"event: metadata\n\n"})
            return
        elif path.endswith("/runs"):
            run_id = f"r{len(self.status)}"
            self.status[run_id] = "running"
            body = json.dumps({"run_id": run_id, "thread_id": "t"}).encode()
        else:
            body = b"{}"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture
def tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps({"ta": "alice", "tb": "bob"}))
    monkeypatch.setenv("KB_AGENT_RUNS_PER_USER", "1")
    monkeypatch.setenv("KB_AGENT_RUN_QUEUE_PER_USER", "1")


def test_one_callers_runs_wait_or_are_refused_while_anothers_go_through(tokens: None) -> None:
    async def go() -> None:
        runtime = Runtime()
        edge = Edge(runtime)
        transport = httpx.ASGITransport(app=edge)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10) as client:

            def post(who: str, path: str) -> Any:
                return client.post(path, json={"assistant_id": "kb_agent"}, headers={"Authorization": f"Bearer {who}"})

            first = asyncio.create_task(post("ta", "/threads/t/runs/wait"))
            await asyncio.sleep(0.1)
            queued = asyncio.create_task(post("ta", "/threads/t/runs/wait"))
            await asyncio.sleep(0.1)
            refused = await post("ta", "/threads/t/runs/wait")
            assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
            assert runtime.started == 1 and not queued.done()
            other = asyncio.create_task(post("tb", "/threads/u/runs/wait"))
            await asyncio.sleep(0.1)
            assert runtime.started == 2  # bob's run started at once
            runtime.release.set()
            assert [r.status_code for r in await asyncio.gather(first, queued, other)] == [200, 200, 200]
            assert runtime.started == 3
            background = await post("ta", "/threads/t/runs")
            assert background.status_code == 200
            waiting = asyncio.create_task(post("ta", "/threads/t/runs"))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # alice's background run is still running
            runtime.status[background.json()["run_id"]] = "success"
            assert (await asyncio.wait_for(waiting, 5)).status_code == 200
            assert (await client.get("/ok")).status_code == 200

    asyncio.run(go())


def test_a_stream_the_caller_dropped_counts_until_its_run_ends(tokens: None) -> None:
    async def go() -> None:
        runtime = Runtime()
        transport = httpx.ASGITransport(app=Edge(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10) as client:
            headers = {"Authorization": "Bearer ta"}
            dropped = await client.post("/threads/t/runs/stream", json={"assistant_id": "kb_agent"}, headers=headers)
            assert dropped.status_code == 200  # the response is over, the run is not
            [run_id] = list(runtime.status)
            waiting = asyncio.create_task(client.post("/threads/t/runs", json={"assistant_id": "kb_agent"}, headers=headers))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # the slot is still the dropped stream's
            runtime.status[run_id] = "success"
            assert (await asyncio.wait_for(waiting, 5)).status_code == 200

    asyncio.run(go())


def test_looks_at_background_runs_may_overlap_with_new_ones() -> None:
    """Runs tracked or dropped while a look waits for the runtime's answers are neither lost nor
    mismatched (the look used to zip its answers against a list that had changed)."""
    gate = asyncio.Event()

    def slow(run: str) -> Any:
        async def alive() -> bool:
            await gate.wait()
            return run != "r1"

        alive.run = run  # type: ignore[attr-defined]
        return alive

    async def go() -> None:
        limits = CallerLimits()
        limits.track("alice", [slow("r1"), slow("r2")])
        looks = [asyncio.create_task(limits._look(limits._caller("alice"), force=True)) for _ in range(3)]
        await asyncio.sleep(0.05)
        limits.track("alice", [slow("r3")])
        gate.set()
        await asyncio.gather(*looks)
        assert [alive.run for alive in limits._caller("alice").background] == ["r2", "r3"]  # type: ignore[attr-defined]

    asyncio.run(go())
