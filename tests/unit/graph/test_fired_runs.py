"""Runs the runtime starts on its own (a cron's firings) count against their owner's runs in flight like the
runs the owner asks for at the edge, and pass the same checks (graph/auth.py, graph/limits.py). The live
probe on both runtimes is tests/integration/test_cron_limits.py."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from langgraph_sdk import Auth

from graph import auth as server_auth
from graph.edge import Edge
from graph.limits import THROUGH_EDGE, CallerLimits, process_limits

QUESTION = {"messages": [{"role": "user", "content": "今天几号"}]}


@dataclass
class User:
    identity: str


@dataclass
class Ctx:
    """What langgraph dev's scheduler hands the handler: the owner's bare id, no token marks."""

    user: User
    permissions: list[str] = field(default_factory=list)
    resource: str = "threads"
    action: str = "create_run"


@pytest.fixture(autouse=True)
def deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(server_auth.TOKENS_ENV, json.dumps({"ta": "alice", "tb": "bob"}))
    monkeypatch.setenv("KB_AGENT_RUNS_PER_USER", "1")
    monkeypatch.setenv("KB_AGENT_RUN_QUEUE_PER_USER", "5")


def fired_run(run_id: str, thread_id: str | None = "t", cron_id: str = "c1") -> dict[str, Any]:
    """A run as langgraph dev's scheduler creates it: the cron's configurable copied into the context."""
    configurable = {"cron_id": cron_id}
    kwargs = {"input": QUESTION, "context": dict(configurable), "config": {"configurable": configurable}}
    return {"run_id": run_id, "thread_id": thread_id, "metadata": {}, "kwargs": kwargs}


class Runtime:
    """The runtime behind the edge: run statuses it is told, /runs/wait held until released, crons that
    answer with their first run (as Aegra does)."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {}
        self.release = asyncio.Event()
        self.asked: list[tuple[str, str]] = []  # (authorization, path) of every request

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        path, headers = scope["path"], dict(scope.get("headers") or [])
        self.asked.append((headers.get(b"authorization", b"").decode(), path))
        status, body = 200, b"{}"
        if scope["method"] == "GET" and "/runs/" in path:
            run = path.rsplit("/", 1)[-1]
            status, body = (200, json.dumps({"status": self.status[run]}).encode()) if run in self.status else (404, b"{}")
        elif path == "/runs/crons/search":
            body = b"[]"
        elif path.endswith("/runs/crons"):
            self.status["first"] = "running"
            body = json.dumps({"run_id": "first", "thread_id": "t"}).encode()
        elif path.endswith("/runs/wait"):
            await self.release.wait()
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def _fire(value: dict[str, Any], owner: str = "alice") -> Any:
    """The handler as the scheduler meets it: outside any request the edge passed on."""
    assert not THROUGH_EDGE.get()
    return server_auth.runs_with_checked_context(Ctx(User(owner)), value)  # type: ignore[arg-type]


def test_a_fired_run_whose_context_the_runtime_filled_from_the_cron_is_let_through() -> None:
    """langgraph dev copies the cron's configurable (its cron_id) into a fired run's context: every firing
    was refused as a 422, so crons never ran there."""

    async def go() -> None:
        runtime = Runtime()
        Edge(runtime)
        value = fired_run("r1")
        assert await _fire(value) == {"owner": "alice"}
        assert value["metadata"]["owner"] == "alice"

    asyncio.run(go())


def test_a_callers_own_run_keeps_the_strict_context_check_and_is_not_counted_twice() -> None:
    async def go() -> None:
        passed = THROUGH_EDGE.set(True)
        try:
            with pytest.raises(Auth.exceptions.HTTPException) as refused:
                await server_auth.runs_with_checked_context(Ctx(User("alice"), [server_auth.TOKEN_MARK]), fired_run("r1"))  # type: ignore[arg-type]
            assert refused.value.status_code == 422 and "cron_id" in str(refused.value.detail)
            own = {"run_id": "r2", "thread_id": "t", "metadata": {}, "kwargs": {"input": QUESTION}}
            await server_auth.runs_with_checked_context(Ctx(User("alice"), [server_auth.TOKEN_MARK]), own)  # type: ignore[arg-type]
        finally:
            THROUGH_EDGE.reset(passed)
        assert process_limits().in_flight("alice") == 0  # the edge counts a caller's runs, once

    asyncio.run(go())


