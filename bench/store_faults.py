"""Store faults against the real ``kb-agent`` CLI: does each end in one line, with the right exit code, in time?

    python bench/store_faults.py [--root REPO] [--only sigterm,deadline,disk,chroma,postgres] [--json out.json]

Each fault is tried on a fresh process of ``python -m cli`` (run from ``--root``, default this repository, so
an older checkout can be measured the same way) and judged on three things: exactly one non-empty line on
stderr and no traceback, the exit code (130 for a stop, 1 for a store failure), and the seconds from the
fault (or the signal) to the exit. The faults:

- **sigterm**: SIGTERM mid-way through ``ingest`` of a large folder, ``ask`` (in a slow model call, and
  waiting on a locked threads database), ``search`` / ``memories list`` / ``repair`` waiting on a locked
  embedded Chroma database, ``search`` on a Chroma server that stopped answering, ``memories list`` on a
  Postgres that stopped answering. Held: exit 130 within 5 s, one line.
- **deadline**: the same waits with no signal: each must end on its own, in one line, exit 1.
- **disk**: ``ask`` on a tmpfs with 0 KiB to 1 MiB left (root only). Held: one line, exit 1, the thread's
  history unchanged.
- **chroma**: a ``chroma run`` server of its own behind a proxy that is cut at reply N of ``search``, ``ask``
  and ``ingest`` (N swept over the replies the command needs), then reopened: held when the cut command is
  one line, exit 1, and the same command works once the server is back.
- **postgres**: a database of its own on ``KB_TEST_POSTGRES_URL``, behind a proxy cut at reply N of
  ``memories list`` and ``ask``; and ``ask`` pointed at a port where nothing listens.

Everything runs on loopback; every wait is bounded. Results: bench/README.md, section "store_faults.py".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
from tests.fixtures.cutting_proxy import HTTP_REPLY, POSTGRES_READY, CuttingProxy  # noqa: E402

STOP_LIMIT = 5.0  # seconds from SIGTERM to exit
ROOT = HERE


@dataclass
class Trial:
    fault: str
    command: str
    exit_code: int | None
    lines: int
    traceback: bool
    seconds: float
    expected_code: int
    limit: float
    last_line: str
    extra_ok: bool = True

    @property
    def held(self) -> bool:
        return (
            self.exit_code == self.expected_code
            and self.lines == 1
            and not self.traceback
            and self.seconds <= self.limit
            and self.extra_ok
        )


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_AGENT_")}
    env.update(
        KB_AGENT_HOME=str(home), KB_AGENT_EMBEDDER="hashing", NO_COLOR="1", COLUMNS="300", PYTHONPATH=str(ROOT)
    )
    env.update(extra)
    return env


def _start(home: Path, *args: str, module: str = "cli", **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=_env(home, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def cli(home: Path, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=_env(home, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _judge(
    fault: str, command: str, code: int | None, stderr: str, seconds: float, expected: int, limit: float
) -> Trial:
    lines = [line for line in stderr.splitlines() if line.strip()]
    trial = Trial(
        fault, command, code, len(lines), "Traceback" in stderr, round(seconds, 2), expected, limit,
        (lines[-1] if lines else "")[:240],
    )  # fmt: skip
    return trial


class Trials(list[Trial]):
    """Trials, each printed as it is added (after its last check)."""

    def append(self, trial: Trial) -> None:
        report(trial)
        super().append(trial)


def report(trial: Trial) -> Trial:
    if trial.exit_code == 0 and trial.lines == 0 and "lost at reply" in trial.fault:
        trial.fault += " (unneeded)"  # the cut reply was one the command did not need (a lock let go)
    if trial.fault.endswith("(unneeded)"):
        trial.extra_ok = False  # not a fault that happened: counted apart, never as held
    print(f"{'held  ' if trial.held else 'unneed' if trial.fault.endswith('(unneeded)') else 'FAILED'} {trial.fault:<44} {trial.command:<22} exit {trial.exit_code} "
          f"lines {trial.lines} {trial.seconds:6.2f}s  {trial.last_line[:150]}", flush=True)  # fmt: skip
    return trial


def _finish(proc: subprocess.Popen[str], wait: float) -> tuple[int | None, str, float]:
    """Wait up to ``wait`` s for ``proc``; kill it past that. Its code (None if killed), stderr, seconds."""
    started = time.monotonic()
    try:
        _, err = proc.communicate(timeout=wait)
        return proc.returncode, err, time.monotonic() - started
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        return None, err, time.monotonic() - started


def _wait_for(check: Callable[[], bool], limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the command never reached the point to break it at")
        time.sleep(0.05)


def sigterm_trial(
    fault: str, command: str, proc: subprocess.Popen[str], ready: Callable[[], bool], settle: float = 1.0
) -> Trial:
    """SIGTERM ``proc`` once ``ready()`` (plus ``settle`` s, so it is waiting inside the fault), then judge."""
    _wait_for(lambda: ready() or proc.poll() is not None)
    time.sleep(settle)
    if proc.poll() is not None:  # it ended before it could be stopped: not a stop at all
        code, err, _ = _finish(proc, 1)
        return _judge(fault, command + " (ended first)", code, err, 0.0, 130, STOP_LIMIT)
    proc.send_signal(signal.SIGTERM)
    code, err, seconds = _finish(proc, 60)
    return _judge(fault, command, code, err, seconds, 130, STOP_LIMIT)


@contextmanager
def locked(db: Path) -> Iterator[None]:
    """Another process's write transaction on ``db`` (as an ingest stopped mid-write would hold)."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3,sys,time\n"
         f"c=sqlite3.connect({str(db)!r},isolation_level=None);c.execute('BEGIN EXCLUSIVE')\n"
         "print('locked',flush=True);time.sleep(600)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    try:
        yield
    finally:
        holder.kill()
        holder.wait()


