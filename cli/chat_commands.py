"""The chat REPL's slash commands (``/new``, ``/thread``, ``/history``, ``/forget`` …) and the thread view.

Kept apart from :mod:`cli.app` so the REPL loop there stays about asking; ``kb-agent threads history``
shares :func:`print_history` with ``/history``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.table import Table

from cli.terminal import Terminal, shown

if TYPE_CHECKING:
    from graph.api import Agent

out = Terminal()
err = Terminal(stderr=True)


CHAT_HELP = (
    "/new · /thread NAME  switch thread · /threads · /history [--all] · /reset  clear this thread · "
    "/memories · /forget ID · /quit"
)


def print_history(agent: Agent, thread: str, include_folded: bool) -> None:
    """The thread as the model sees it (summary + recent rounds), or every message with ``--all``."""
    summary = "" if include_folded else agent.summary(thread)
    if summary:
        out.print(f"[bold]summary[/bold]: {shown(summary)}")
    for message in agent.history(thread, include_folded=include_folded):
        text = message.text or json.dumps(getattr(message, "tool_calls", []), ensure_ascii=False)
        out.print(f"[bold]{message.type}[/bold]: {shown(text)}")


def chat_command(agent: Agent, line: str, state: dict[str, str]) -> bool:
    """Handle a slash command; False means quit. Another user's thread is refused with one line."""
    from stores.threads import ThreadOwnershipError

    try:
        return _run_command(agent, line, state)
    except ThreadOwnershipError as exc:
        err.print(f"[red]error:[/red] {shown(str(exc))}")
        return True


def _run_command(agent: Agent, line: str, state: dict[str, str]) -> bool:
    name, _, arg = line.partition(" ")
    if name in {"/quit", "/exit"}:
        return False
    if name == "/reset":
        agent.clear(state["thread"])
        out.print(f"[dim]thread {state['thread']} cleared[/dim]")
    elif name == "/new":
        state["thread"] = agent.new_thread()
        out.print(f"[dim]new thread {state['thread']}[/dim]")
    elif name == "/thread":
        if not arg.strip():
            out.print(f"[dim]current thread: {state['thread']}[/dim]")
        else:
            agent.registry.check(arg.strip(), agent.context.user_id)
            state["thread"] = arg.strip()
            out.print(f"[dim]switched to thread {state['thread']}[/dim]")
    elif name == "/threads":
        table = Table("thread", "title", "last activity")
        for info in agent.threads():
            mark = " *" if info.thread_id == state["thread"] else ""
            table.add_row(info.thread_id + mark, shown(info.title), info.last_activity)
        out.print(table)
    elif name == "/history":
        print_history(agent, state["thread"], include_folded=arg.strip() == "--all")
    elif name == "/memories":
        memories = agent.memories()
        if not memories:
            out.print("[dim]no memories[/dim]")
        for m in memories:
            out.print(f"[dim]{m['id']}[/dim] ({m['memory_type']}) {shown(m['content'])}")
    elif name == "/forget":
        if not arg.strip():
            out.print("[yellow]usage: /forget ID[/yellow] (ids: /memories)")
        else:
            entry = agent.forget(arg.strip())
            if entry.status == "applied":
                out.print(f"[dim]forgot {entry.memory_id}: {shown(entry.old_content or '')}[/dim]")
            else:
                out.print(f"[yellow]not forgotten: no memory {shown(arg.strip())} of this user[/yellow]")
    else:
        out.print(f"[yellow]unknown command {shown(name)}[/yellow] — {CHAT_HELP}")
    return True
