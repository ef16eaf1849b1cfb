"""``load_mcp_config``: every mistake in the servers file is one clear line, found before anything starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.mcp_config import (
    MCP_CONFIG_ENV,
    MCPConfigError,
    MCPServerConfig,
    load_mcp_config,
    load_mcp_config_from_env,
    parse_mcp_config,
)

PYTHON = sys.executable


def write(tmp_path: Path, config: Any) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    return path


def servers(**entries: Any) -> dict[str, Any]:
    return {"servers": entries}


def test_a_full_config_loads_in_file_order_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        servers(
            files={"transport": "stdio", "command": PYTHON, "args": ["-m", "srv"], "env": {"A": "1"}},
            search={
                "transport": "streamable_http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer t"},
                "permissions": ["net:search"],
                "approval": ["delete"],
                "timeout": 5,
                "prefix": "s",
            },
        ),
    )
    loaded = load_mcp_config(path)
    assert list(loaded) == ["files", "search"]
    files, search = loaded["files"], loaded["search"]
    assert isinstance(files, MCPServerConfig)
    assert (files.transport, files.command, files.args) == ("stdio", PYTHON, ("-m", "srv"))
    assert files.permissions == ("mcp:files",) and files.approval is False and files.timeout is None
    assert search.permissions == ("net:search",) and search.timeout == 5.0 and search.prefix == "s"
    assert search.needs_approval("delete") and not search.needs_approval("read")


def test_the_config_is_frozen() -> None:
    config = parse_mcp_config(servers(x={"transport": "stdio", "command": PYTHON, "env": {"A": "1"}}))["x"]
    with pytest.raises(AttributeError):
        config.command = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.env["A"] = "2"  # type: ignore[index]


def test_connection_dicts_are_what_the_adapters_take(tmp_path: Path) -> None:
    loaded = parse_mcp_config(
        servers(
            a={"transport": "stdio", "command": PYTHON, "args": ["s.py"], "cwd": str(tmp_path)},
            b={"transport": "stdio", "command": PYTHON, "env": {"K": "v"}},
            c={"transport": "http", "url": "https://example.invalid/mcp", "headers": {"X": "1"}},
        )
    )
    assert loaded["a"].connection() == {
        "transport": "stdio",
        "command": PYTHON,
        "args": ["s.py"],
        "env": None,  # the SDK then passes its safe subset of our environment
        "cwd": str(tmp_path),
    }
    assert loaded["b"].connection()["env"] == {"K": "v"}
    assert loaded["c"].transport == "streamable_http"
    assert loaded["c"].connection() == {
        "transport": "streamable_http",
        "url": "https://example.invalid/mcp",
        "headers": {"X": "1"},
    }


def test_approval_true_covers_every_tool() -> None:
    config = parse_mcp_config(servers(x={"transport": "stdio", "command": PYTHON, "approval": True}))["x"]
    assert config.needs_approval("anything")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError, match=r"MCP config file not found: .*nope\.json"):
        load_mcp_config(tmp_path / "nope.json")


def test_not_json_says_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "servers": {\n    "x": {"transport": "stdio",}\n  }\n}')
    with pytest.raises(MCPConfigError, match=r"not valid JSON: .* at line 3, column 32") as err:
        load_mcp_config(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], 'expected an object with a "servers" object'),
        ({"server": {}}, 'expected an object with a "servers" object'),
        ({"servers": []}, 'expected an object with a "servers" object'),
        (servers(x="stdio"), "server 'x': expected an object, got str"),
        (servers(x={}), "server 'x': \"transport\" is missing"),
        (servers(x={"transport": "sse", "url": "http://h"}), "unknown transport 'sse'"),
        (servers(x={"transport": 1}), "unknown transport 1"),
        (servers(x={"transport": "stdio"}), 'a stdio server needs "command"'),
        (servers(x={"transport": "stdio", "command": ""}), 'a stdio server needs "command"'),
        (
            servers(x={"transport": "stdio", "command": "no-such-program-kb"}),
            "'no-such-program-kb' was not found on PATH",
        ),
        (
            servers(x={"transport": "stdio", "command": "/nonexistent/bin/srv"}),
            "'/nonexistent/bin/srv' does not exist",
        ),
        (servers(x={"transport": "streamable_http"}), 'a streamable_http server needs "url"'),
        (
            servers(x={"transport": "streamable_http", "url": "ftp://h"}),
            "must start with http:// or https://",
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "args": "a b"}),
            '"args" must be a list of strings',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "args": [1]}),
            '"args" must be a list of strings',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "env": {"A": 1}}),
            '"env" must be an object of strings',
        ),
        (
            servers(x={"transport": "http", "url": "http://h", "headers": []}),
            '"headers" must be an object of strings',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "timeout": 0}),
            '"timeout" must be a positive number',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "timeout": True}),
            '"timeout" must be a positive number',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "approval": "yes"}),
            '"approval" must be true, false',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "permissions": "a"}),
            '"permissions" must be a list',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "prefix": "a b"}),
            '"prefix" must be 1-32 letters',
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "cwd": "/nonexistent-dir"}),
            "is not a directory",
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "comand": "x"}),
            "unknown key(s) comand for stdio",
        ),
        (
            servers(x={"transport": "stdio", "command": PYTHON, "url": "http://h"}),
            "unknown key(s) url for stdio",
        ),
    ],
)
def test_each_mistake_is_one_clear_line(tmp_path: Path, config: Any, message: str) -> None:
    with pytest.raises(MCPConfigError) as err:
        load_mcp_config(write(tmp_path, config))
    assert message in str(err.value)
    assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_a_relative_command_path_is_resolved_against_cwd(tmp_path: Path) -> None:
    program = tmp_path / "srv.sh"
    program.write_text("#!/bin/sh\n")
    with pytest.raises(MCPConfigError, match="is not executable"):
        parse_mcp_config(servers(x={"transport": "stdio", "command": "./srv.sh", "cwd": str(tmp_path)}))
    program.chmod(0o755)
    loaded = parse_mcp_config(servers(x={"transport": "stdio", "command": "./srv.sh", "cwd": str(tmp_path)}))
    assert loaded["x"].command == "./srv.sh"


def test_an_empty_server_list_is_valid(tmp_path: Path) -> None:
    assert load_mcp_config(write(tmp_path, {"servers": {}})) == {}


def test_from_env_reads_the_named_file_or_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, servers(x={"transport": "stdio", "command": PYTHON}))
    assert load_mcp_config_from_env({}) == {}
    assert load_mcp_config_from_env({MCP_CONFIG_ENV: "  "}) == {}
    assert list(load_mcp_config_from_env({MCP_CONFIG_ENV: str(path)})) == ["x"]
