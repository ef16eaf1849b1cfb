"""Suite-wide rules: no real network, no settings leaking in from the developer's shell."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> None:
    """Refuse connections to anything but loopback or a Unix socket: tests must never reach the network."""
    if isinstance(address, tuple) and address:
        host = str(address[0])
        try:
            allowed = ipaddress.ip_address(host).is_loopback
        except ValueError:
            allowed = host == "localhost"
        if not allowed:
            raise OSError(f"network access to {host} is forbidden in the test suite")
    _real_connect(self, address)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("KB_AGENT_") or name in {"OPENAI_API_KEY", "OPENAI_BASE_URL"}:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KB_AGENT_HOME", str(tmp_path / "kb-home"))
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    from models.tokens import calibration

    calibration.reset()  # what one test's endpoint reported must not shape another's budget
    yield
