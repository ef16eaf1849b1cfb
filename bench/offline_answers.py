"""The offline model on the labelled requests: honest / partial / misleading / wrong, per file and language.

    python bench/offline_answers.py                  # every tests/fixtures/offline_requests/*.jsonl
    python bench/offline_answers.py --only knowledge.jsonl --show
    python bench/offline_answers.py --json > /tmp/offline_answers.json
    python bench/offline_answers.py --home /tmp/kb-labelled   # keep the indexed docs/ between runs

Runs every request through the real graph (a fresh knowledge base of ``docs/`` with the default embedder,
the offline model, "now" pinned to 2026-12-06 10:00 Asia/Shanghai) and grades each answer from its text and
the turn's tool calls (``tests/fixtures/offline_requests/grade.py``, shared with the integration test).
Target: 0 wrong, misleading at most 3%.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.offline_requests.grade import as_json, load_cases, not_honest_text, run_all, table_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="file names of the sets to run (default: all)")
    parser.add_argument("--home", type=Path, default=None, help="a data dir to keep the indexed docs/ in")
    parser.add_argument("--show", action="store_true", help="print every answer that is not honest")
    parser.add_argument("--json", action="store_true", help="print the counts and every case as JSON")
    args = parser.parse_args()
    cases = [c for c in load_cases() if args.only is None or c.source in args.only]
    started = time.perf_counter()
    outcomes = run_all(cases, home=args.home)
    seconds = time.perf_counter() - started
    if args.json:
        print(json.dumps({**as_json(outcomes), "seconds": round(seconds, 1)}, ensure_ascii=False, indent=2))
        return
    print(table_text(outcomes))
    total = len(outcomes)
    misleading = sum(o.grade == "misleading" for o in outcomes)
    wrong = sum(o.grade == "wrong" for o in outcomes)
    print(f"\n{total} requests in {seconds:.0f} s: wrong {wrong}, misleading {misleading} ({misleading / max(total, 1):.1%})")
    if args.show:
        print("\n" + not_honest_text(outcomes))


if __name__ == "__main__":
    main()