def make_docs(folder: Path, files: int = 300, words: int = 3000, seed: int = 1, prefix: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
    for i in range(files):
        (folder / f"{prefix}d{i}.md").write_text(f"# Doc {i}\n\n" + " ".join(rng.choice(vocab) for _ in range(words)))
    return folder


def used_home(work: Path, docs: Path, **env: str) -> Path:
    home = work / f"home-{len(list(work.glob('home-*')))}"
    for args in (["ingest", str(docs)], ["ask", "what is in doc 5?", "-t", "t1"], ["memories", "add", "I prefer tea"]):
        done = cli(home, *args, **env)
        if done.returncode != 0:
            raise RuntimeError(f"setting up {home}: {args}: {done.stderr[-2000:]}")
    return home


# -- the faults -------------------------------------------------------------------------------------------
def sigterm_faults(work: Path, big: Path, home: Path, chroma_url: str, postgres_url: str) -> list[Trial]:
    trials = Trials()
    fresh = work / "fresh-ingest"
    proc = _start(fresh, "ingest", str(big))
    chroma_db = fresh / "chroma" / "chroma.sqlite3"
    trials.append(sigterm_trial("SIGTERM mid-ingest (large folder)", "ingest", proc,
                                lambda: chroma_db.exists() and chroma_db.stat().st_size > 1_000_000, 0.5))  # fmt: skip
    proc = _start(home, "ask", "what is in doc 7?", "-t", "t2", module="tests.fixtures.slow_cli",
                  KB_TEST_MODEL_DELAY="30")  # fmt: skip
    seen: list[str] = []
    trials.append(sigterm_trial("SIGTERM in a slow model call", "ask", proc, _line_seen(proc, "model-step 1", seen)))
    with locked(home / "threads.sqlite"):
        trials.append(sigterm_trial("SIGTERM waiting on a locked threads db", "ask",
                                    _start(home, "ask", "hello", "-t", "t3"), lambda: True, 4.0))  # fmt: skip
    with locked(home / "chroma" / "chroma.sqlite3"):
        for args in (["search", "abc"], ["memories", "list"], ["repair"]):
            trials.append(sigterm_trial("SIGTERM waiting on a locked Chroma db", " ".join(args),
                                        _start(home, *args), lambda: True, 4.0))  # fmt: skip
    if chroma_url:
        shared = used_home(work, big.parent / "few", KB_AGENT_CHROMA_URL=chroma_url)
        upstream = _host_port(chroma_url)
        proxy = CuttingProxy(upstream, marker=HTTP_REPLY, cut_after=4, then="hang")
        proc = _start(shared, "search", "abc", KB_AGENT_CHROMA_URL=f"http://{proxy.url_host}")
        trials.append(sigterm_trial("SIGTERM on a Chroma server that hangs", "search", proc, proxy.broken.is_set))
        proxy.close()
    if postgres_url:
        proxy = CuttingProxy(_host_port(postgres_url), marker=POSTGRES_READY, cut_after=3, then="hang")
        url = _via(postgres_url, proxy)
        proc = _start(home, "memories", "list", KB_AGENT_DATABASE_URL=url)
        trials.append(sigterm_trial("SIGTERM on a Postgres that hangs", "memories list", proc, proxy.broken.is_set))
        proxy.close()
    return trials


def deadline_faults(work: Path, home: Path, chroma_url: str, limit: float = 120) -> list[Trial]:
    trials = Trials()
    with locked(home / "threads.sqlite"):
        trials.append(_timed("a locked threads db, no signal", home, ["ask", "hello", "-t", "t4"], limit))
    with locked(home / "chroma" / "chroma.sqlite3"):
        trials.append(_timed("a locked Chroma db, no signal", home, ["search", "abc"], limit))
    if chroma_url:
        shared = next(iter(sorted(work.glob("home-*"))[1:]), None) or home
        proxy = CuttingProxy(_host_port(chroma_url), marker=HTTP_REPLY, cut_after=4, then="hang")
        trials.append(_timed("a Chroma server that hangs, no signal", shared, ["search", "abc"], limit,
                             KB_AGENT_CHROMA_URL=f"http://{proxy.url_host}"))  # fmt: skip
        proxy.close()
    return trials


def _timed(fault: str, home: Path, args: list[str], limit: float, **env: str) -> Trial:
    proc = _start(home, *args, **env)
    code, err, seconds = _finish(proc, limit + 30)
    return _judge(fault, " ".join(args[:2]), code, err, seconds, 1, limit)


def disk_faults(work: Path) -> list[Trial]:
    if os.geteuid() != 0 or not shutil.which("mount"):
        print("disk: skipped (needs root to mount a tmpfs)")
        return []
    disk = work / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40m", "tmpfs", str(disk)]).returncode != 0:
        print("disk: skipped (cannot mount a tmpfs)")
        return []
    trials = Trials()
    try:
        docs = make_docs(work / "disk-docs", files=3, words=400)
        home = disk / "home"
        for args in (["ingest", str(docs)], ["ask", "what is in doc 1?", "-t", "t1"]):
            assert cli(home, *args).returncode == 0
        for keep in (0, 16 << 10, 64 << 10, 256 << 10, 1 << 20):
            before = cli(home, "threads", "history", "t1", "--all").stdout
            filler = disk / "filler"
            _fill(filler, keep)
            started = time.monotonic()
            done = cli(home, "ask", "Remember that I prefer green tea. What is in doc 2?", "-t", "t1")
            trial = _judge(f"full disk during ask ({keep >> 10} KiB left)", "ask", done.returncode, done.stderr,
                           time.monotonic() - started, 1, 60)  # fmt: skip
            filler.unlink()
            after = cli(home, "threads", "history", "t1", "--all").stdout
            trial.extra_ok = after == before or done.returncode == 0
            if not trial.extra_ok:
                print("       ... the thread's history changed", flush=True)
            if done.returncode == 0:  # the turn fitted in what was left: no fault happened
                trial.fault += " (unneeded)"
            trials.append(trial)
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    return trials


def _fill(filler: Path, keep: int) -> None:
    free = shutil.disk_usage(filler.parent).free
    with filler.open("wb", buffering=0) as fh:
        left = max(0, free - keep)
        while left > 0:
            try:
                left -= fh.write(b"\0" * min(left, 1 << 20))
            except OSError:
                break


def chroma_faults(work: Path, big: Path, chroma_url: str, samples: int) -> list[Trial]:
    trials = Trials()
    upstream = _host_port(chroma_url)
    home = used_home(work, big.parent / "few", KB_AGENT_CHROMA_URL=chroma_url)
    fresh = iter(range(1_000_000))

    def new_docs() -> str:  # an ingest with something to write each time
        n = next(fresh)
        return str(make_docs(work / "docs" / f"new{n}", files=20, words=300, seed=1000 + n, prefix=f"n{n}-"))

    commands: list[Callable[[], list[str]]] = [
        lambda: ["search", "abc"],
        lambda: ["ask", "what is in doc 1?", "-t", f"tc{next(fresh)}"],  # a thread each: see postgres_faults
        lambda: ["ingest", new_docs()],
    ]
    for command in commands:
        counting = CuttingProxy(upstream, marker=HTTP_REPLY)
        done = cli(home, *command(), KB_AGENT_CHROMA_URL=f"http://{counting.url_host}")
        total = counting.replies
        counting.close()
        if done.returncode != 0:
            print(f"chroma: {command()[0]} fails without a fault: {done.stderr[-500:]}")
            continue
        for n in _spread(total, samples):
            args = command()
            proxy = CuttingProxy(upstream, marker=HTTP_REPLY, cut_after=n)
            url = f"http://{proxy.url_host}"
            started = time.monotonic()
            done = cli(home, *args, KB_AGENT_CHROMA_URL=url, timeout=120)
            trial = _judge(f"Chroma server lost at reply {n}/{total}", args[0], done.returncode, done.stderr,
                           time.monotonic() - started, 1, 60)  # fmt: skip
            proxy.reopen()
            again = cli(home, *args, KB_AGENT_CHROMA_URL=url, timeout=120)
            trial.extra_ok = again.returncode == 0
            if not trial.extra_ok:
                print(f"       ... and once it was back: exit {again.returncode} {again.stderr[-300:]}", flush=True)
            proxy.close()
            trials.append(trial)
    return trials


def postgres_faults(work: Path, postgres_url: str, samples: int) -> list[Trial]:
    trials = Trials()
    home = work / "pg-home"
    upstream = _host_port(postgres_url)
    # Each ask on a thread of its own: a turn cut short whose undo could not run (its store was gone) is
    # undone by the thread's next ask, which says so in a warning line of its own.
    threads = iter(range(1_000_000))
    for base in (["memories", "list"], ["ask", "what did I say I prefer?"]):
        for setting in ("KB_AGENT_DATABASE_URL", "KB_AGENT_CHECKPOINT_URL"):
            args = base if base[0] == "memories" else [*base, "-t", f"tp{next(threads)}"]
            if base[0] == "memories" and setting == "KB_AGENT_CHECKPOINT_URL":
                continue  # memories never open the checkpointer
            counting = CuttingProxy(upstream, marker=POSTGRES_READY)
            done = cli(home, *args, **{setting: _via(postgres_url, counting)})
            total = counting.replies
            counting.close()
            if done.returncode != 0:
                print(f"postgres: {args[0]} fails without a fault: {done.stderr[-500:]}")
                continue
            for n in _spread(total, samples):
                args = base if base[0] == "memories" else [*base, "-t", f"tp{next(threads)}"]
                proxy = CuttingProxy(upstream, marker=POSTGRES_READY, cut_after=n)
                started = time.monotonic()
                done = cli(home, *args, timeout=120, **{setting: _via(postgres_url, proxy)})
                trials.append(_judge(f"Postgres ({setting[9:]}) lost at reply {n}/{total}", args[0],
                                     done.returncode, done.stderr, time.monotonic() - started, 1, 60))  # fmt: skip
                proxy.close()
    started = time.monotonic()
    done = cli(home, "ask", "hello", KB_AGENT_CHECKPOINT_URL="postgresql://u:p@127.0.0.1:9/db")
    trials.append(_judge("Postgres: nothing listens", "ask", done.returncode, done.stderr,
                         time.monotonic() - started, 1, 30))  # fmt: skip
    return trials


def _spread(total: int, samples: int) -> list[int]:
    if total <= samples:
        return list(range(1, total + 1))
    return sorted({1 + round(i * (total - 1) / (samples - 1)) for i in range(samples)})


def _line_seen(proc: subprocess.Popen[str], text: str, seen: list[str]) -> Callable[[], bool]:
    import threading

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if text in line:
                return

    threading.Thread(target=read, daemon=True).start()
    return lambda: any(text in line for line in seen)


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or (5432 if parts.scheme.startswith("postgres") else 8000)


def _via(url: str, proxy: CuttingProxy) -> str:
    parts = urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}{proxy.url_host}"))