def test_fired_runs_take_a_free_slot_of_their_owner_or_are_skipped() -> None:
    async def go() -> None:
        runtime = Runtime()
        Edge(runtime)  # how the limits ask the runtime about a run
        runtime.status["r1"] = "running"
        await _fire(fired_run("r1"))
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await _fire(fired_run("r2", cron_id="c2"))
        assert refused.value.status_code == 429
        assert "runs_per_user=1" in str(refused.value.detail) and "c2" in str(refused.value.detail)
        runtime.status["b1"] = "running"
        await _fire(fired_run("b1"), owner="bob")  # bob's slots are his own
        assert ("Bearer ta", "/threads/t/runs/r1") in runtime.asked  # asked as the owner, with her token
        runtime.status["r1"] = "success"
        runtime.status["r3"] = "pending"
        await _fire(fired_run("r3"))  # r1 ended: its slot is free
        assert process_limits().in_flight("alice") == 1

    asyncio.run(go())


def test_a_fired_run_of_an_owner_who_holds_no_token_is_refused() -> None:
    async def go() -> None:
        Edge(Runtime())
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await _fire(fired_run("r1"), owner="carol")
        assert refused.value.status_code == 403 and "no token" in str(refused.value.detail)

    asyncio.run(go())


def test_no_firing_starts_while_the_token_table_cannot_be_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv(server_auth.TOKENS_ENV, str(tmp_path / "gone.json"))

    async def go() -> None:
        Edge(Runtime())
        with pytest.raises(Auth.exceptions.HTTPException) as refused:
            await _fire(fired_run("r1"))
        assert refused.value.status_code == 403

    asyncio.run(go())


def test_a_callers_run_waits_while_a_fired_run_holds_the_slot() -> None:
    """The edge and the runtime's own runs share one count per process: a run alice asks for waits for the
    slot her cron's run holds."""

    async def go() -> None:
        runtime = Runtime()
        edge = Edge(runtime)
        runtime.status["r1"] = "running"
        await _fire(fired_run("r1"))
        runtime.release.set()
        transport = httpx.ASGITransport(app=edge)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10) as client:
            asked = asyncio.create_task(
                client.post("/threads/t/runs/wait", json={"assistant_id": "kb_agent"}, headers={"Authorization": "Bearer ta"})
            )
            await asyncio.sleep(0.3)
            assert not asked.done()
            runtime.status["r1"] = "success"
            assert (await asyncio.wait_for(asked, 5)).status_code == 200

    asyncio.run(go())


def test_a_new_cron_waits_for_a_slot_and_its_first_run_holds_one() -> None:
    """Aegra starts a new cron's first run at once, inside the cron's create: that request counts as one
    that creates a run, and the run it answers with counts until it ends."""

    async def go() -> None:
        runtime = Runtime()
        transport = httpx.ASGITransport(app=Edge(runtime))
        headers = {"Authorization": "Bearer ta"}
        body = {"assistant_id": "kb_agent", "schedule": "0 0 1 1 *"}
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10) as client:
            held = asyncio.create_task(client.post("/threads/t/runs/wait", json=body, headers=headers))
            await asyncio.sleep(0.2)
            cron = asyncio.create_task(client.post("/runs/crons", json=body, headers=headers))
            await asyncio.sleep(0.3)
            assert not cron.done()  # alice's one slot is the waiting run's
            runtime.release.set()
            assert (await held).status_code == 200 and (await asyncio.wait_for(cron, 5)).status_code == 200
            after = asyncio.create_task(client.post("/threads/t/runs", json=body, headers=headers))
            await asyncio.sleep(0.3)
            assert not after.done()  # the cron's first run holds the slot
            runtime.status["first"] = "success"
            assert (await asyncio.wait_for(after, 5)).status_code == 200

    asyncio.run(go())


def test_admit_never_waits_and_counts_what_the_runtime_sees() -> None:
    async def go() -> None:
        limits = CallerLimits()
        assert await limits.admit("alice", 2)
        assert not await limits.admit("alice", 2, seen=2)  # two of hers run elsewhere (another replica)
        assert await limits.admit("alice", 2, seen=1)
        assert not await limits.admit("alice", 2)
        limits.release("alice", 2)
        assert limits.in_flight("alice") == 0

    asyncio.run(go())
