"""Every run counts: crons fire on both runtimes, and the runs they fire count against their owner's
``runs_per_user`` like the runs the owner asks for (graph/limits.py, graph/auth.py, cli/aegra_adapter.py).

One server per runtime (``langgraph dev`` and ``kb-agent serve``) with bearer tokens in a file, and a
loopback model endpoint that holds each probe question for a while and counts the requests it is answering
at once: counted where they arrive, so the peak is the number of one user's runs working at once.

The probe: twelve crons of one user firing every second (their schedulers look every second). Before, on
``kb-agent serve`` every firing started, whatever the owner had running; on ``langgraph dev`` no cron ever
fired (every firing was refused by the auth handler).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from graph.auth import FIRED_RUN
from tests.fixtures.in_flight import InFlight
from tests.fixtures.openai_server import OpenAIServer, ScriptedReply
from tests.fixtures.serve import (
    DevServer,
    ServeProcess,
    dev_env,
    private_database,
    private_redis,
    serve_env,
    server_kb_agent,
)

pytestmark = pytest.mark.server

GRAPH_ID = "kb_agent"
API_KEY = "test-key"
EVERY_SECOND = "* * * * * *"  # seconds-first on Aegra, seconds-last on langgraph dev: every second on both
CRONS = 12  # crons of one user (crons_per_user is raised to allow them)
RUNS_PER_USER = 2  # the default
HOLD = 1.5  # seconds the endpoint takes to answer a probe question (a run's working time)
PROBE_RUNS = 16  # fired runs the probe watches
TOKENS = {
    "tok-alice": {"user": "alice", "roles": ["user"]},
    "tok-rita": {"user": "rita", "roles": ["user"]},
}


@dataclass
class Seen:
    question: str
    tools: list[str]


class Endpoint:
    """The model: answers at once, except probe questions, which it holds for ``HOLD`` s, counted."""

    def __init__(self) -> None:
        self.in_flight = InFlight()
        self.lock = threading.Lock()
        self.seen: list[Seen] = []

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        asked = [str(m.get("content") or "") for m in body.get("messages", []) if m.get("role") == "user"]
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        question = next((q for q in reversed(asked) if "PROBE" in q or "RIGHTS" in q), asked[-1] if asked else "")
        with self.lock:
            self.seen.append(Seen(question, tools))
        if "PROBE" in question:
            with self.in_flight.request():
                threading.Event().wait(HOLD)  # the model at work
        return ScriptedReply(content="好的。")

    def asked(self, word: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if word in s.question]


def until(what: Callable[[], bool], seconds: float, why: str) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f} s: {why}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[Endpoint]:
    script = Endpoint()
    with OpenAIServer(script=script, api_key=API_KEY, model="scripted-gpt") as server:
        script.base_url = server.base_url  # type: ignore[attr-defined]
        yield script


def _model_env(endpoint: Endpoint, tokens: Path) -> dict[str, str]:
    return {
        "KB_AGENT_API_TOKENS": str(tokens),
        "KB_AGENT_MODEL": "scripted-gpt",
        "KB_AGENT_BASE_URL": endpoint.base_url,  # type: ignore[attr-defined]
        "KB_AGENT_API_KEY": API_KEY,
        "KB_AGENT_LONG_TERM_MEMORY": "false",  # one model request per turn, none in the background
        "KB_AGENT_REWRITE_QUERY": "false",
        "KB_AGENT_CRONS_PER_USER": str(CRONS),
    }


@dataclass
class Runtime:
    name: str
    url: str
    tokens: Path


@pytest.fixture(scope="module", params=["langgraph dev", "kb-agent serve"])
def runtime(request: pytest.FixtureRequest, endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    tmp = tmp_path_factory.mktemp("crons")
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps(TOKENS), "utf-8")
    if request.param == "langgraph dev":
        env = {**dev_env(tmp / "home"), **_model_env(endpoint, tokens), "CRON_SCHEDULER_SLEEP_TIME": "1"}
        dev = DevServer(env, tmp / "server.log", jobs=10)
        try:
            dev.start()
        except RuntimeError as exc:
            pytest.skip(str(exc))
        try:
            yield Runtime(request.param, dev.url, tokens)
        finally:
            dev.stop()
        return
    exe = server_kb_agent()
    with private_redis(tmp) as redis_url, private_database() as database_url:
        env = {**serve_env(tmp / "home", database_url, redis_url), **_model_env(endpoint, tokens)}
        env.update(CRON_POLL_INTERVAL_SECONDS="1", CRON_ALLOW_SECONDS_SCHEDULE="true")
        serve = ServeProcess(exe, env, tmp / "server.log").start()
        try:
            yield Runtime(request.param, serve.url, tokens)
        finally:
            serve.stop()


@contextlib.contextmanager
def client(runtime: Runtime, token: str) -> Iterator[SyncLangGraphClient]:
    sdk = get_sync_client(url=runtime.url, timeout=60.0, headers={"Authorization": f"Bearer {token}"})
    try:
        yield sdk
    finally:
        sdk.close()


def _question(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_crons_firing_at_once_never_take_their_owner_past_runs_per_user(runtime: Runtime, endpoint: Endpoint) -> None:
    endpoint.in_flight.reset()
    before = len(endpoint.asked("PROBE"))
    with client(runtime, "tok-alice") as alice:
        crons = []
        try:
            for i in range(CRONS):
                alice.crons.create(GRAPH_ID, schedule=EVERY_SECOND, input=_question(f"PROBE {i} 今天几号"))
                crons = [c["cron_id"] for c in alice.crons.search(limit=100)]
            until(lambda: len(endpoint.asked("PROBE")) - before >= PROBE_RUNS, 90, f"{PROBE_RUNS} fired runs")
        finally:
            for cron_id in crons:
                alice.crons.delete(cron_id)
    until(lambda: endpoint.in_flight.now == 0, 60, "the last fired runs to end")
    runs, peak = len(endpoint.asked("PROBE")) - before, endpoint.in_flight.peak
    print(f"\n{runtime.name}: {CRONS} crons of one user firing every second, runs_per_user={RUNS_PER_USER}: "
          f"{runs} runs, at most {peak} at once")  # fmt: skip
    assert peak <= RUNS_PER_USER


def test_a_fired_run_has_only_the_rights_its_owner_holds_when_it_fires(runtime: Runtime, endpoint: Endpoint) -> None:
    """rita's role that grants feedback:write is withdrawn after she made the cron: its later firings run
    with the reader's rights she holds then (the tool needing feedback:write is not offered)."""
    asked_by_her, by_cron = f"RIGHTS-asked-{uuid.uuid4().hex[:8]}", f"RIGHTS-cron-{uuid.uuid4().hex[:8]}"
    with client(runtime, "tok-rita") as rita:
        thread_id = rita.threads.create()["thread_id"]
        rita.runs.wait(thread_id, GRAPH_ID, input=_question(f"{asked_by_her} 今天几号"))
        (asked,) = endpoint.asked(asked_by_her)
        assert "submit_feedback" in asked.tools, asked.tools  # her role grants it
        (run,) = rita.runs.list(thread_id)
        assert FIRED_RUN not in (run.get("metadata") or {})  # her own run, counted at the edge, not as fired
        rita.crons.create_for_thread(thread_id, GRAPH_ID, schedule=EVERY_SECOND, input=_question(f"{by_cron} 今天几号"))
        try:
            until(lambda: len(endpoint.asked(by_cron)) >= 1, 60, "the cron to fire")
            runtime.tokens.write_text(json.dumps({**TOKENS, "tok-rita": {"user": "rita", "roles": ["reader"]}}), "utf-8")
            withdrawn = len(endpoint.asked(by_cron))
            until(lambda: len(endpoint.asked(by_cron)) >= withdrawn + 2, 60, "two firings after the change")
        finally:
            runtime.tokens.write_text(json.dumps(TOKENS), "utf-8")
            for cron in rita.crons.search(limit=100):
                rita.crons.delete(cron["cron_id"])
        if runtime.name == "langgraph dev":  # there the auth handler admits fired runs, and marks them
            assert any(FIRED_RUN in (r.get("metadata") or {}) for r in rita.runs.list(thread_id, limit=100))
    fired = endpoint.asked(by_cron)
    assert "submit_feedback" not in fired[-1].tools, fired[-1].tools
