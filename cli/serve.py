"""``kb-agent serve``: the production LangGraph server (Aegra) on the deployment's Postgres, with our auth.

``langgraph dev`` stays the Studio workflow; it keeps threads in its working directory and loses them on a
kill -9. This command checks what an operator gets wrong before anything listens — no tokens, an unreachable
Postgres or Redis, a setting or MCP config that cannot be used, a runtime missing from this interpreter, a live replica on the same Postgres running
another graph version or other settings — each as one line naming the setting and exit 1,
then replaces itself with uvicorn running ``cli.server_app`` (Aegra behind an auth self-check). Replacing,
not spawning: the process the operator (or a supervisor) signals is the server, so a kill leaves no orphan.

Aegra needs Python >= 3.12 (``pip install -e ".[server]"`` in a 3.12 venv). With ``KB_AGENT_REDIS_URL`` runs
go through Redis to workers holding a Postgres lease: a run left "running" by a dead process returns to the
queue when its lease expires and resumes from its last checkpoint, and several processes can share one
Postgres. Without Redis there is one process, and runs in flight when it dies are not recovered.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import typer
from rich.markup import escape

from cli.server_app import REPLICA_ENV, SELF_CHECK_ENV
from cli.terminal import Terminal

if TYPE_CHECKING:
    from nodes.settings import Settings
    from stores.replicas import Replica

REDIS_ENV = "KB_AGENT_REDIS_URL"
DATABASE_ENV = "KB_AGENT_DATABASE_URL"
RUNTIME_MODULE = "aegra_api"
APP_FACTORY = "cli.server_app:create_app"
REPO_CONFIG = Path(__file__).resolve().parents[1] / "langgraph.json"
LOOPBACK = ("127.0.0.1", "localhost", "::1")

err = Terminal(stderr=True)


class ServeError(Exception):
    """Why the server will not start, as one line that names the setting to fix."""


def _where(url: str) -> str:
    """host:port/db of a URL, without its password (the line goes to logs)."""
    parts = urlsplit(url)
    return f"{parts.hostname or '?'}:{parts.port or ''}{parts.path or ''}"


def check_runtime() -> None:
    if importlib.util.find_spec(RUNTIME_MODULE) is None:
        version = ".".join(map(str, sys.version_info[:2]))
        raise ServeError(
            f"the server runtime (aegra-api) is not installed in this interpreter (Python {version}): it needs "
            "Python >= 3.12 — python3.12 -m venv .venv-server && .venv-server/bin/pip install -e '.[server]', "
            "then run .venv-server/bin/kb-agent serve"
        )


def check_settings() -> Settings:
    """The deployment's settings and its MCP config, refused before anything listens when unusable."""
    from nodes.settings import ConfigError, Settings

    try:
        settings = Settings.current()
    except ConfigError as exc:
        raise ServeError(str(exc)) from None
    if settings.mcp_config:
        from tools.mcp_config import MCPConfigError, load_mcp_config

        try:
            load_mcp_config(settings.mcp_config)
        except MCPConfigError as exc:
            raise ServeError(f"KB_AGENT_MCP_CONFIG: {exc}") from None
    return settings


def check_tokens(insecure_dev: bool) -> bool:
    """True when requests will be authenticated by token; refuse to serve without tokens unless asked to."""
    from nodes.tokens import TOKENS_ENV, token_table

    raw = os.environ.get(TOKENS_ENV, "")
    try:
        tokens = token_table(raw)
    except (OSError, ValueError) as exc:
        raise ServeError(f"{TOKENS_ENV} cannot be read: {exc}") from None
    if tokens:
        return True
    if not insecure_dev:
        raise ServeError(
            f"{TOKENS_ENV} is not set: a server without tokens lets anyone in. Set it "
            '(\'{"<token>": {"user": "alice", "roles": ["user"]}}\' or a JSON file), or pass --insecure-dev '
            "for a development server on loopback"
        )
    return False


def check_database() -> str:
    """The deployment's Postgres URL, after one connection proved it answers."""
    from nodes.settings import ConfigError, Settings

    try:
        url = Settings.current().database_url
    except ConfigError as exc:
        raise ServeError(str(exc)) from None
    if not url.startswith(("postgresql://", "postgres://")):
        raise ServeError(
            f"{DATABASE_ENV} is {'not set' if not url else 'not a Postgres URL'}: kb-agent serve keeps threads, runs and checkpoints in "
            "Postgres (postgresql://user:password@host:5432/db)"
        )
    try:
        import psycopg
    except ImportError:
        raise ServeError("psycopg is not installed: pip install -e '.[server]'") from None
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ServeError(f"cannot reach Postgres at {DATABASE_ENV} ({_where(url)}): {reason}") from None
    return url


