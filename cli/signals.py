"""How a ``kb-agent`` command ends on SIGTERM or Ctrl-C: one line, exit 130, within seconds, whatever it waits on.

The signal raises KeyboardInterrupt in the main thread, so the command unwinds as on Ctrl-C: a turn is
rolled back, an ingest keeps the files it finished. But Python runs that handler only between bytecodes,
and a store can hold the main thread inside C for far longer: SQLite's busy wait (up to its busy timeout),
embedded Chroma waiting on a lock another process holds (no timeout at all). So the signal also wakes a
watcher thread (through ``signal.set_wakeup_fd``, written by the C-level handler at once): if the command
has not ended :data:`GRACE_SECONDS` later, or a second signal comes, it writes the command's stop line and
ends the process. What that cuts short is what ``kill -9`` would: every store here survives that (SQLite's
journal, the turn marker undone at the thread's next open, ``kb-agent repair`` after an ingest).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

STOPPED = 130  # the exit code of a stopped command, SIGTERM or Ctrl-C (as a stopped ingest always had)
GRACE_SECONDS = 3.0  # for the command to unwind by itself before the watcher ends it
_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}

_lock = threading.Lock()
_said = threading.Event()
_received: list[int] = []
_line: list[Callable[[], str]] = []


def install() -> None:
    """SIGTERM and Ctrl-C stop the command (before it runs; signals reach only the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    threading.Thread(target=_watch, args=(reader, writer), name="kb-agent-stop", daemon=True).start()


def on_stop(line: Callable[[], str]) -> None:
    """The command's own stop line (read when it stops: it can count what was kept by then)."""
    _line[:] = [line]


def stopped() -> bool:
    """Whether a stop signal came."""
    return bool(_received)


def say_stopped() -> None:
    """Print the stop line on stderr, once (the command's own, or one that names the command)."""
    with _lock:
        if _said.is_set():
            return
        _said.set()
        text = _stop_line()
    with contextlib.suppress(OSError):  # stderr closed: the exit code still says it
        os.write(2, (text + "\n").encode("utf-8", "replace"))


def _stop_line() -> str:
    if _line:
        try:
            return _line[0]()
        except Exception:  # the report it counts was mid-update: the plain line then
            pass
    command = " ".join(arg for arg in sys.argv[1:3] if not arg.startswith("-"))[:60] or "the command"
    how = _NAMES.get(signal.Signals(_received[0]), "a signal") if _received else "a signal"
    return (
        f"stopped by {how}: kb-agent {command} did not finish, and what it had not finished was not kept: "
        "run it again"
    )


def _interrupt(signum: int, _frame: Any) -> None:
    from models.stopping import stop_waiting

    if not _received:
        _received.append(signum)
    stop_waiting()  # a model call in a worker thread gives up too, so the command unwinds now
    raise KeyboardInterrupt(f"signal {signum}")


def _watch(reader: socket.socket, writer: socket.socket) -> None:
    stops = 0
    while True:
        reader.settimeout(GRACE_SECONDS if stops else None)
        try:
            data = reader.recv(64)
        except TimeoutError:
            break  # the grace is over: the command is stuck where no signal reaches it
        except OSError:
            return
        got = [n for n in data if n in _NAMES]
        if not got:
            continue
        if not _received:
            _received.append(got[0])
        stops += len(got)
        if stops > 1:
            break  # asked twice: now
    say_stopped()
    os._exit(STOPPED)
