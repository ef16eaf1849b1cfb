"""Per-round overhead of our graph vs LangGraph's prebuilt ReAct agent, with a zero-latency scripted model.

Both agents get the same scripted callable (N ``calculator`` calls, then an answer) and the same tool
(``tools.calculator.evaluate``), are timed in the same process with the runs interleaved, and report the
median and p90 per-round time (invoke time / (N + 1)) and the ratio ours/peer of the medians.

    python bench/loop_overhead.py [--rounds 5] [--repeat 30] [--checkpointer memory] [--clock cpu] [--async] [--json out.json]

``--clock cpu`` times each invoke with the process's CPU time (all its threads) instead of wall time: on a
machine shared with other jobs the wall clock mostly measures the scheduler, the CPU clock the work.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph
from models.scripted import ScriptedChatModel, tool_call
from tools.builtin import CALCULATOR, builtin_registry
from tools.calculator import evaluate

TARGET_RATIO = 1.3
Invoke = Callable[[], dict[str, Any]]


def make_script(rounds: int) -> Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage]:
    """Ask for ``calculator`` until ``rounds`` tool results follow the last question, then answer.

    A user message right after tool results is not a question: kb-agent sends its budget note that way.
    """

    def script(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        since_human = 0
        for i in range(len(messages) - 1, -1, -1):
            message = messages[i]
            if isinstance(message, HumanMessage) and not (i and isinstance(messages[i - 1], ToolMessage)):
                break
            since_human += isinstance(message, ToolMessage)
        if since_human < rounds:
            return AIMessage(
                content="", tool_calls=[tool_call("calculator", {"expression": f"{since_human} * 3"})]
            )
        return AIMessage(content=f"done after {since_human} calculations")

    return script


@tool("calculator", description=CALCULATOR.description)
def calc_tool(expression: str) -> str:
    """Evaluate an arithmetic expression exactly."""
    return evaluate(expression)


def make_peer(model: ScriptedChatModel, checkpointer: InMemorySaver | None) -> tuple[Any, str]:
    try:
        from langchain.agents import create_agent
    except ImportError:
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, tools=[calc_tool], checkpointer=checkpointer), "create_react_agent"
    return create_agent(model, tools=[calc_tool], checkpointer=checkpointer), "langchain create_agent"


def invoker(graph: Any, with_checkpointer: bool, loop: asyncio.AbstractEventLoop | None = None) -> Invoke:
    """One invoke of ``graph``: ``graph.invoke``, or ``graph.ainvoke`` on ``loop`` (the server's path)."""

    def run() -> dict[str, Any]:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}} if with_checkpointer else None
        if loop is not None:
            return loop.run_until_complete(graph.ainvoke({"messages": [HumanMessage("go")]}, config=config))
        return graph.invoke({"messages": [HumanMessage("go")]}, config=config)

    return run


def check(result: dict[str, Any], rounds: int, who: str) -> None:
    """The run did what the script asked: N successful calculator results, then a final text answer."""
    messages = result["messages"]
    tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and final.content, f"{who}: no final answer"
    assert len(tool_messages) == rounds, f"{who}: {len(tool_messages)} tool messages, expected {rounds}"
    expected = [str(k * 3) for k in range(rounds)]
    got = [m.content for m in tool_messages]
    assert got == expected, f"{who}: tool results {got}, expected {expected}"
    assert all(m.status == "success" for m in tool_messages), f"{who}: a tool call failed"


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


def summarize(samples: list[float], rounds: int) -> dict[str, float]:
    per_round = [s * 1000 / (rounds + 1) for s in samples]
    return {
        "median_ms": statistics.median(per_round),
        "p90_ms": p90(per_round),
        "min_ms": min(per_round),
        "invoke_median_ms": statistics.median(s * 1000 for s in samples),
    }


def measure(
    runs: dict[str, Invoke], rounds: int, repeat: int, warmup: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    for _ in range(warmup):
        for name, run in runs.items():
            check(run(), rounds, name)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    order = list(runs)
    gc.collect()
    for i in range(repeat):
        # Alternate who goes first, so drift and noise are shared evenly.
        for name in order if i % 2 == 0 else reversed(order):
            started = clock()
            result = runs[name]()
            samples[name].append(clock() - started)
            check(result, rounds, name)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="tool rounds per invoke (N); +1 final round")
    parser.add_argument("--repeat", type=int, default=30, help="timed invokes per agent")
    parser.add_argument("--warmup", type=int, default=3, help="untimed invokes per agent first")
    parser.add_argument("--checkpointer", choices=["none", "memory"], default="none")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="what each invoke is timed by")
    parser.add_argument("--async", dest="use_async", action="store_true", help="time graph.ainvoke (as a server runs it)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 9:
        parser.error("--rounds must be 1..9 (our default budget allows 10 model rounds per turn)")

    script = make_script(args.rounds)
    memory = args.checkpointer == "memory"
    ours = build_graph(
        InMemorySaver() if memory else None, model=ScriptedChatModel(script), registry=builtin_registry()
    )
    peer, peer_name = make_peer(ScriptedChatModel(script), InMemorySaver() if memory else None)
    loop = asyncio.new_event_loop() if args.use_async else None
    runs = {"kb-agent": invoker(ours, memory, loop), peer_name: invoker(peer, memory, loop)}

    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    samples = measure(runs, args.rounds, args.repeat, args.warmup, clock)
    stats = {name: summarize(values, args.rounds) for name, values in samples.items()}
    ratio = stats["kb-agent"]["median_ms"] / stats[peer_name]["median_ms"]

    print(
        f"loop overhead: {args.rounds} tool rounds + 1 final per invoke, {args.repeat} invokes each, "
        f"checkpointer={args.checkpointer}, clock={args.clock}, {'ainvoke' if args.use_async else 'invoke'}, "
        f"python {platform.python_version()}"
    )
    print(f"{'agent':<24}{'median ms/round':>16}{'p90 ms/round':>14}{'min ms/round':>14}{'ms/invoke':>11}")
    for name, s in stats.items():
        print(
            f"{name:<24}{s['median_ms']:>16.3f}{s['p90_ms']:>14.3f}{s['min_ms']:>14.3f}{s['invoke_median_ms']:>11.2f}"
        )
    verdict = "OK" if ratio <= TARGET_RATIO else "ABOVE TARGET"
    print(f"ratio ours/peer (medians): {ratio:.2f}x  (target <= {TARGET_RATIO}x: {verdict})")

    if args.json:
        report = {
            "benchmark": "loop_overhead",
            "rounds": args.rounds,
            "repeat": args.repeat,
            "checkpointer": args.checkpointer,
            "clock": args.clock,
            "peer": peer_name,
            "python": platform.python_version(),
            "results": stats,
            "samples_s": samples,
            "ratio": ratio,
            "target": TARGET_RATIO,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
