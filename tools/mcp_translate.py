"""How MCP's terms become the registry's: tool names (safe, unique across servers), input schemas, call
results as text for the model, and one-line reasons for a failed session. Pure functions, no I/O."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx
from mcp import McpError
from mcp.types import (
    CONNECTION_CLOSED,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import ValidationError

from tools.mcp_config import MCPServerConfig

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


class StartFailure(Exception):
    """Why a session did not come up; the message completes "MCP server 'x' ..."."""


def safe_tool_name(name: str) -> str:
    """``name`` as an OpenAI-style function name: other characters become ``_``, at most 64 long."""
    cleaned = _UNSAFE.sub("_", name)[:_MAX_NAME]
    return cleaned if re.search(r"[A-Za-z0-9]", cleaned) else "tool"


def assign_tool_names(
    listings: Mapping[str, Sequence[str]], prefixes: Mapping[str, str], existing: Iterable[str] = ()
) -> dict[tuple[str, str], str]:
    """Exposed names for each (server, tool): the tool's own name unless it clashes, else prefixed.

    A clash (the name in two servers, or already registered) prefixes *every* tool that has it, so no
    tool silently wins; plain names are placed first so a prefixed name can never take one of them.
    """
    taken = set(existing)
    plain = {(server, tool): safe_tool_name(tool) for server, tools in listings.items() for tool in tools}
    counts = Counter(plain.values())
    names: dict[tuple[str, str], str] = {}
    clashing: list[tuple[str, str]] = []
    for key, name in plain.items():
        if counts[name] > 1 or name in taken:
            clashing.append(key)
        else:
            names[key] = name
            taken.add(name)
    for server, tool in clashing:
        prefix = safe_tool_name(prefixes.get(server, server))
        name = unique_name(safe_tool_name(f"{prefix}_{plain[server, tool]}"), taken)
        names[server, tool] = name
        taken.add(name)
    return {key: names[key] for key in plain}


def unique_name(name: str, taken: set[str]) -> str:
    if name not in taken:
        return name
    for n in range(2, 10_000):
        suffix = f"_{n}"
        candidate = name[: _MAX_NAME - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    raise ValueError(f"no free tool name for {name!r}")


def result_text(result: CallToolResult) -> str:
    """What the model reads: text parts joined; structured content as JSON when there is no text."""
    parts = [text for block in result.content if (text := _block_text(block))]
    has_text = any(isinstance(b, TextContent | EmbeddedResource) for b in result.content)
    if result.structuredContent is not None and not has_text:
        parts.insert(0, json.dumps(result.structuredContent, ensure_ascii=False, default=str))
    return "\n".join(parts)


def _block_text(block: Any) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        if isinstance(resource, BlobResourceContents):
            return f"[binary resource {resource.uri}, {resource.mimeType or 'unknown type'}]"
    if isinstance(block, ImageContent | AudioContent):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind}: {block.mimeType}, {len(block.data) * 3 // 4} bytes, not shown]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.name} {block.uri}]"
    return f"[{getattr(block, 'type', type(block).__name__)} content, not shown]"


def object_schema(schema: Any) -> dict[str, Any] | None:
    """The tool's input schema with ``"type": "object"`` made explicit; None when it is not an object."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type", "object")
    if kind != "object" or not isinstance(schema.get("properties", {}), dict):
        return None
    return {**schema, "type": "object"}


def failure_line(exc: BaseException, stage: str, config: MCPServerConfig, *, started: bool) -> str:
    """One line on why a session failed or ended, for ``errors`` and the model."""
    leaf = leaf_error(exc)
    if isinstance(leaf, StartFailure):
        return str(leaf)
    if isinstance(leaf, ValidationError) and stage == "tools/list":
        first = str(leaf).splitlines()[0]
        return f"sent a malformed tools/list reply ({first})"
    if isinstance(leaf, McpError) and leaf.error.code == CONNECTION_CLOSED and not started:
        if config.transport == "stdio":
            return f"closed the connection during {stage}: the process exited (see its stderr)"
        return f"closed the connection during {stage}"
    if isinstance(leaf, httpx.ConnectError):
        return f"could not be reached at {config.url}: {leaf}"
    if isinstance(leaf, OSError) and stage == "start" and config.transport == "stdio":
        return f"could not start {config.command!r}: {leaf}"
    return f"failed during {stage}: {describe_error(leaf)}" if not started else describe_error(leaf)


def leaf_error(exc: BaseException) -> BaseException:
    """The first real cause inside anyio's exception groups (cancellations are only the echo)."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def describe_error(exc: BaseException) -> str:
    leaf = leaf_error(exc)
    text = str(leaf).strip().splitlines()[0] if str(leaf).strip() else ""
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__
