"""Several processes opening one fresh embedded Chroma folder at the same instant all succeed.

Chroma creates its tables and collections on first open without a cross-process lock, so two
``kb-agent`` commands started together on a new data folder used to fail with "table collections
already exists" or "database is locked".
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

OPEN_AT = """
import sys, time
from stores.chroma import chroma_client, open_collection
from stores.embeddings import HashingEmbedder
start = float(sys.argv[2])
while time.time() < start:
    pass
collection = open_collection(chroma_client(sys.argv[1]), "first-open", HashingEmbedder())
collection.upsert(ids=[sys.argv[3]], documents=["a fact from " + sys.argv[3]])
print(collection.count() >= 1)
"""


def test_four_processes_opening_a_new_data_folder_at_once_all_succeed(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for round_ in range(2):
        home = tmp_path / f"home{round_}"
        start = time.time() + 6  # imports take a few seconds; then all four open together
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN_AT, str(home), str(start), f"p{n}"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            assert out.strip() == "True"