@contextmanager
def chroma_server(work: Path) -> Iterator[str]:
    import socket

    binary = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(binary).exists():
        yield ""
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "run", "--path", str(work / "chroma-server"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _answers(url), 60)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
        return True
    except OSError:
        return False


@contextmanager
def postgres_database() -> Iterator[str]:
    base = os.environ.get("KB_TEST_POSTGRES_URL", "")
    if not base:
        yield ""
        return
    import psycopg

    name = f"kbagent_faults_{os.getpid()}"
    with psycopg.connect(base, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def main() -> None:
    global ROOT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=HERE, help="the checkout whose CLI is measured")
    parser.add_argument("--only", default="sigterm,deadline,disk,chroma,postgres")
    parser.add_argument("--samples", type=int, default=6, help="cut points per command (server faults)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    ROOT = args.root.resolve()
    only = set(args.only.split(","))
    trials: list[Trial] = []
    with tempfile.TemporaryDirectory(prefix="kb-faults-") as tmp:
        work = Path(tmp)
        big = make_docs(work / "docs" / "big")
        make_docs(work / "docs" / "few", files=5, words=300)
        make_docs(work / "docs" / "some", files=40, words=300)
        with chroma_server(work) as chroma_url, postgres_database() as postgres_url:
            home = used_home(work, big)
            if "sigterm" in only:
                trials += sigterm_faults(work, big, home, chroma_url, postgres_url)
            if "deadline" in only:
                trials += deadline_faults(work, home, chroma_url)
            if "disk" in only:
                trials += disk_faults(work)
            if "chroma" in only and chroma_url:
                trials += chroma_faults(work, big, chroma_url, args.samples)
            if "postgres" in only and postgres_url:
                trials += postgres_faults(work, postgres_url, args.samples)
    held = sum(t.held for t in trials)
    unneeded = sum(t.fault.endswith("(unneeded)") for t in trials)
    print(f"\n{held} of {len(trials) - unneeded} faults held (one line, exit code, in time); "
          f"{unneeded} did not happen (a cut reply the command did not need, a turn that fitted)")  # fmt: skip
    if args.json:
        rows: list[dict[str, Any]] = [{**asdict(t), "held": t.held} for t in trials]
        args.json.write_text(json.dumps({"root": str(ROOT), "held": held, "tried": len(trials), "trials": rows}, indent=1))


if __name__ == "__main__":
    main()
