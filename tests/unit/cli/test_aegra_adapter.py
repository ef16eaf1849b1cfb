"""cli/aegra_adapter.py patches Aegra's internals: it must be the Aegra release they were written against.

The check runs in the server's own interpreter (Aegra needs Python >= 3.12: ``KB_TEST_SERVER_VENV``, which
.ci/run builds), so a new Aegra fails here, naming what changed, before any server runs with it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli import aegra_adapter

REPO = Path(__file__).resolve().parents[3]


def test_the_pin_in_pyproject_is_the_release_the_adapter_was_written_for() -> None:
    text = (REPO / "pyproject.toml").read_text("utf-8")
    assert f'"aegra-api=={aegra_adapter.AEGRA_VERSION};' in text


def test_the_installed_aegra_is_the_one_the_patches_were_written_against() -> None:
    venv = os.environ.get("KB_TEST_SERVER_VENV", "")
    if not venv:
        pytest.skip("KB_TEST_SERVER_VENV is not set (.ci/run makes a Python 3.12 venv with .[server])")
    done = subprocess.run(
        [
            str(Path(venv) / "bin" / "python"),
            "-c",
            "import json; from cli import aegra_adapter as a; print(json.dumps(a.changed()))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    changed = json.loads(done.stdout.strip().splitlines()[-1])
    assert changed == [], (
        f"Aegra changed under cli/aegra_adapter.py: re-check each patch, then refresh {changed}"
    )


def test_without_aegra_nothing_is_patched() -> None:
    try:
        import aegra_api  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("aegra_api is importable here: the live server tests cover the patched executor")

    class LocalExecutor:
        async def wait_for_completion(self, run_id: str, *, timeout: float = 300.0) -> None:
            return None

    executor = LocalExecutor()
    before = executor.wait_for_completion
    assert aegra_adapter.install(executor) is False
    assert executor.wait_for_completion == before


def test_a_cron_fires_only_for_an_owner_who_holds_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from nodes.tokens import TOKENS_ENV

    holds = aegra_adapter.cron_owner_holds_a_token
    monkeypatch.setenv(TOKENS_ENV, json.dumps({"t1": "alice"}))
    assert asyncio.run(holds("alice")) and not asyncio.run(holds("bob")) and not asyncio.run(holds(""))
    monkeypatch.setenv(TOKENS_ENV, "/no/such/tokens.json")
    assert not asyncio.run(holds("alice"))  # unreadable: nobody
    monkeypatch.delenv(TOKENS_ENV)
    assert asyncio.run(holds("anyone"))  # --insecure-dev: no tokens to hold
