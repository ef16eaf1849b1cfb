"""A Chroma server or a Postgres lost mid-command: one line naming it and what to do, exit 1, and the next
command works once it is back.

"Lost" is a loopback proxy cut at a chosen reply of the server (tests/fixtures/cutting_proxy.py), so the cut
lands inside the command, not before it; the Chroma server is one of this module's own, and Postgres is a
database of this module's own on KB_TEST_POSTGRES_URL (the machine's server is never stopped). One test
kills its own ``chroma run`` outright during an ingest and starts it again.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.fixtures.cutting_proxy import HTTP_REPLY, POSTGRES_READY, CuttingProxy
from tests.integration.test_store_faults import _cli, _documents, _lines, _start

POSTGRES_URL = os.environ.get("KB_TEST_POSTGRES_URL", "")


def _one_line(done: subprocess.CompletedProcess[str], *names: str) -> str:
    lines = _lines(done.stderr)
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, (done.returncode, done.stderr)
    assert lines[0].startswith("error: ") and all(name in lines[0] for name in names), lines[0]
    return lines[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ChromaServer:
    """A ``chroma run`` of this module's own, which a test may kill and start again on the same port."""

    def __init__(self, path: Path) -> None:
        binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
        if not Path(binary).exists():
            pytest.skip("the chroma CLI is not installed: the Chroma-server tests need `chroma run`")
        self.binary, self.path, self.port = binary, path, _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip(f"chroma run did not start (exit {self.proc.poll()})")
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = ChromaServer(tmp_path_factory.mktemp("chroma-faults"))
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def chroma_home(chroma: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder whose knowledge base and memories live on the module's Chroma server."""
    home = tmp_path_factory.mktemp("chroma-home") / "home"
    docs = _documents(home.parent / "docs", 5, 300)
    for args in (["ingest", str(docs)], ["ask", "what is in doc 1?", "-t", "t1"]):
        done = _cli(home, *args, KB_AGENT_CHROMA_URL=chroma.url)
        assert done.returncode == 0, done.stderr
    return home


def _replies(upstream: tuple[str, int], marker: bytes, home: Path, setting: str, url: str, *args: str) -> int:
    """How many replies the command takes from its server when nothing fails."""
    counting = CuttingProxy(upstream, marker=marker)
    done = _cli(home, *args, **{setting: _via(url, counting)})
    counting.close()
    assert done.returncode == 0, done.stderr
    return counting.replies


def _via(url: str, proxy: CuttingProxy) -> str:
    parts = urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}{proxy.url_host}"))


@pytest.mark.parametrize("args", [["search", "abc"], ["ask", "what is in doc 2?", "-t", "t2"]])
def test_a_chroma_server_lost_mid_command_is_one_line_and_the_next_command_works(
    chroma: ChromaServer, chroma_home: Path, args: list[str]
) -> None:
    """It was a 300-500-line traceback (httpx's ConnectError through Chroma's client)."""
    upstream = ("127.0.0.1", chroma.port)
    total = _replies(upstream, HTTP_REPLY, chroma_home, "KB_AGENT_CHROMA_URL", chroma.url, *args)
    for cut in sorted({2, total // 2, total}):
        proxy = CuttingProxy(upstream, marker=HTTP_REPLY, cut_after=cut)
        url = _via(chroma.url, proxy)
        line = _one_line(_cli(chroma_home, *args, KB_AGENT_CHROMA_URL=url), "KB_AGENT_CHROMA_URL", url)
        assert "chroma run" in line, line
        proxy.reopen()
        again = _cli(chroma_home, *args, KB_AGENT_CHROMA_URL=url)
        proxy.close()
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr


def test_a_chroma_server_killed_during_ingest_is_one_line_and_a_rerun_finishes(
    chroma: ChromaServer, chroma_home: Path, tmp_path: Path
) -> None:
    docs = _documents(tmp_path / "more", 150, 1500)
    server_db = chroma.path / "chroma.sqlite3"
    before = server_db.stat().st_size
    proc = _start(chroma_home, "ingest", str(docs), KB_AGENT_CHROMA_URL=chroma.url)
    deadline = time.monotonic() + 120
    while server_db.stat().st_size < before + 500_000:  # the ingest's chunks are arriving
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    chroma.kill()
    _, err = proc.communicate(timeout=120)
    lines = _lines(err)
    try:
        assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in err, (proc.returncode, err)
        assert "KB_AGENT_CHROMA_URL" in lines[0] and chroma.url in lines[0], lines[0]
    finally:
        chroma.start()
    again = _cli(chroma_home, "ingest", "--json", str(docs), KB_AGENT_CHROMA_URL=chroma.url)
    assert again.returncode == 0, again.stderr
    assert _cli(chroma_home, "search", "abc", KB_AGENT_CHROMA_URL=chroma.url).returncode == 0


def test_sigterm_on_a_chroma_server_that_stopped_answering_is_one_line(chroma: ChromaServer, chroma_home: Path) -> None:
    proxy = CuttingProxy(("127.0.0.1", chroma.port), marker=HTTP_REPLY, cut_after=4, then="hang")
    proc = _start(chroma_home, "search", "abc", KB_AGENT_CHROMA_URL=_via(chroma.url, proxy))
    assert proxy.broken.wait(60), proc.communicate()
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, err = proc.communicate(timeout=60)
    proxy.close()
    assert proc.returncode == 130 and len(_lines(err)) == 1 and time.monotonic() - started < 5, err


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """A database of this module's own on KB_TEST_POSTGRES_URL, dropped at the end."""
    if not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    import psycopg

    name = f"kbagent_faults_{os.getpid()}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as exc:
        pytest.skip(f"cannot create a test database on KB_TEST_POSTGRES_URL: {exc}")
    try:
        yield urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("setting", "args"),
    [
        ("KB_AGENT_DATABASE_URL", ["memories", "list"]),
        ("KB_AGENT_DATABASE_URL", ["ask", "what do I prefer?"]),
        ("KB_AGENT_CHECKPOINT_URL", ["ask", "what do I prefer?"]),
    ],
)
def test_a_postgres_lost_mid_command_is_one_line(
    postgres_url: str, tmp_path: Path, setting: str, args: list[str]
) -> None:
    """Each cut a fresh thread, so no turn undone from the last cut speaks up."""
    home = tmp_path / "home"
    upstream = (urlsplit(postgres_url).hostname or "127.0.0.1", urlsplit(postgres_url).port or 5432)
    thread = iter(range(100))
    command = (lambda: [*args, "-t", f"p{next(thread)}"]) if args[0] == "ask" else (lambda: args)
    total = _replies(upstream, POSTGRES_READY, home, setting, postgres_url, *command())
    for cut in sorted({1, total // 3, 2 * total // 3}):  # the last reply may be a lock let go, which no one needs
        proxy = CuttingProxy(upstream, marker=POSTGRES_READY, cut_after=cut)
        started = time.monotonic()
        done = _cli(home, *command(), **{setting: _via(postgres_url, proxy)})
        proxy.close()
        line = _one_line(done, setting, f"127.0.0.1:{proxy.port}")
        assert "Postgres" in line and time.monotonic() - started < 45, (cut, line)  # the pool waits 10 s at most


def test_a_postgres_where_nothing_listens_is_one_line(tmp_path: Path) -> None:
    url = f"postgresql://u:p@127.0.0.1:{_free_port()}/db"
    for setting in ("KB_AGENT_DATABASE_URL", "KB_AGENT_CHECKPOINT_URL"):
        line = _one_line(_cli(tmp_path / "home", "ask", "hello", **{setting: url}), setting)
        assert "Connection refused" in line and "u:p" not in line, line
