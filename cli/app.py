"""``kb-agent``: ask one question, or chat in a REPL; threads persist under the data dir.

Errors a user can cause are one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import logging
import sys
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from cli import kb as kb_cli
from cli import kb_eval, signals
from cli import memory as memory_cli
from cli import serve as serve_cli
from cli.chat_commands import CHAT_HELP, chat_command, print_history
from cli.documents import documents_app
from cli.feedback import feedback_app
from cli.terminal import Terminal, json_text, shown, undecodable
from cli.tools import tools_app
from cli.trace import print_memories_written, tool_status_printer, trace_printer
from cli.trash import trash_app
from stores.faults import store_failure

if TYPE_CHECKING:
    from graph.api import Agent, Answer
    from nodes.settings import Settings

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="kb-agent: a knowledge-base agent on LangGraph."
)
out = Terminal()
err = Terminal(stderr=True)



def user_errors() -> tuple[type[Exception], ...]:
    """The errors a user can cause, each reported as one line.

    Resolved when an error is being handled (``except user_errors()``), so that starting the command line
    (``--help``, a refused argument) imports none of the layers that define them.
    """
    from graph.api import EmptyQuestionError, ThreadBusyError
    from models.errors import ModelConfigError, ModelError
    from nodes.settings import ConfigError
    from stores.base import StoreUnavailableError
    from stores.checkpoint import CheckpointConfigError
    from stores.threads import ThreadOwnershipError
    from tools.mcp_config import MCPConfigError

    return (
        ModelError,
        ModelConfigError,
        ConfigError,
        CheckpointConfigError,
        EmptyQuestionError,
        ThreadOwnershipError,
        StoreUnavailableError,
        ThreadBusyError,
        MCPConfigError,
    )


def turn_errors() -> tuple[type[Exception], ...]:
    """Errors that end one chat turn but not the chat: the model failed, the thread is another user's or busy."""
    from graph.api import ThreadBusyError
    from models.errors import ModelError
    from stores.threads import ThreadOwnershipError

    return (ModelError, ThreadOwnershipError, ThreadBusyError)


def fatal_errors() -> tuple[type[Exception], ...]:
    """Errors that end any command with one line: a store lost mid-command, a knowledge base another
    embedder built, a setting that cannot be used. Resolved on demand like :func:`user_errors`."""
    from nodes.settings import ConfigError
    from stores.base import StoreUnavailableError
    from stores.chroma import EmbeddingMismatchError
    from tools.mcp_config import MCPConfigError

    return (StoreUnavailableError, EmbeddingMismatchError, ConfigError, MCPConfigError)


def fail(message: str, code: int = 1) -> None:
    err.print(f"[red]error:[/red] {shown(message)}", soft_wrap=True)
    raise typer.Exit(code)


def failure_line(exc: BaseException) -> str | None:
    """The one line for an error a user can meet, or None for a bug (which keeps its traceback).

    A store's failure is named by :func:`stores.faults.store_failure`, which knows a full disk under a
    store's error; the other errors users cause say what to do themselves."""
    import click

    if isinstance(exc, click.exceptions.Exit | click.exceptions.Abort):
        return None
    from stores.base import StoreUnavailableError

    if isinstance(exc, user_errors() + fatal_errors()) and not isinstance(exc, StoreUnavailableError):
        return str(exc)
    return store_failure(exc, _data_dir())


def fail_on_known(exc: Exception) -> None:
    """One line and exit 1 when ``exc`` is an error a user can meet; otherwise return (the caller re-raises)."""
    if line := failure_line(exc):
        fail(line)


def approval_prompt(console: Console) -> Any:
    """Ask y/N for a paused high-impact call (an interrupt payload) and build the resume value."""

    def approve(payload: dict[str, Any]) -> dict[str, Any]:
        if payload.get("error"):
            console.print(f"[yellow]{shown(str(payload['error']))}[/yellow]")
        console.print(f"[bold yellow]approval needed[/bold yellow]: {shown(str(payload.get('description')))}")
        # The decision names the call shown, so it cannot apply to another one put in its place.
        shown_call = {k: payload[k] for k in ("call_id", "digest") if isinstance(payload.get(k), str)}
        try:
            yes = typer.confirm("Approve this call?", default=False, err=True)
        except typer.Abort:
            return {"approved": False, "reason": "no answer was given", **shown_call}
        if yes:
            return {"approved": True, "reason": "approved at the terminal", **shown_call}
        return {"approved": False, **shown_call}

    return approve


