"""The live trace of a turn (``kb-agent ask -v``, ``chat --trace``): what the
model was offered and chose each round, every tool call with its arguments and (truncated) result, the
passages retrieved with their scores, and the memories recalled and written. Secrets are redacted.

Also the one status line per tool call that ``ask`` and ``chat`` show even without the trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console

from cli.terminal import shown, shown_name

PREVIEW = 160


def _brief(value: Any) -> str:
    from stores.memory.checks import redact  # the secret patterns load with the first trace, not with the CLI

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return shown(redact(text, limit=PREVIEW))


def trace_printer(console: Console, tool_status: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A stream-event callback that prints the trace, and tool status lines through ``tool_status``."""

    def show(event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "memories_recalled":
            for m in event.get("memories", []):
                console.print(f"[dim]· memory {shown(m.get('id'))}: {_brief(m.get('content'))}[/dim]")
        elif kind == "passages":
            found = ", ".join(f"{shown_name(p.get('id'))} ({p.get('score')})" for p in event.get("passages", []))
            console.print(f"[dim]· retrieved: {found or 'nothing'}[/dim]")
        elif kind == "model_round":
            offered = ", ".join(shown(t) for t in event.get("tools_offered", []))
            console.print(
                f"[dim]· round {event.get('round')} · {shown(event.get('model'))} · {event.get('tokens')} tokens · "
                f"tools offered: {offered or 'none'}[/dim]"
            )
            for call in event.get("tool_calls", []):
                console.print(f"[dim]  → {shown(call.get('name'))}({_brief(call.get('args'))})[/dim]")
        elif kind == "tool_call":
            tool_status(event)
            if event.get("status") == "done" and "result" in event:
                console.print(f"[dim]  ← {_brief(event['result'])}[/dim]")

    return show


def print_memories_written(console: Console, entries: list[Any]) -> None:
    """The memory changes a turn's background extraction made (audit entries), after the answer."""
    for e in entries:
        detail = e.new_content or e.old_content or e.reason or ""
        console.print(f"[dim]· memory {shown(e.action)} {shown(e.status)}: {_brief(detail)}[/dim]")


def tool_status_printer(console: Console) -> Any:
    """A callback that prints one status line per tool-call event."""

    def show(event: dict[str, Any]) -> None:
        if event.get("type") != "tool_call":
            return
        status, tool = event.get("status"), shown(event.get("tool"))  # a model may name a tool anything
        if status == "executing":
            console.print(f"[dim]⚙ {tool} …[/dim]")
        elif status == "done":
            console.print(f"[dim]✓ {tool} ({event.get('duration_ms', 0):.0f} ms)[/dim]")
        elif status == "approval_requested":
            pass  # the approval prompt shows the action itself
        elif status == "approval_granted":
            console.print(f"[dim]✓ {tool} approved[/dim]")
        elif status == "approval_denied":
            console.print(f"[yellow]✗ {tool} not approved: nothing was changed[/yellow]")
        elif status == "denied":
            console.print(f"[yellow]✗ {tool}: permission denied[/yellow]")
        else:
            console.print(f"[yellow]✗ {tool}: {shown(str(event.get('error', status)))}[/yellow]")

    return show
