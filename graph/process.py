"""Process-wide tuning the composition root applies once, before the services start their threads.

glibc gives each thread that allocates its own malloc arena, up to eight per core, and an arena keeps the
memory its thread freed. A deployment's work hops between many threads (worker pools, the memory updater,
model-call watchdogs) while the embedder and Chroma allocate and free large native buffers, so each arena
settles at its own high-water mark and a long-running process grew by 0.2–0.5 MB a turn with nothing
leaked. Two arenas keep that flat (bench/long_thread.py). An operator who sets ``MALLOC_ARENA_MAX`` keeps
their own value: glibc read it at start-up and it is left alone.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger("kb_agent.process")

M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2
_applied: bool | None = None


def _glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a GNU system
        return False


def limit_malloc_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``arenas`` for this process, once; True when the cap is in force.

    Nothing is done where ``MALLOC_ARENA_MAX`` is set (the operator's value) or the C library is not glibc.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if os.environ.get("MALLOC_ARENA_MAX") or not _glibc():
        return False
    try:
        _applied = bool(ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas))
    except (OSError, AttributeError) as exc:  # no mallopt: the allocator's defaults stay
        log.debug("malloc arenas left as they are: %s", exc)
    return _applied


def arenas_capped() -> bool:
    """Whether this process runs with the cap (False before :func:`limit_malloc_arenas` has run)."""
    return bool(_applied)
