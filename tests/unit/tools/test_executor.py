"""The executor: concurrent but bounded, every failure an error outcome the model can read, results in
call order, and exactly one start and one end event per call.

No test depends on how fast the machine is: ordering is forced with events, the concurrency peak with a
rendezvous, and the only wall-clock asserts are generous upper bounds (a 30 s hang must be abandoned).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fixtures.tool_rounds import Call, Calls, Outcome
from tools.policies import MAX_OUTPUT_CHARS, ToolStep
from tools.registry import ToolContext, ToolError, ToolRegistry, ToolSpec

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
CTX = ToolContext(user_id="u1", thread_id="t1", timezone="UTC")
HANG = 30.0  # seconds a "hung" handler would block for if it were not abandoned
QUICK = 10.0  # generous bound on a run whose hung calls time out after a fraction of a second


def spec(
    name: str, handler: Callable[..., Any], parameters: dict[str, Any] | None = None, **kw: Any
) -> ToolSpec:
    return ToolSpec.from_schema(
        name=name, description=f"{name} tool", parameters=parameters or OBJ, handler=handler, **kw
    )


def call(call_id: str, name: str, args: Any = None, error: str | None = None) -> Call:
    return Call(call_id, name, {} if args is None else args, error)


def echo(text: str) -> str:
    return text


ECHO = spec(
    "echo", echo, {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at teardown, so sync handlers that 'hang' on it do not outlive the test by 30 s."""
    event = threading.Event()
    yield event
    event.set()


class Peak:
    """Thread-safe count of handlers running at once, with a rendezvous so the peak does not depend on timing.

    Each handler waits (up to a few seconds) until ``target`` handlers are inside at the same time. If the cap
    lets more in, the peak exceeds the target; if it lets fewer in, the wait times out and the peak stays low.
    """

    def __init__(self, target: int) -> None:
        self.target = target
        self.running = 0
        self.peak = 0
        self.cond = threading.Condition()

    def enter(self) -> None:
        with self.cond:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.running >= self.target, timeout=3.0)

    def leave(self) -> None:
        with self.cond:
            self.running -= 1
            self.cond.notify_all()

    def handler(self, i: int) -> int:
        self.enter()
        try:
            time.sleep(0.01)
            return i
        finally:
            self.leave()


INDEXED = {"type": "object", "properties": {"i": {"type": "integer"}}, "required": ["i"]}


# --- ordering and concurrency ------------------------------------------------------------------------


def test_results_come_back_in_call_order_even_when_later_calls_finish_first() -> None:
    finished: list[str] = []
    lock = threading.Lock()
    done = {name: threading.Event() for name in ("a", "b", "c")}

    def step(name: str, after: str = "") -> str:
        if after:
            assert done[after].wait(5.0), f"{after} never finished"
        time.sleep({"a": 0.05, "b": 0.02, "c": 0.0}[name])
        with lock:
            finished.append(name)
        done[name].set()
        return f"result-{name}"

    params = {"type": "object", "properties": {"name": {"type": "string"}, "after": {"type": "string"}}}
    registry = ToolRegistry([spec("step", step, params)])
    calls = [
        call("1", "step", {"name": "a", "after": "b"}),
        call("2", "step", {"name": "b", "after": "c"}),
        call("3", "step", {"name": "c"}),
    ]
    outcomes = Calls(registry).run(calls, CTX)
    assert finished == ["c", "b", "a"]  # the last call really did finish first
    assert [o.call_id for o in outcomes] == ["1", "2", "3"]
    assert [o.content for o in outcomes] == ["result-a", "result-b", "result-c"]
    assert all(o.status == "success" for o in outcomes)