def check_redis(workers: int) -> str:
    """The Redis URL when one is set and answers; '' for a single process without one."""
    url = os.environ.get(REDIS_ENV, "").strip()
    if not url:
        if workers > 1:
            raise ServeError(
                f"--workers {workers} needs {REDIS_ENV} (redis://host:6379/0): without Redis each worker "
                "would keep its own runs and streams"
            )
        err.print(
            f"[yellow]warning:[/yellow] {REDIS_ENV} is not set: one process, and runs in flight when it "
            "dies are not recovered (set it for crash recovery and replicas)",
            soft_wrap=True,
        )
        return ""
    try:
        import redis
    except ImportError:
        raise ServeError("the redis client is not installed: pip install -e '.[server]'") from None
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5).ping()
    except (redis.RedisError, ValueError) as exc:
        raise ServeError(f"cannot reach Redis at {REDIS_ENV} ({_where(url)}): {exc}") from None
    return url


def check_peers(database_url: str, address: str) -> str:
    """Join the replicas of this Postgres unless a live one runs another graph or settings; our row's id."""
    from graph.fingerprint import differences, graph_version, settings_digest
    from nodes.settings import Settings
    from stores.base import StoreUnavailableError
    from stores.replicas import GONE_AFTER, ReplicaRegistry

    replica_id = f"{address}/{uuid.uuid4().hex[:8]}"
    mine, settings = graph_version(), settings_digest(Settings.current())

    def compare(peers: list[Replica]) -> None:
        for peer in peers:
            found = differences(mine, settings, peer.graph_version, peer.settings)
            if found:
                raise ServeError(
                    f"replica {peer.address} (seen {peer.seen_ago:.0f} s ago) on this {DATABASE_ENV} differs: "
                    f"{'; '.join(found)}. Every replica needs the same code and KB_AGENT_* settings: fix this "
                    f"one, or stop the others first (a replica not seen for {GONE_AFTER:.0f} s counts as gone)"
                )

    try:
        registry = ReplicaRegistry(database_url)
    except StoreUnavailableError as exc:
        raise ServeError(str(exc)) from None
    try:
        registry.join(replica_id, address, mine, settings, compare)
    finally:
        registry.close()
    return replica_id


def check_config(config: Path, authenticated: bool) -> Path:
    try:
        spec: dict[str, Any] = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServeError(f"cannot read the server config {config}: {exc}") from None
    auth_path = (spec.get("auth") or {}).get("path")
    if authenticated and not auth_path:
        raise ServeError(f'{config} has no "auth" path: the server would run without our graph/auth.py')
    return config.resolve()


def runtime_environment(
    *, database_url: str, redis_url: str, config: Path, authenticated: bool, replica_id: str = ""
) -> dict[str, str]:
    """The environment Aegra reads, derived from ours (the operator's own AEGRA-style variables win)."""
    env = dict(os.environ)
    env["DATABASE_URL"] = database_url
    env["AEGRA_CONFIG"] = str(config)
    env[SELF_CHECK_ENV] = "401" if authenticated else "off"
    env[REPLICA_ENV] = replica_id
    env["REDIS_BROKER_ENABLED"] = "true" if redis_url else "false"
    if redis_url:
        env["REDIS_URL"] = redis_url
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("LANGSMITH_TRACING", "false")
    return env


def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on (0.0.0.0 behind a load balancer)."),
    port: int = typer.Option(2026, help="Port to listen on."),
    workers: int = typer.Option(
        1, min=1, help="uvicorn worker processes (more than 1 needs KB_AGENT_REDIS_URL)."
    ),
    insecure_dev: bool = typer.Option(
        False,
        "--insecure-dev",
        help="Serve without KB_AGENT_API_TOKENS (development only: nothing is authenticated).",
    ),
    config: Path = typer.Option(
        None, help="The LangGraph config (default: the repository's langgraph.json, else ./langgraph.json)."
    ),
) -> None:
    """Serve the agent over the LangGraph API (Aegra) on Postgres, with token auth; replaces this process."""
    config = config or (REPO_CONFIG if REPO_CONFIG.exists() else Path.cwd() / "langgraph.json")
    try:
        check_runtime()
        check_settings()
        authenticated = check_tokens(insecure_dev)
        database_url = check_database()
        redis_url = check_redis(workers)
        config = check_config(config, authenticated)
        replica_id = check_peers(database_url, f"{socket.gethostname()}:{port}")
    except ServeError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True)
        raise typer.Exit(1) from None
    if not authenticated and host not in LOOPBACK:
        err.print(f"[yellow]warning:[/yellow] --insecure-dev on {host}: anyone who reaches it is let in")
    env = runtime_environment(
        database_url=database_url,
        redis_url=redis_url,
        config=config,
        authenticated=authenticated,
        replica_id=replica_id,
    )
    argv = [sys.executable, "-m", "uvicorn", APP_FACTORY, "--factory", "--host", host, "--port", str(port)]
    if workers > 1:
        argv += ["--workers", str(workers)]
    os.chdir(config.parent)  # the config's relative paths ("./graph/auth.py", dependencies ".") start here
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