def _pending_line(answer: Answer) -> None:
    """The line under an answer when high-risk memories wait for the user to confirm them."""
    if answer.pending_memories:
        n = answer.pending_memories
        err.print(
            f"[yellow]{n} memor{'y waits' if n == 1 else 'ies wait'} for your confirmation "
            "(health, finances or identity): kb-agent memories pending[/yellow]"
        )


def _setup(verbose: bool) -> None:
    logging.getLogger().setLevel(logging.INFO if verbose else logging.WARNING)


class StoreFailuresHeld(logging.Filter):
    """Store failures logged on the way (a search that went on without its feedback, a turn's undo that
    failed, a memory not saved) are held back from stderr: when the command then fails, its one line
    already says which store failed and what to do. When it finishes anyway, the first is its one line,
    no traceback, and it exits 1: something it was asked to do was not done."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:  # or named in the message: "could not purge expired memories: %s"
            args = record.args if isinstance(record.args, tuple) else ()
            exc = next((arg for arg in args if isinstance(arg, BaseException)), None)
        if exc is None:
            return True
        if isinstance(exc, KeyboardInterrupt) and signals.stopped():
            return False  # the stop line says it
        try:
            line = store_failure(exc, _data_dir())
        except Exception:
            line = None
        if line is None:
            return True
        said = record.getMessage()
        self.held.append(said if line in said else f"{said}: {line}")
        return False

    def show(self) -> bool:
        """One line for what failed on the way, if anything did (the first; how many more); whether any."""
        if not self.held:
            return False
        first, more = self.held[0], len(dict.fromkeys(self.held)) - 1
        also = f" (and {more} more store failure{'s' if more > 1 else ''})" if more else ""
        err.print(f"[red]error:[/red] {shown(first)}{also}", soft_wrap=True)
        self.held.clear()
        return True


def _log_to_stderr() -> StoreFailuresHeld:
    """Warnings and errors on stderr, store failures held back (:class:`StoreFailuresHeld`)."""
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    held = StoreFailuresHeld()
    for handler in logging.getLogger().handlers:
        handler.addFilter(held)
    return held


def _context(user: str | None, *, offline: bool = False) -> Settings:
    """The operator's settings, for ``user``; ``offline`` forces the offline model (``--demo``)."""
    from nodes.settings import Settings

    ctx = Settings()
    changes = {**({"user_id": user} if user else {}), **({"model": "offline"} if offline else {})}
    return ctx.replace(**changes)


def _agent(user: str | None, *, offline: bool = False) -> Any:
    """The agent for ``user``, opened for one command (a context manager that closes its services)."""
    from graph.api import open_agent

    return open_agent(_context(user, offline=offline))


def _trace_memories_written(agent: Agent, since: str) -> None:
    """After a traced turn: wait for its background extraction, then show what it wrote or refused."""
    memory = agent.memory
    store = getattr(memory, "store", None)
    if memory is None or store is None or not memory.drain(10):
        return
    entries = [e for e in store.audit.list(user_id=agent.context.user_id, limit=50) if e.created_at >= since]
    print_memories_written(err, list(reversed(entries)))


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question, e.g. '计算 123 × 456'."),
    thread: str | None = typer.Option(
        None, "--thread", "-t", help="Continue this thread (default: a new one)."
    ),
    user: str | None = typer.Option(None, "--user", "-u", help="Who is asking (default: KB_AGENT_USER_ID)."),
    as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON."),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        "--trace",
        help="Trace each step live on stderr: rounds, tools, passages, memories.",
    ),
    offline: bool = typer.Option(
        False, "--offline", "--demo", help="Use the offline model whatever is configured."
    ),
) -> None:
    """Ask one question and print the answer."""
    _setup(False)
    if not question.strip():
        fail("the question is empty: type what you want to ask", 2)
    status = tool_status_printer(err)
    try:
        with _agent(user, offline=offline) as agent:
            started = datetime.now(UTC).isoformat(timespec="microseconds")
            answer = agent.ask(
                question,
                thread_id=thread or f"ask-{uuid.uuid4().hex[:12]}",
                on_event=None if as_json else (trace_printer(err, status) if verbose else status),
                approve=approval_prompt(err),
            )
            if verbose and not as_json:
                _trace_memories_written(agent, started)
    except Exception as exc:
        fail_on_known(exc)
        raise
    if as_json:
        typer.echo(json_text(answer.as_dict()))
    else:
        out.print(shown(answer.text))
        _pending_line(answer)
    if answer.stop_reason not in (None, "empty_question"):
        raise typer.Exit(3)


