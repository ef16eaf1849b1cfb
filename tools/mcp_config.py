"""The MCP servers the operator configured: one JSON file, checked completely before anything starts.

    {"servers": {"files": {"transport": "stdio", "command": "npx", "args": ["-y", "server-filesystem"]},
                 "search": {"transport": "streamable_http", "url": "http://127.0.0.1:9000/mcp"}}}

Every mistake is a :class:`MCPConfigError` with one line naming the file, the server and the key, so the
CLI can print it as is; a server is never half-started from a config we could not read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

MCP_CONFIG_ENV = "KB_AGENT_MCP_CONFIG"
Transport = Literal["stdio", "streamable_http"]
_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "http": "streamable_http",
}
_COMMON_KEYS = {"transport", "permissions", "approval", "timeout", "prefix"}
_KEYS: dict[Transport, set[str]] = {
    "stdio": _COMMON_KEYS | {"command", "args", "env", "cwd"},
    "streamable_http": _COMMON_KEYS | {"url", "headers"},
}
_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,32}")


class MCPConfigError(ValueError):
    """The MCP config file cannot be used; the message is one line saying where and what to fix."""


@dataclass(frozen=True)
class MCPServerConfig:
    """One configured server: how to reach it, and what its tools need (permissions, approval, timeout)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    permissions: tuple[str, ...] = ()
    approval: bool | tuple[str, ...] = False
    timeout: float | None = None
    prefix: str | None = None

    def __post_init__(self) -> None:
        if not self.permissions:
            object.__setattr__(self, "permissions", (f"mcp:{self.name}",))
        # Read-only views: a frozen config must not change under the sessions that were started from it.
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    def needs_approval(self, tool: str) -> bool:
        """``approval: true`` covers every tool of the server; a list covers the tools it names."""
        return self.approval if isinstance(self.approval, bool) else tool in self.approval

    def connection(self) -> dict[str, Any]:
        """The connection dict ``langchain_mcp_adapters.sessions.create_session`` takes."""
        if self.transport == "stdio":
            stdio: dict[str, Any] = {"transport": "stdio", "command": self.command, "args": list(self.args)}
            # None lets the MCP SDK pass its safe subset of our environment (PATH, HOME…); given values add to it.
            stdio["env"] = dict(self.env) or None
            if self.cwd:
                stdio["cwd"] = self.cwd
            return stdio
        return {"transport": "streamable_http", "url": self.url, "headers": dict(self.headers) or None}


def load_mcp_config(path: str | os.PathLike[str]) -> dict[str, MCPServerConfig]:
    """Read and check the whole file; servers in file order. Raises :class:`MCPConfigError`."""
    where = str(path)
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MCPConfigError(f"MCP config file not found: {where}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPConfigError(f"MCP config file {where} cannot be read: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MCPConfigError(
            f"MCP config {where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    return parse_mcp_config(raw, where=where)


def load_mcp_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, MCPServerConfig]:
    """The servers of the file named by ``KB_AGENT_MCP_CONFIG``; none when it is unset or empty."""
    value = (os.environ if environ is None else environ).get(MCP_CONFIG_ENV, "").strip()
    return load_mcp_config(value) if value else {}


def parse_mcp_config(raw: Any, *, where: str = "MCP config") -> dict[str, MCPServerConfig]:
    """Check an already-parsed config object (for callers that hold the JSON inline)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("servers"), dict):
        raise MCPConfigError(
            f'{where}: expected an object with a "servers" object, e.g. '
            '{"servers": {"name": {"transport": "stdio", "command": "..."}}}'
        )
    servers: dict[str, MCPServerConfig] = {}
    for name, entry in raw["servers"].items():
        if not name or not name.strip():
            raise MCPConfigError(f"{where}: a server name must not be empty")
        servers[name] = _server(name, entry, f"{where}: server {name!r}")
    return servers


def _server(name: str, entry: Any, where: str) -> MCPServerConfig:
    if not isinstance(entry, dict):
        raise MCPConfigError(f"{where}: expected an object, got {_kind(entry)}")
    given = entry.get("transport")
    if given is None:
        raise MCPConfigError(f'{where}: "transport" is missing; use "stdio" or "streamable_http"')
    transport = _TRANSPORTS.get(given) if isinstance(given, str) else None
    if transport is None:
        raise MCPConfigError(f'{where}: unknown transport {given!r}; use "stdio" or "streamable_http"')
    unknown = sorted(set(entry) - _KEYS[transport])
    if unknown:
        allowed = ", ".join(sorted(_KEYS[transport]))
        raise MCPConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} for {transport}; allowed: {allowed}"
        )

    common: dict[str, Any] = {
        "permissions": _strings(entry, "permissions", where),
        "approval": _approval(entry.get("approval", False), where),
        "timeout": _timeout(entry.get("timeout"), where),
        "prefix": _prefix(entry.get("prefix"), where),
    }
    if transport == "streamable_http":
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            raise MCPConfigError(
                f'{where}: a streamable_http server needs "url" (e.g. "http://127.0.0.1:8000/mcp")'
            )
        if not url.startswith(("http://", "https://")):
            raise MCPConfigError(f"{where}: url {url!r} must start with http:// or https://")
        headers = _string_map(entry, "headers", where)
        return MCPServerConfig(name, transport, url=url, headers=headers, **common)

    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise MCPConfigError(f'{where}: a stdio server needs "command" (the program that starts it)')
    args = _strings(entry, "args", where)
    env = _string_map(entry, "env", where)
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str) or not cwd:
            raise MCPConfigError(f'{where}: "cwd" must be a directory path, got {_kind(cwd)}')
        if not Path(cwd).expanduser().is_dir():
            raise MCPConfigError(f"{where}: cwd {cwd!r} is not a directory")
        cwd = str(Path(cwd).expanduser())
    _check_command(command, cwd, env, where)
    return MCPServerConfig(name, transport, command=command, args=args, env=env, cwd=cwd, **common)


def _check_command(command: str, cwd: str | None, env: Mapping[str, str], where: str) -> None:
    """Fail at load time, not at the first tool call, when the program is not there."""
    if os.sep in command or (os.altsep and os.altsep in command):
        program = Path(command).expanduser()
        if not program.is_absolute() and cwd:
            program = Path(cwd) / program
        if not program.is_file():
            raise MCPConfigError(f"{where}: command {command!r} does not exist")
        if not os.access(program, os.X_OK):
            raise MCPConfigError(f"{where}: command {command!r} is not executable")
    elif shutil.which(command, path=env.get("PATH")) is None:
        raise MCPConfigError(f"{where}: command {command!r} was not found on PATH")


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r:.40}"


def _strings(entry: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MCPConfigError(f'{where}: "{key}" must be a list of strings, got {_kind(value)}')
    return tuple(value)


def _string_map(entry: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MCPConfigError(f'{where}: "{key}" must be an object of strings, got {_kind(value)}')
    return dict(value)


def _approval(value: Any, where: str) -> bool | tuple[str, ...]:
    if isinstance(value, bool):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise MCPConfigError(
        f'{where}: "approval" must be true, false or a list of tool names, got {_kind(value)}'
    )


def _timeout(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise MCPConfigError(f'{where}: "timeout" must be a positive number of seconds, got {_kind(value)}')
    return float(value)


def _prefix(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _PREFIX.fullmatch(value):
        raise MCPConfigError(
            f'{where}: "prefix" must be 1-32 letters, digits, "_" or "-", got {_kind(value)}'
        )
    return value
