"""The MCP bridge: the tools of configured MCP servers as ToolSpecs, over one long-lived session per server.

Sessions live on a private event loop in a daemon thread that the :class:`MCPManager` owns. Callers come
from many loops (the sync ``graph.invoke`` path runs each tool round in a fresh ``asyncio.run``), while an
MCP session is bound to the loop, and through anyio to the task, that opened it. Handlers therefore hand
each call to that loop, so one process per stdio server serves every call from any loop or thread.

A server that dies is noticed by the call that hits it: that call fails and says so, and the next call
starts a new session (a new process for stdio). A server that cannot start, or does not list its tools
within ``connect_timeout``, is recorded in ``errors``; the other servers' tools load anyway.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, TypeVar

import anyio
import httpx
from langchain_mcp_adapters.sessions import create_session
from mcp import ClientSession, McpError
from mcp.types import (
    CONNECTION_CLOSED,
    PaginatedRequestParams,
)
from mcp.types import Tool as MCPTool

from tools.mcp_config import MCPServerConfig, load_mcp_config
from tools.mcp_translate import (
    StartFailure,
    assign_tool_names,
    describe_error,
    failure_line,
    object_schema,
    result_text,
)
from tools.registry import ToolError, ToolRegistry, ToolSpec

log = logging.getLogger("kb_agent.tools.mcp")

T = TypeVar("T")
_MAX_PAGES = 100
_CLOSE_GRACE = 5.0  # seconds for sessions to shut down (stdio: the SDK waits 2 s, then terminates)


class MCPUnavailableError(ToolError):
    """The server could not be reached for this call; the next call tries a new session."""


class MCPToolError(ToolError):
    """The server ran the tool and reported a failure (``isError``), or refused the request."""


@dataclass(eq=False)
class _Link:
    """One session with one server: the task that owns it, and the event that tells it to stop."""

    config: MCPServerConfig
    ready: asyncio.Future[list[MCPTool]]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    owner: asyncio.Task[None] | None = None
    session: ClientSession | None = None
    failure: str | None = None


class MCPManager:
    """Sessions with the configured MCP servers, and the ToolSpecs that call through them.

    Use as a context manager or call :meth:`close`; an atexit hook closes it otherwise, so no server
    process outlives the application.
    """

    def __init__(self, servers: Mapping[str, MCPServerConfig], *, connect_timeout: float = 20.0) -> None:
        if connect_timeout <= 0:
            raise ValueError("connect_timeout must be positive")
        self.servers: dict[str, MCPServerConfig] = dict(servers)
        self.connect_timeout = connect_timeout
        self.errors: dict[str, str] = {}  # server → why its tools are missing
        self.skipped: dict[str, str] = {}  # "server/tool" → why that one tool was left out
        self._links: dict[str, _Link] = {}
        self._closed = False
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="kb-agent-mcp", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran: its sessions are gone, a new manager is needed."""
        return self._closed

    @classmethod
    def from_config(cls, path: str | PathLike[str], *, connect_timeout: float = 20.0) -> MCPManager:
        """A manager for the servers of a config file (raises ``MCPConfigError`` before starting any)."""
        return cls(load_mcp_config(path), connect_timeout=connect_timeout)

    # -- the tools --------------------------------------------------------------------------------

    def tool_specs(self, existing_names: Iterable[str] = ()) -> list[ToolSpec]:
        """Connect every server (concurrently, each within ``connect_timeout``) and return their tools."""
        listings = self._wait(self._listings(), self.connect_timeout + _CLOSE_GRACE)
        return self._specs(listings, existing_names)

    async def atool_specs(self, existing_names: Iterable[str] = ()) -> list[ToolSpec]:
        """:meth:`tool_specs` for async callers: the caller's loop is not blocked while servers start."""
        listings = await asyncio.wrap_future(self._submit(self._listings()))
        return self._specs(listings, existing_names)

    async def acall(self, server: str, tool: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Call ``tool`` (its name on the server) from any event loop; the result as text."""
        work = self._call(server, tool, dict(arguments or {}))
        if threading.current_thread() is self._thread:
            return await work
        try:
            return await asyncio.wrap_future(self._submit(work))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller gave up (the executor's timeout): not ours to turn into a result
            # The manager closed under the call: an error the model can read, not a cancelled turn.
            raise MCPUnavailableError(
                f"MCP server {server!r}: the MCP bridge closed during the call"
            ) from None

    def call(
        self, server: str, tool: str, arguments: Mapping[str, Any] | None = None, *, timeout: float = 90.0
    ) -> str:
        """:meth:`acall` for code without an event loop; a call past ``timeout`` is cancelled."""
        try:
            return self._wait(self._call(server, tool, dict(arguments or {})), timeout)
        except TimeoutError:
            raise ToolError(f"MCP tool {tool!r} on {server!r} timed out after {timeout:g} s") from None

    # -- lifetime ---------------------------------------------------------------------------------

    def close(self) -> None:
        """End every session (stdio servers exit) and stop the loop thread; safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        if threading.current_thread() is self._thread:
            raise RuntimeError("MCPManager.close() cannot run on its own event loop")
        try:
            done = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
            done.result(timeout=_CLOSE_GRACE + 2)
        except Exception:
            log.exception("MCP sessions did not shut down cleanly")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CLOSE_GRACE)

    def __enter__(self) -> MCPManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- running work on the manager's loop --------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _submit(self, work: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            work.close()
            raise MCPUnavailableError("the MCP bridge has been closed; no MCP tool can run")
        return asyncio.run_coroutine_threadsafe(work, self._loop)

    def _wait(self, work: Coroutine[Any, Any, T], timeout: float) -> T:
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError("a blocking MCPManager method was called on the manager's own loop")
        future = self._submit(work)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    async def _shutdown(self) -> None:
        owners = [link.owner for link in self._links.values() if link.owner is not None]
        for link in self._links.values():
            link.stop.set()
        self._links.clear()
        if owners:
            _, late = await asyncio.wait(owners, timeout=_CLOSE_GRACE)
            for task in late:
                task.cancel()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    # -- sessions ----------------------------------------------------------------------------------

    async def _listings(self) -> dict[str, list[MCPTool]]:
        names = list(self.servers)
        results = await asyncio.gather(*(self._live(name) for name in names), return_exceptions=True)
        listings: dict[str, list[MCPTool]] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                reason = str(result) if isinstance(result, StartFailure) else f"failed: {describe_error(result)}"
                self.errors[name] = f"MCP server {name!r} {reason}"
                log.warning("%s; its tools are not available", self.errors[name])
            else:
                self.errors.pop(name, None)
                listings[name] = result.ready.result()
        return listings

    async def _live(self, server: str) -> _Link:
        """The server's session, starting one if there is none; raises ``StartFailure``."""
        link = self._links.get(server)
        if link is None:
            config = self.servers.get(server)
            if config is None:
                raise StartFailure("is not configured")
            link = _Link(config, asyncio.get_running_loop().create_future())
            link.owner = asyncio.create_task(self._own(link), name=f"mcp-session-{server}")
            self._links[server] = link
        try:
            # Shielded: a call that times out while the server starts must not abort the start for others.
            await asyncio.shield(link.ready)
        except StartFailure:
            self._drop(server, link)
            raise
        return link  # if its session has ended since, the call that uses it finds out and says so

    async def _own(self, link: _Link) -> None:
        """Open, hold and close one session, all in this task, as anyio's cancel scopes require."""
        config, stage = link.config, "start"
        scope = anyio.CancelScope(deadline=anyio.current_time() + self.connect_timeout)
        try:
            with scope:
                async with create_session(config.connection()) as session:  # type: ignore[arg-type]
                    stage = "initialize"
                    await session.initialize()
                    stage = "tools/list"
                    tools = await _list_tools(session)
                    scope.deadline = math.inf
                    link.session = session
                    link.ready.set_result(tools)
                    await link.stop.wait()
            if scope.cancelled_caught and not link.ready.done():
                raise TimeoutError
        except BaseException as exc:
            if not link.ready.done() and (scope.cancel_called or isinstance(exc, TimeoutError)):
                link.failure = f"did not answer {stage} within {self.connect_timeout:g} s"
            else:
                link.failure = failure_line(exc, stage, config, started=link.ready.done())
            log.info("MCP session with %r ended: %s", config.name, link.failure)
            if not isinstance(exc, Exception):
                raise  # cancellation (manager shutdown) goes on up
        finally:
            link.session = None
            if not link.ready.done():
                link.ready.set_exception(StartFailure(link.failure or "ended before it was ready"))

    def _drop(self, server: str, link: _Link) -> None:
        if self._links.get(server) is link:
            del self._links[server]
        link.stop.set()

    def _lost(self, server: str, link: _Link, why: str) -> MCPUnavailableError:
        """Forget a broken session; the message tells the model that trying again later may work."""
        self._drop(server, link)
        again = "restarted" if link.config.transport == "stdio" else "reconnected"
        log.warning("MCP server %r lost: %s", server, why)
        return MCPUnavailableError(
            f"MCP server {server!r} is not available: {why}; it will be {again} on the next call"
        )

    async def _call(self, server: str, tool: str, arguments: dict[str, Any]) -> str:
        try:
            link = await self._live(server)
        except StartFailure as exc:
            raise MCPUnavailableError(
                f"MCP server {server!r} is not available: it {exc.args[0]}; it will be tried again on the next call"
            ) from None
        if link.session is None or link.owner is None or link.owner.done():
            raise self._lost(server, link, f"the session ended ({link.failure or 'no reason given'})")
        request = asyncio.ensure_future(link.session.call_tool(tool, arguments))
        request.add_done_callback(_observed)
        try:
            done, _ = await asyncio.wait({request, link.owner}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # On the executor's timeout we are cancelled here: abandon the request, keep the session.
            request.cancel()
        if request not in done:
            if self._closed:
                raise MCPUnavailableError(f"MCP server {server!r}: the MCP bridge closed during the call")
            raise self._lost(server, link, f"the session ended ({link.failure or 'no reason given'})")
        try:
            result = request.result()
        except McpError as exc:
            if exc.error.code == CONNECTION_CLOSED:
                raise self._lost(server, link, "the connection closed (did the server exit?)") from None
            raise MCPToolError(f"MCP server {server!r} refused {tool!r}: {exc.error.message}") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            raise self._lost(server, link, "the connection closed (did the server exit?)") from None
        except (OSError, httpx.TransportError) as exc:
            raise self._lost(server, link, describe_error(exc)) from None
        except Exception as exc:  # e.g. structured content that does not match the tool's output schema
            raise MCPToolError(f"MCP tool {tool!r} on {server!r} failed: {describe_error(exc)}") from None
        if result.isError:
            detail = result_text(result) or "no message"
            raise MCPToolError(f"MCP tool {tool!r} on {server!r} reported an error: {detail}")
        return result_text(result)

    # -- ToolSpecs ---------------------------------------------------------------------------------

    def _specs(
        self, listings: Mapping[str, Sequence[MCPTool]], existing_names: Iterable[str]
    ) -> list[ToolSpec]:
        usable: dict[str, list[tuple[MCPTool, dict[str, Any]]]] = {}
        for server, tools in listings.items():
            usable[server] = []
            for tool in tools:
                schema = object_schema(tool.inputSchema)
                if schema is None:
                    why = f"input schema is not a JSON Schema of type 'object': {tool.inputSchema!r:.80}"
                    self.skipped[f"{server}/{tool.name}"] = why
                    log.warning("MCP tool %r of %r left out: %s", tool.name, server, why)
                    continue
                usable[server].append((tool, schema))
        names = assign_tool_names(
            {server: [tool.name for tool, _ in entries] for server, entries in usable.items()},
            {server: config.prefix or server for server, config in self.servers.items()},
            existing_names,
        )
        specs: list[ToolSpec] = []
        for server, entries in usable.items():
            config = self.servers[server]
            for tool, schema in entries:
                name = names[server, tool.name]
                specs.append(
                    ToolSpec.from_schema(
                        name,
                        tool.description or tool.title or f"{tool.name} (MCP server {server!r})",
                        schema,
                        self._handler(server, tool.name),
                        sync=self._blocking(server, tool.name, config.timeout),
                        timeout=config.timeout,
                        permissions=config.permissions,
                        requires_approval=config.needs_approval(tool.name) or config.needs_approval(name),
                        # What the config puts behind an approval changes something: recorded, done once.
                        side_effects=config.needs_approval(tool.name) or config.needs_approval(name),
                        source=f"mcp:{server}",
                        domain=server,
                    )
                )
        return specs

    def _handler(self, server: str, tool: str) -> Callable[..., Awaitable[str]]:
        async def call_mcp_tool(**arguments: Any) -> str:
            return await self.acall(server, tool, arguments)

        call_mcp_tool.__qualname__ = call_mcp_tool.__name__ = f"mcp_{server}_{tool}"
        return call_mcp_tool

    def _blocking(self, server: str, tool: str, timeout: float | None) -> Callable[..., str]:
        """The same call for a caller without an event loop (``graph.invoke``'s tool threads)."""

        def call_mcp_tool(**arguments: Any) -> str:
            return self.call(server, tool, arguments, timeout=timeout or 90.0)

        return call_mcp_tool


def register_mcp_tools(registry: ToolRegistry, manager: MCPManager) -> list[ToolSpec]:
    """Add the manager's tools to ``registry``, prefixing names that clash with tools already there."""
    specs = manager.tool_specs(existing_names=registry.names())
    for spec in specs:
        registry.register(spec)
    return specs


async def _list_tools(session: ClientSession) -> list[MCPTool]:
    tools: list[MCPTool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools
    raise StartFailure(f"paged tools/list more than {_MAX_PAGES} times")


def _observed(task: asyncio.Future[Any]) -> None:
    """Read an abandoned request's outcome, so asyncio does not log it as never retrieved."""
    with contextlib.suppress(BaseException):
        task.exception()
