"""Per-call overhead of an MCP tool (stdio and streamable HTTP) against the same tool run locally.

Every path is one ``echo(text)`` call through ``ToolRounds.call``, the way the graph's tools node runs a
round (a fresh ``asyncio.run`` per call): a local async handler, a local sync handler (run on a daemon
thread), and the fixture server's ``echo`` over a long-lived stdio session and over streamable HTTP on
loopback. The calls are interleaved, and the table shows the median and p90 per call and the ratio of the
medians against the local async tool. A last row times ``ClientSession.call_tool`` alone on one stdio
session (no executor, no bridge, not interleaved): the MCP round trip the bridge cannot make cheaper.

    python bench/mcp_overhead.py [--calls 300] [--warmup 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from langchain_mcp_adapters.sessions import create_session

from tools.mcp import MCPManager
from tools.mcp_config import parse_mcp_config
from tools.permissions import EVERYTHING
from tools.registry import ToolContext, ToolRegistry, ToolSpec
from tools.rounds import ToolRounds

SERVER = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mcp_server.py"
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
CTX = ToolContext(user_id="bench", grant=EVERYTHING)  # measures the call path, not the refusal
Call = Callable[[str], str]


async def echo_async(text: str) -> str:
    return text


def echo_sync(text: str) -> str:
    return text


def caller(registry: ToolRegistry, name: str) -> Call:
    rounds = ToolRounds(registry)

    def call(text: str) -> str:
        [answer] = rounds.call([{"id": "c", "name": name, "args": {"text": text}}], CTX)
        if answer.status != "success" or answer.content != text:
            raise AssertionError(f"{name}: {answer.content!r}")
        return text

    return call


@contextmanager
def http_server() -> Iterator[str]:
    """The fixture server on a free loopback port; yields its URL once it listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, str(SERVER), "--transport", "streamable-http", "--port", str(port)]
    process = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ)
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the HTTP fixture server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def measure(paths: dict[str, Call], calls: int, warmup: int) -> dict[str, list[float]]:
    for _ in range(warmup):
        for call in paths.values():
            call("warm")
    samples: dict[str, list[float]] = {name: [] for name in paths}
    order = list(paths)
    gc.collect()
    for i in range(calls):
        for name in order if i % 2 == 0 else reversed(order):
            started = time.perf_counter()
            paths[name](f"call {i}")
            samples[name].append((time.perf_counter() - started) * 1000)
    return samples


async def sdk_only(calls: int, warmup: int) -> list[float]:
    """The bare MCP SDK round trip over stdio, timed inside one event loop."""
    connection = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]}
    async with create_session(connection) as session:  # type: ignore[arg-type]
        await session.initialize()
        await session.list_tools()
        for _ in range(warmup):
            await session.call_tool("echo", {"text": "warm"})
        gc.collect()
        samples = []
        for i in range(calls):
            started = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {i}"})
            samples.append((time.perf_counter() - started) * 1000)
        return samples


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per path")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per path first")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    with http_server() as url:
        config = parse_mcp_config(
            {
                "servers": {
                    "stdio": {"transport": "stdio", "command": sys.executable, "args": [str(SERVER)]},
                    "http": {"transport": "streamable_http", "url": url},
                }
            }
        )
        with MCPManager(config, connect_timeout=60) as manager:
            registry = ToolRegistry(
                [
                    ToolSpec.from_schema("local_async", "echo", ECHO_SCHEMA, echo_async),
                    ToolSpec.from_schema("local_sync", "echo", ECHO_SCHEMA, echo_sync),
                ]
            )
            for spec in manager.tool_specs(existing_names=registry.names()):
                registry.register(spec)
            if manager.errors:
                raise SystemExit(f"MCP servers failed: {manager.errors}")
            paths = {
                "local async handler": caller(registry, "local_async"),
                "local sync handler": caller(registry, "local_sync"),
                "MCP stdio": caller(registry, "stdio_echo"),
                "MCP streamable HTTP": caller(registry, "http_echo"),
            }
            samples = measure(paths, args.calls, args.warmup)
    samples["SDK call_tool, stdio"] = asyncio.run(sdk_only(args.calls, args.warmup))

    base = statistics.median(samples["local async handler"])
    stats = {
        name: {"median_ms": statistics.median(v), "p90_ms": p90(v), "min_ms": min(v)}
        for name, v in samples.items()
    }
    print(
        f"MCP call overhead: echo through ToolRounds.call (the graph's ToolNode and policies), {args.calls} calls per path (interleaved), "
        f"python {platform.python_version()}"
    )
    print(f"{'path':<22}{'median ms':>11}{'p90 ms':>9}{'min ms':>9}{'vs local async':>16}{'added ms':>10}")
    for name, s in stats.items():
        s["ratio"] = s["median_ms"] / base
        print(
            f"{name:<22}{s['median_ms']:>11.3f}{s['p90_ms']:>9.3f}{s['min_ms']:>9.3f}"
            f"{s['ratio']:>15.1f}x{s['median_ms'] - base:>10.3f}"
        )
    if args.json:
        report = {
            "benchmark": "mcp_overhead",
            "calls": args.calls,
            "python": platform.python_version(),
            "results": stats,
            "samples_ms": samples,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
