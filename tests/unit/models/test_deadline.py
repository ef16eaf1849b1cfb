"""models/deadline.py: a blocking model call stops at its deadline, and at once when the process is being
stopped (Ctrl-C, SIGTERM), so a turn rolls back instead of waiting for a model that may take minutes."""

from __future__ import annotations

import threading
import time

import pytest

from models import stopping
from models.deadline import ModelTimeout, call_with_deadline


@pytest.fixture(autouse=True)
def fresh_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "_STOPPING", threading.Event())
    monkeypatch.setattr(stopping, "_INTERRUPTIBLE", threading.Event())


def test_an_answer_in_time_is_returned_and_a_late_one_is_a_timeout() -> None:
    assert call_with_deadline(lambda: 42, 5) == 42
    with pytest.raises(ModelTimeout, match=r"the summary model did not answer within 0\.2 s"):
        call_with_deadline(lambda: time.sleep(5), 0.2, what="the summary model")


def test_an_error_of_the_call_is_raised_in_the_callers_thread() -> None:
    def broken() -> None:
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        call_with_deadline(broken, 5)


def test_a_stopping_process_gives_up_the_call_in_flight_at_once() -> None:
    threading.Timer(0.3, stopping.stop_waiting).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="stopping"):
        call_with_deadline(lambda: time.sleep(30), 60)
    assert time.monotonic() - started < 5  # not the 30 s the model would take
    with pytest.raises(KeyboardInterrupt):  # and starts no other
        call_with_deadline(lambda: 1, 60)


def test_only_the_command_line_makes_every_call_interruptible() -> None:
    assert not stopping.interruptible()
    stopping.make_interruptible()
    assert stopping.interruptible()
