"""``kb-agent tools list|call``: the tool platform from the command line.

``call`` runs one call exactly as the agent's tools node does — schema validation, the caller's
permissions, a y/N approval for high-impact tools, the timeout — so an operator can try a tool (an MCP
server's, say) without a model in the loop. Exit codes: 0 done, 1 the tool failed, 2 bad ``--args`` (not
JSON, too deep, or refused by the tool's schema), 4 permission denied, 5 approval refused.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from cli.terminal import Terminal, json_text, shown

if TYPE_CHECKING:  # the tool platform loads with the first command that runs, not with --help
    from nodes.settings import Settings
    from tools.approval import ApprovalDecision, ApprovalRequest, Approver
    from tools.registry import ToolRegistry

tools_app = typer.Typer(no_args_is_help=True, help="The tools the agent can call: list them, call one.")
out = Terminal()
err = Terminal(stderr=True)


def _fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[red]error:[/red] {shown(message)}", soft_wrap=True)
    raise typer.Exit(code)


def _context(user: str | None, roles: str | None) -> Settings:
    from nodes.settings import ConfigError, Settings

    try:
        ctx = Settings()
        changes = {k: v for k, v in {"user_id": user, "roles": roles}.items() if v}
        return ctx.replace(**changes)
    except ConfigError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits


def _registry(ctx: Settings) -> ToolRegistry:
    from graph.builder import app_registry  # the same tools the graph binds, MCP servers included
    from nodes.settings import ConfigError

    try:
        return app_registry(ctx)
    except (ConfigError, ValueError) as exc:
        _fail(str(exc))
        raise


def prompt_approver(console: Console) -> Approver:
    """Ask y/N on the terminal; no answer (end of input) is a no."""
    from tools.approval import ApprovalDecision

    def approve(request: ApprovalRequest) -> ApprovalDecision:
        console.print(f"[bold yellow]approval needed[/bold yellow]: {shown(request.description)}")
        args = json.dumps(request.args, ensure_ascii=False)
        console.print(f"  tool [bold]{shown(request.tool)}[/bold] ({request.source}) with {shown(args)}")
        try:
            yes = typer.confirm("Approve this call?", default=False, err=True)
        except typer.Abort:
            return ApprovalDecision(False, "no answer was given")
        return ApprovalDecision(True, "approved at the terminal") if yes else ApprovalDecision(False, "")

    return approve


def _mcp_problems(ctx: Settings) -> None:
    """Servers (or single tools) of the MCP config that did not load, one warning line each."""
    if not ctx.mcp_config:
        return
    from graph.services import ROOT

    manager = ROOT.mcp(ctx.mcp_config)
    for server, why in {**manager.errors, **manager.skipped}.items():
        err.print(f"[yellow]warning:[/yellow] MCP {shown(server)}: {shown(why)}", soft_wrap=True)


@tools_app.command("list")
def list_tools(
    user: str | None = typer.Option(None, "--user", "-u", help="Show what this user may call."),
    roles: str | None = typer.Option(None, "--roles", help="Roles for this run (comma-separated)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every tool: where it comes from, what it needs, whether it asks for approval."""
    from tools.permissions import grant_for

    ctx = _context(user, roles)
    registry = _registry(ctx)
    grant = grant_for(ctx)
    _mcp_problems(ctx)
    rows: list[dict[str, Any]] = [
        {
            "name": spec.name,
            "source": spec.source,
            "domain": spec.domain,
            "permissions": list(spec.permissions),
            "approval": spec.requires_approval,
            "allowed": grant.permits(spec),
            "description": spec.description,
        }
        for spec in registry
    ]
    if as_json:
        typer.echo(json_text(rows))
        return
    table = Table("tool", "source", "permissions", "approval", "allowed")
    for row in rows:
        table.add_row(
            shown(row["name"]),  # an MCP server names its own tools
            shown(row["source"]),
            shown(", ".join(row["permissions"]) or "-"),
            "yes" if row["approval"] else "-",
            "yes" if row["allowed"] else "[red]no[/red]",
        )
    out.print(table)
    out.print(f"[dim]user {shown(ctx.user_id)} · roles {shown(', '.join(grant.roles) or 'none')}[/dim]")


@tools_app.command("call")
def call_tool(
    name: str = typer.Argument(..., help="The tool to call."),
    args: str = typer.Option("{}", "--args", "-a", help="The arguments as a JSON object."),
    user: str | None = typer.Option(None, "--user", "-u", help="Call as this user."),
    roles: str | None = typer.Option(None, "--roles", help="Roles for this run (comma-separated)."),
    as_json: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
) -> None:
    """Run one call through the platform: validation, permission, approval, timeout."""
    from tools.nesting import depth_message, json_too_deep
    from tools.permissions import grant_for
    from tools.registry import ToolContext
    from tools.rounds import ToolRounds

    if json_too_deep(args):  # json.loads itself would raise RecursionError
        _fail(depth_message("--args"), 2)
    try:
        parsed = json.loads(args)
    except json.JSONDecodeError as exc:
        _fail(f"--args is not valid JSON (column {exc.colno}): {exc.msg}", 2)
    if not isinstance(parsed, dict):
        _fail('--args must be a JSON object, e.g. \'{"query": "RAG"}\'', 2)
    ctx = _context(user, roles)
    registry = _registry(ctx)
    if name not in registry:
        _fail(f"unknown tool {name!r}; `kb-agent tools list` shows the tools", 2)
    grant = grant_for(ctx)
    call_id = f"cli_{uuid.uuid4().hex[:12]}"
    tool_ctx = ToolContext(
        user_id=ctx.user_id, timezone=ctx.timezone, settings=ctx, run_id=call_id, grant=grant
    )
    events: list[dict[str, Any]] = []
    quiet = logging.getLogger("kb_agent")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the outcome below says it once; restored for whoever runs us in-process
    try:
        [answer] = ToolRounds(registry).call(
            [{"id": call_id, "name": name, "args": parsed}],
            tool_ctx,
            approver=prompt_approver(err),
            emit=events.append,
            timeout=ctx.tool_timeout,
            concurrency=1,
        )
    finally:
        quiet.setLevel(level)
    statuses = {e.get("status") for e in events}
    status = "error" if answer.status == "error" else "success"
    content = answer.content if isinstance(answer.content, str) else str(answer.content)
    if as_json:
        typer.echo(
            json_text({"tool": name, "status": status, "content": content, "events": events})
        )
    elif status == "success":
        out.print(shown(content))
    else:
        err.print(f"[red]{shown(content)}[/red]", soft_wrap=True)
    if status == "success":
        return
    if "denied" in statuses:
        raise typer.Exit(4)
    if "approval_denied" in statuses:
        raise typer.Exit(5)
    # A call refused for its arguments exits 2, like bad JSON; a failure in the tool exits 1.
    raise typer.Exit(2 if any(e.get("cause") == "arguments" for e in events) else 1)
