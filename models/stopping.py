"""Whether this process is being stopped, and whether its model calls may be given up (no heavy imports:
the command line sets these before anything else loads)."""

from __future__ import annotations

import threading

_STOPPING = threading.Event()
_INTERRUPTIBLE = threading.Event()
POLL_SECONDS = 0.1  # how often a waiting model call looks at whether the process is being stopped


def make_interruptible() -> None:
    """This process is stopped by signals (the command line): every blocking model call then runs where
    waiting for it can be given up, even one whose client timeout fits the turn."""
    _INTERRUPTIBLE.set()


def interruptible() -> bool:
    return _INTERRUPTIBLE.is_set()


def stop_waiting() -> None:
    """The process is being stopped: every blocking model call stops waiting now (KeyboardInterrupt in
    its thread) and from now on, so the run unwinds as it would on Ctrl-C in the main thread."""
    _STOPPING.set()


def stopping() -> bool:
    """Whether :func:`stop_waiting` was called."""
    return _STOPPING.is_set()