def test_results_stay_in_call_order_for_async_handlers_finishing_in_reverse() -> None:
    async def nap(seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    params = {"type": "object", "properties": {"seconds": {"type": "number"}}}
    registry = ToolRegistry([spec("nap", nap, params)])
    delays = [0.15, 0.1, 0.05, 0.0]
    outcomes = Calls(registry).run(
        [call(str(i), "nap", {"seconds": d}) for i, d in enumerate(delays)], CTX
    )
    assert [o.call_id for o in outcomes] == ["0", "1", "2", "3"]
    assert [json.loads(o.content) for o in outcomes] == delays


def test_concurrency_cap_of_two_is_never_exceeded_and_is_reached() -> None:
    peak = Peak(target=2)
    registry = ToolRegistry([spec("work", peak.handler, INDEXED)])
    outcomes = Calls(registry, concurrency=2).run(
        [call(str(i), "work", {"i": i}) for i in range(6)], CTX
    )
    assert [o.content for o in outcomes] == [str(i) for i in range(6)]
    assert peak.peak == 2


def test_default_cap_is_four_and_calls_do_run_concurrently() -> None:
    peak = Peak(target=4)
    registry = ToolRegistry([spec("work", peak.handler, INDEXED)])
    executor = Calls(registry)
    assert executor.concurrency == 4
    outcomes = executor.run([call(str(i), "work", {"i": i}) for i in range(8)], CTX)
    assert all(o.status == "success" for o in outcomes)
    assert 1 < peak.peak <= 4


def test_concurrency_cap_applies_to_async_handlers() -> None:
    running = 0
    peak = 0

    async def work(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1
        return i

    registry = ToolRegistry([spec("work", work, INDEXED)])
    outcomes = Calls(registry, concurrency=3).run(
        [call(str(i), "work", {"i": i}) for i in range(9)], CTX
    )
    assert [o.content for o in outcomes] == [str(i) for i in range(9)]
    assert peak == 3


def test_concurrency_one_runs_calls_one_at_a_time() -> None:
    peak = Peak(target=1)
    registry = ToolRegistry([spec("work", peak.handler, INDEXED)])
    Calls(registry, concurrency=1).run([call(str(i), "work", {"i": i}) for i in range(4)], CTX)
    assert peak.peak == 1


@pytest.mark.parametrize("bad", [0, -1])
def test_concurrency_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="concurrency must be at least 1"):
        ToolStep(ToolContext(), concurrency=bad)


def test_no_calls_gives_no_outcomes() -> None:
    assert Calls(ToolRegistry()).run([], CTX) == []


# --- timeouts ----------------------------------------------------------------------------------------------


def test_a_hung_sync_handler_is_abandoned_at_its_timeout_and_the_others_still_succeed(
    release: threading.Event,
) -> None:
    def hang() -> str:
        release.wait(HANG)
        return "too late"

    registry = ToolRegistry([spec("hang", hang), ECHO])
    calls = [call("1", "echo", {"text": "before"}), call("2", "hang"), call("3", "echo", {"text": "after"})]
    started = time.monotonic()
    outcomes = Calls(registry, timeout=0.3).run(calls, CTX)
    elapsed = time.monotonic() - started
    assert elapsed < QUICK
    assert [o.status for o in outcomes] == ["success", "error", "success"]
    assert [outcomes[0].content, outcomes[2].content] == ["before", "after"]
    assert outcomes[1].call_id == "2"
    assert "timed out after 0.3 s" in outcomes[1].content
    assert outcomes[1].content.startswith("Error: tool 'hang' timed out")


def test_a_hung_async_handler_times_out_and_the_others_still_succeed() -> None:
    """Under ``invoke`` the hung coroutine is left on its daemon worker's loop; ``ainvoke`` cancels it (below)."""
    cancelled = threading.Event()

    async def hang() -> str:
        try:
            await asyncio.sleep(HANG)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    registry = ToolRegistry([spec("hang", hang), ECHO])
    calls = [call("1", "hang"), call("2", "echo", {"text": "fine"})]
    started = time.monotonic()
    outcomes = Calls(registry, timeout=0.3).run(calls, CTX)
    assert time.monotonic() - started < QUICK
    assert [o.status for o in outcomes] == ["error", "success"]
    assert "timed out after 0.3 s" in outcomes[0].content
    assert outcomes[1].content == "fine"


def test_a_hung_handler_frees_its_slot_for_the_remaining_calls(release: threading.Event) -> None:
    def hang() -> str:
        release.wait(HANG)
        return "too late"

    registry = ToolRegistry([spec("hang", hang), ECHO])
    calls = [call("1", "hang"), *(call(str(i), "echo", {"text": str(i)}) for i in range(2, 6))]
    started = time.monotonic()
    outcomes = Calls(registry, concurrency=1, timeout=0.3).run(calls, CTX)
    assert time.monotonic() - started < QUICK
    assert outcomes[0].status == "error"
    assert [o.content for o in outcomes[1:]] == ["2", "3", "4", "5"]


def test_per_spec_timeout_overrides_a_longer_executor_default(release: threading.Event) -> None:
    def hang() -> str:
        release.wait(HANG)
        return "too late"

    registry = ToolRegistry([spec("hang", hang, timeout=0.2)])
    started = time.monotonic()
    [outcome] = Calls(registry, timeout=HANG * 2).run([call("1", "hang")], CTX)
    assert time.monotonic() - started < QUICK
    assert outcome.status == "error"
    assert "timed out after 0.2 s" in outcome.content


def test_per_spec_timeout_overrides_a_shorter_executor_default() -> None:
    def slow() -> str:
        time.sleep(0.3)  # far longer than the executor default below, far shorter than the spec's own
        return "finished"

    registry = ToolRegistry([spec("slow", slow, timeout=HANG), spec("slow_default", slow)])
    outcomes = Calls(registry, timeout=0.05).run([call("1", "slow"), call("2", "slow_default")], CTX)
    assert (outcomes[0].status, outcomes[0].content) == ("success", "finished")
    assert outcomes[1].status == "error"
    assert "timed out after 0.05 s" in outcomes[1].content


def test_abandoned_thread_finishing_after_the_run_does_not_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon thread settles into a loop that asyncio.run has already closed; that must stay silent."""
    from tools import workers

    monkeypatch.setattr(workers, "_workers", workers.DaemonWorkers(idle_seconds=0.2))  # idle threads leave soon
    finished = threading.Event()
    let_go = threading.Event()
    ran_on: list[threading.Thread] = []
    errors: list[BaseException] = []
    old_hook = threading.excepthook
    threading.excepthook = lambda args: errors.append(args.exc_value)  # type: ignore[assignment]
    try:

        def late() -> str:
            ran_on.append(threading.current_thread())
            let_go.wait(HANG)
            finished.set()
            return "late"

        registry = ToolRegistry([spec("late", late)])
        [outcome] = Calls(registry, timeout=0.1).run([call("1", "late")], CTX)
        assert outcome.status == "error"
        let_go.set()
        assert finished.wait(5.0)
        ran_on[0].join(5.0)  # past call_soon_threadsafe on the closed loop, then idle, then gone
        assert not ran_on[0].is_alive()
    finally:
        let_go.set()
        threading.excepthook = old_hook
    assert errors == []


# --- failures become messages ------------------------------------------------------------------------------


def test_a_handler_raising_gives_an_error_in_plain_words_and_the_others_run(caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> str:
        raise RuntimeError("disk on fire")

    async def aboom() -> str:
        raise KeyError("missing-key")

    registry = ToolRegistry([spec("boom", boom), spec("aboom", aboom), ECHO])
    calls = [call("1", "boom"), call("2", "echo", {"text": "ok"}), call("3", "aboom")]
    with caplog.at_level(logging.ERROR):
        outcomes = Calls(registry).run(calls, CTX)
    assert [o.status for o in outcomes] == ["error", "success", "error"]
    assert outcomes[0].content == "Error: tool 'boom' failed: disk on fire"
    assert outcomes[0].error == "tool 'boom' failed: disk on fire"
    assert outcomes[1].content == "ok"
    assert outcomes[2].error == "tool 'aboom' failed: 'missing-key'"
    assert not any(word in o.content for o in outcomes for word in ("RuntimeError", "KeyError", "Traceback"))
    assert "RuntimeError: disk on fire" in caplog.text  # the operator's log keeps the exception


def test_a_storage_failure_and_an_empty_exception_are_said_in_plain_words() -> None:
    def full() -> str:
        raise OSError(28, "No space left on device")

    class Opaque(Exception):
        pass

    def opaque() -> str:
        raise Opaque()

    registry = ToolRegistry([spec("full", full), spec("opaque", opaque)])
    outcomes = Calls(registry).run([call("1", "full"), call("2", "opaque")], CTX)
    assert outcomes[0].error == "tool 'full' could not read or write its storage: No space left on device"
    assert outcomes[1].error == "tool 'opaque' failed: an unexpected error"


def test_a_value_error_is_reported_as_rejected_input() -> None:
    def picky(text: str) -> str:
        raise ValueError(f"cannot parse {text!r}")

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    registry = ToolRegistry([spec("picky", picky, params)])
    [outcome] = Calls(registry).run([call("1", "picky", {"text": "zz"})], CTX)
    assert outcome.status == "error"
    assert outcome.content == "Error: tool 'picky' rejected the input: cannot parse 'zz'"


def test_a_tool_error_message_is_passed_through_verbatim() -> None:
    def refuse() -> str:
        raise ToolError("the index is empty; ingest documents first")

    [outcome] = Calls(ToolRegistry([spec("refuse", refuse)])).run([call("1", "refuse")], CTX)
    assert outcome.content == "Error: the index is empty; ingest documents first"


def test_malformed_json_arguments_are_refused_without_calling_the_handler() -> None:
    called: list[Any] = []

    def handler(**kwargs: Any) -> str:
        called.append(kwargs)
        return "ran"

    registry = ToolRegistry([spec("lookup", handler)])
    bad = call("1", "lookup", '{"q": "unterminated', error="Expecting ',' delimiter: line 1 column 20")
    outcomes = Calls(registry).run([bad, call("2", "lookup")], CTX)
    assert outcomes[0].status == "error"
    assert outcomes[0].call_id == "1"
    assert "were not valid JSON (Expecting ',' delimiter" in outcomes[0].content
    assert "send a JSON object that matches the tool's parameters" in outcomes[0].content
    assert outcomes[1].status == "success"
    assert called == [{}]  # only the well-formed second call ran


def test_malformed_json_for_an_unknown_tool_still_reports_the_json_problem() -> None:
    [outcome] = Calls(ToolRegistry()).run([call("1", "ghost", "{", error="bad")], CTX)
    assert outcome.status == "error"
    assert "not valid JSON" in outcome.content


def test_an_unknown_tool_gives_an_error_listing_the_tools_and_the_others_run() -> None:
    registry = ToolRegistry([ECHO])
    calls = [call("1", "delete_everything", {}), call("2", "echo", {"text": "still here"})]
    outcomes = Calls(registry).run(calls, CTX)
    assert outcomes[0].status == "error"
    assert outcomes[0].name == "delete_everything"
    assert "unknown tool 'delete_everything'; available tools: echo" in outcomes[0].content
    assert (outcomes[1].status, outcomes[1].content) == ("success", "still here")


# --- rendering ------------------------------------------------------------------------------------------------


def test_huge_output_is_truncated_with_a_note() -> None:
    size = MAX_OUTPUT_CHARS + 12_345
    registry = ToolRegistry([spec("big", lambda: "x" * size)])
    [outcome] = Calls(registry).run([call("1", "big")], CTX)
    assert outcome.status == "success"
    assert outcome.content.startswith("x" * MAX_OUTPUT_CHARS + "\n…[truncated: 12345 more characters]")
    assert len(outcome.content) < MAX_OUTPUT_CHARS + 100


def rendered(value: Any) -> str:
    """What the model reads for a tool that returned ``value``."""
    [outcome] = Calls(ToolRegistry([spec("value", lambda: value)])).run([call("1", "value")], CTX)
    assert outcome.status == "success"
    return outcome.content


def test_output_at_the_limit_is_not_truncated() -> None:
    assert rendered("y" * MAX_OUTPUT_CHARS) == "y" * MAX_OUTPUT_CHARS


def test_dict_results_are_json_with_non_ascii_kept() -> None:
    result = {"城市": "上海", "temp": 21.5, "tags": ["晴", "☀"], "ok": True, "none": None}
    registry = ToolRegistry([spec("weather", lambda: result)])
    [outcome] = Calls(registry).run([call("1", "weather")], CTX)
    assert outcome.status == "success"
    assert "上海" in outcome.content and "\\u" not in outcome.content
    assert json.loads(outcome.content) == result


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        (42, "42"),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ([1, "二"], '[1, "二"]'),
        ((1, 2), "[1, 2]"),
    ],
)
def test_results_reach_the_model_as_json_text(value: Any, expected: str) -> None:
    assert rendered(value) == expected


def test_other_objects_are_rendered_with_str() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert rendered(Thing()) == "a thing"


# --- events ----------------------------------------------------------------------------------------------------


def test_each_call_emits_exactly_one_executing_then_one_done_or_error_event(release: threading.Event) -> None:
    events: list[dict[str, Any]] = []
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        with lock:
            events.append(event)

    def boom() -> str:
        raise RuntimeError("x")

    def hang() -> str:
        release.wait(HANG)
        return "late"

    registry = ToolRegistry([ECHO, spec("boom", boom), spec("hang", hang)])
    calls = [
        call("c-ok", "echo", {"text": "hi"}),
        call("c-boom", "boom"),
        call("c-bad-args", "echo", {"txt": 1}),
        call("c-json", "echo", "{", error="bad json"),
        call("c-unknown", "nope"),
        call("c-hang", "hang"),
    ]
    outcomes = Calls(registry, timeout=0.3).run(calls, CTX, emit=emit)
    by_status = {o.call_id: o.status for o in outcomes}
    assert by_status == {
        "c-ok": "success",
        "c-boom": "error",
        "c-bad-args": "error",
        "c-json": "error",
        "c-unknown": "error",
        "c-hang": "error",
    }
    assert len(events) == 2 * len(calls)
    for c, outcome in zip(calls, outcomes, strict=True):
        mine = [e for e in events if e["call_id"] == c.id]
        assert [e["status"] for e in mine] == [
            "executing",
            "done" if outcome.status == "success" else "error",
        ]
        for e in mine:
            assert e["type"] == "tool_call"
            assert e["tool"] == c.name
        start, end = mine
        assert start["args"] == (c.args if isinstance(c.args, dict) else None)
        assert end["duration_ms"] >= 0
        if outcome.status == "error":
            assert end["error"] == outcome.error
        else:
            assert "error" not in end


def test_executing_is_emitted_only_when_the_call_gets_a_slot() -> None:
    """With a cap of one, a call's 'executing' event comes after the previous call's end event."""
    events: list[tuple[str, str]] = []
    registry = ToolRegistry([ECHO])
    calls = [call(str(i), "echo", {"text": str(i)}) for i in range(3)]
    Calls(registry, concurrency=1).run(
        calls, CTX, emit=lambda e: events.append((e["call_id"], e["status"]))
    )
    assert events == [
        ("0", "executing"),
        ("0", "done"),
        ("1", "executing"),
        ("1", "done"),
        ("2", "executing"),
        ("2", "done"),
    ]


def test_calls_are_logged_with_status_and_ids(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="kb_agent.tools")
    Calls(ToolRegistry([ECHO])).run([call("c-42", "echo", {"text": "x"})], CTX)
    [record] = [r for r in caplog.records if r.name == "kb_agent.tools"]
    message = record.getMessage()
    assert "tool=echo" in message and "call_id=c-42" in message and "status=success" in message
    assert "user=u1" in message and "thread=t1" in message


# --- sync / async entry points ------------------------------------------------------------------------------


def test_arun_works_under_asyncio_run() -> None:
    async def twice(text: str) -> str:
        await asyncio.sleep(0)
        return text * 2

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    registry = ToolRegistry([spec("twice", twice, params), ECHO])
    outcomes = asyncio.run(
        Calls(registry).arun(
            [call("1", "twice", {"text": "ab"}), call("2", "echo", {"text": "s"})], CTX
        )
    )
    assert [(o.call_id, o.status, o.content) for o in outcomes] == [
        ("1", "success", "abab"),
        ("2", "success", "s"),
    ]
    assert all(isinstance(o, Outcome) for o in outcomes)


def test_arun_handles_a_hung_sync_handler_without_blocking_the_loop(release: threading.Event) -> None:
    def hang() -> str:
        release.wait(HANG)
        return "late"

    async def main() -> tuple[list[Outcome], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        outcomes = await Calls(ToolRegistry([spec("hang", hang)]), timeout=0.3).arun(
            [call("1", "hang")], CTX
        )
        task.cancel()
        return outcomes, ticks

    started = time.monotonic()
    [outcome], ticks = asyncio.run(main())
    assert time.monotonic() - started < QUICK
    assert outcome.status == "error" and "timed out" in outcome.content
    assert ticks > 0  # the event loop kept running while the handler hung on its thread


def test_run_works_when_called_from_inside_a_running_event_loop() -> None:
    seen_threads: list[str] = []

    async def aecho(text: str) -> str:
        seen_threads.append(threading.current_thread().name)
        return text

    params = {"type": "object", "properties": {"text": {"type": "string"}}}
    registry = ToolRegistry([spec("aecho", aecho, params), ECHO])

    async def main() -> list[Outcome]:
        # A plain synchronous call from inside a coroutine, as a notebook or sync graph node would do.
        return Calls(registry).run(
            [call("1", "aecho", {"text": "a"}), call("2", "echo", {"text": "b"})], CTX
        )

    outcomes = asyncio.run(main())
    assert [(o.status, o.content) for o in outcomes] == [("success", "a"), ("success", "b")]
    assert seen_threads and seen_threads[0] != threading.main_thread().name  # ran on the helper loop's thread


def test_run_propagates_context_variables_to_sync_handlers() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")

    def read() -> str:
        return request_id.get()

    registry = ToolRegistry([spec("read", read)])
    token = request_id.set("req-7")
    try:
        [outcome] = Calls(registry).run([call("1", "read")], CTX)
    finally:
        request_id.reset(token)
    assert outcome.content == "req-7"


# --- ToolContext injection ------------------------------------------------------------------------------------


def test_tool_context_is_injected_only_into_handlers_that_declare_it() -> None:
    received: dict[str, Any] = {}

    def wants(q: str, tool_context: ToolContext) -> str:
        received["wants"] = tool_context
        return tool_context.user_id

    async def awants(tool_context: ToolContext) -> str:
        received["awants"] = tool_context
        return tool_context.thread_id or ""

    def plain(q: str) -> str:  # would fail with TypeError if tool_context were passed
        return q

    def loose(**kwargs: Any) -> str:
        received["loose"] = kwargs
        return "loose"

    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    registry = ToolRegistry(
        [
            spec("wants", wants, params),
            spec("awants", awants),
            spec("plain", plain, params),
            spec("loose", loose),
        ]
    )
    calls = [
        call("1", "wants", {"q": "x"}),
        call("2", "awants"),
        call("3", "plain", {"q": "y"}),
        call("4", "loose"),
    ]
    outcomes = Calls(registry).run(calls, CTX)
    assert [(o.status, o.content) for o in outcomes] == [
        ("success", "u1"),
        ("success", "t1"),
        ("success", "y"),
        ("success", "loose"),
    ]
    assert received["wants"] is CTX
    assert received["awants"] is CTX
    assert received["loose"] == {}


# --- handlers that are async without looking it ----------------------------------------------------------------------------------------------------


def test_a_callable_object_with_async_call_is_awaited() -> None:
    # Regression: is_async once missed an async __call__, and the model got '<coroutine object ...>'.
    class AsyncTool:
        async def __call__(self) -> str:
            await asyncio.sleep(0)
            return "awaited"

    tool_spec = spec("atool", AsyncTool())
    [outcome] = Calls(ToolRegistry([tool_spec])).run([call("1", "atool")], CTX)
    assert (outcome.status, outcome.content) == ("success", "awaited")


def test_module_exposes_the_output_limit() -> None:
    assert MAX_OUTPUT_CHARS == 20_000