@app.command()
def chat(
    thread: str = typer.Option("default", "--thread", "-t", help="Thread to continue."),
    user: str | None = typer.Option(None, "--user", "-u", help="Who is chatting."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each step to stderr."),
    trace: bool = typer.Option(
        False, "--trace", help="Trace each step live: rounds, tools, passages, memories."
    ),
    offline: bool = typer.Option(
        False, "--offline", "--demo", help="Use the offline model whatever is configured."
    ),
) -> None:
    """Chat in a REPL; the thread is kept across restarts."""
    _setup(verbose)
    state = {"thread": thread}
    status = tool_status_printer(out)
    on_event = trace_printer(out, status) if trace else status
    try:
        with _agent(user, offline=offline) as agent:
            model = agent.context.model_name
            out.print(f"[dim]kb-agent · model {model} · thread {thread} · {CHAT_HELP}[/dim]")
            if agent.context.uses_offline_model:  # the operator's hint; the model's own replies name no setting
                out.print("[dim]offline demo model: KB_AGENT_BASE_URL, KB_AGENT_API_KEY and KB_AGENT_MODEL connect a real one[/dim]")
            _lenient_stdin()
            signals.on_stop(
                lambda: f"stopped: kb-agent chat ended; thread {state['thread']!r} keeps every answered turn "
                "(a question still being answered is not kept)"
            )
            while True:
                try:
                    line = input("› ").strip()
                except EOFError:  # end of input: how a chat ends
                    out.print()
                    break
                except KeyboardInterrupt:  # Ctrl-C or SIGTERM at the prompt: stopped like any command
                    out.print()
                    raise
                if bad := undecodable(line):
                    err.print(
                        f"[red]error:[/red] that line is not valid UTF-8 (bytes {shown(bad)}): not sent"
                    )
                    continue
                if not line:
                    continue
                if line.startswith("/"):
                    if not chat_command(agent, line, state):
                        break
                    continue
                started = datetime.now(UTC).isoformat(timespec="microseconds")
                try:
                    answer = agent.ask(
                        line,
                        thread_id=state["thread"],
                        on_event=on_event,
                        approve=approval_prompt(out),
                    )
                except turn_errors() as exc:
                    err.print(f"[red]error:[/red] {shown(str(exc))}")
                    continue
                except Exception as exc:  # a store failed: this question is not kept, the chat goes on
                    if not (failed := store_failure(exc, agent.context.data_dir)):
                        raise
                    err.print(f"[red]error:[/red] {shown(failed)}", soft_wrap=True)
                    continue
                out.print(shown(answer.text))
                _pending_line(answer)
                if trace:
                    _trace_memories_written(agent, started)
    except user_errors() as exc:
        fail(str(exc))


def _lenient_stdin() -> None:
    """Read stdin with surrogate escapes, so a line that is not UTF-8 is refused instead of ending the chat."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="surrogateescape")


threads_app = typer.Typer(no_args_is_help=True, help="Your threads: list them, show one, clear one.")
app.add_typer(threads_app, name="threads")


@threads_app.command("list")
def threads_list(
    user: str | None = typer.Option(None, "--user", "-u", help="Whose threads (default: KB_AGENT_USER_ID)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Your threads with their titles, most recently active first."""
    try:
        with _agent(user) as agent:
            rows = agent.threads()
    except user_errors() as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json_text([r.__dict__ for r in rows]))
        return
    table = Table("thread", "title", "created", "last activity")
    for r in rows:
        table.add_row(r.thread_id, shown(r.title), r.created_at, r.last_activity)
    out.print(table)


@threads_app.command("history")
def threads_history(
    thread: str = typer.Argument(..., help="The thread id."),
    user: str | None = typer.Option(None, "--user", "-u", help="Who is asking."),
    include_folded: bool = typer.Option(False, "--all", help="Every message, folded ones included."),
) -> None:
    """Show a thread: its summary and recent rounds, or every message with --all."""
    try:
        with _agent(user) as agent:
            print_history(agent, thread, include_folded)
    except user_errors() as exc:
        fail(str(exc))


