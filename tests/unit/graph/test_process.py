"""The composition root caps glibc's malloc arenas once per process, unless the operator set their own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.fixtures.serve import REPO_ROOT

pytestmark = pytest.mark.skipif(
    not (hasattr(os, "confstr") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")),
    reason="malloc arenas are glibc's",
)

PROBE = "import graph.services; from graph.process import arenas_capped; print(arenas_capped())"


def _probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=REPO_ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_opening_the_composition_root_caps_the_arenas() -> None:
    assert _probe() == "True"


def test_an_operators_malloc_arena_max_is_left_alone() -> None:
    assert _probe(MALLOC_ARENA_MAX="8") == "False"