@threads_app.command("clear")
def threads_clear(
    thread: str = typer.Argument(..., help="The thread id."),
    user: str | None = typer.Option(None, "--user", "-u", help="Who is asking."),
) -> None:
    """Delete one of your threads (its messages, summary and checkpoints)."""
    try:
        with _agent(user) as agent:
            agent.clear(thread)
    except user_errors() as exc:
        fail(str(exc))
    out.print(f"[dim]thread {thread} cleared[/dim]")


@threads_app.command("prune")
def threads_prune(
    thread: str = typer.Argument(..., help="The thread id."),
    user: str | None = typer.Option(None, "--user", "-u", help="Who is asking."),
    keep: int = typer.Option(1, "--keep", min=1, help="Most recent checkpoints kept whatever they hold."),
) -> None:
    """Shrink a thread's checkpoints; every message stays readable (``threads history --all``)."""
    try:
        with _agent(user) as agent:
            report = agent.prune(thread, keep_recent=keep)
    except user_errors() as exc:
        fail(str(exc))
    out.print(f"thread {thread}: {report.deleted} checkpoints deleted, {report.kept} kept")


@app.command("config")
def show_config(
    as_json: bool = typer.Option(False, "--json", help='{"KB_AGENT_…": {"value": …, "source": …}} instead.'),
) -> None:
    """Show every setting in force: its variable, value, where it came from, and what it means."""
    from nodes.settings import ConfigError, Settings, effective_table

    try:
        rows = effective_table(Settings())
    except ConfigError as exc:
        fail(str(exc))
        return
    if as_json:
        typer.echo(json_text({env: {"value": value, "source": source} for _s, env, value, source, _t in rows}))
        return
    table = Table("variable", "value", "source", "meaning")
    table.columns[0].no_wrap = True
    section = None
    for heading, env, value, source, description in rows:
        if heading != section:
            if section is not None:
                table.add_section()
            section = heading
            table.add_row(f"[bold]{heading}[/bold]", "", "", "")
        table.add_row(env, _config_value(value), source, description)
    out.print(table)


def _config_value(value: Any) -> str:
    return '""' if value == "" else str(value)


kb_cli.register(app)
app.command("eval")(kb_eval.evaluate)
memory_cli.register(app)
serve_cli.register(app)
app.add_typer(tools_app, name="tools")
app.add_typer(feedback_app, name="feedback")
app.add_typer(trash_app, name="trash")
app.add_typer(documents_app, name="documents")


def refuse_undecodable(args: list[str]) -> None:
    """An argument that is not UTF-8 (raw bytes from the shell) is one line and exit 2, before anything opens.

    ``ingest`` is left alone: any bytes make a valid path, and the loader reports such a file by itself.
    """
    if args[:1] == ["ingest"]:
        return
    for n, arg in enumerate(args, 1):
        if bad := undecodable(arg):
            err.print(
                f"[red]error:[/red] argument {n} is not valid UTF-8 (bytes {shown(bad)}): "
                "retype it, or set the terminal to UTF-8",
                soft_wrap=True,
            )
            raise SystemExit(2)


def main() -> None:
    refuse_undecodable(sys.argv[1:])
    # SIGTERM (a service manager, ``kill``) and Ctrl-C end a command in one line and exit 130, within
    # seconds whatever it waits on; a turn is rolled back, never half saved.
    signals.install()
    from models.stopping import make_interruptible

    make_interruptible()
    held = _log_to_stderr()
    try:
        app()
    except SystemExit as done:
        if signals.stopped() and done.code == signals.STOPPED:
            signals.say_stopped()
        elif done.code in (0, None) and held.show():
            sys.exit(1)
        raise
    except KeyboardInterrupt:
        signals.say_stopped()
        sys.exit(signals.STOPPED)
    except Exception as exc:  # not ``except fatal_errors()``: that would be resolved for every SystemExit
        # a store lost, locked or full mid-command, a data folder that cannot be written, a damaged
        # database, a knowledge base another embedder built, a setting that cannot be used: one line that
        # names it and what to do, never a traceback
        if line := failure_line(exc):
            err.print(f"[red]error:[/red] {shown(line)}", soft_wrap=True)
            sys.exit(1)
        raise


def _data_dir() -> str:
    from nodes.settings import ConfigError, Settings

    try:
        return str(Settings.current().data_dir)
    except ConfigError:
        return "the data folder"


if __name__ == "__main__":
    main()
