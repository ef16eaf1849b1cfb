"""Answer-level check on XQuAD: does the offline model's answer quote the gold answer span?

    python bench/xquad_answers.py ../shared/eval/xquad            # every folder found there
    python bench/xquad_answers.py ../shared/eval/xquad --top-k 5 --json

Each BEIR folder (``en2en``, ``zh2zh``, ``zh2en``, ``en2zh``) is indexed as ``kb-agent eval`` indexes it (a
cache of its own under ``$KB_AGENT_HOME/eval``, the configured embedder). For every question the top
passages of a hybrid search are laid out in the request exactly as the graph lays them out (the marked
passage block after the question), and the offline model, bound with the knowledge tools, answers. A
question *counts* when the top passage contains the gold answer (``answers.jsonl``, in the paragraph's
language); it *passes* when the answer's text contains the gold answer too. The target is about
same-language folders (``en2en``, ``zh2zh``); the cross-language ones are reported for information.

Questions are split in two halves by a hash of their id (``tune`` and ``held``), so a change tuned on one
half is checked on the other; both halves are reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import HumanMessage

from models.offline import OfflineChatModel
from nodes.prompts import turn_context
from stores.text_analysis import has_cjk

FOLDERS = ("en2en", "zh2zh", "zh2en", "en2zh")
SAME_LANGUAGE = ("en2en", "zh2zh")
_EDGE_PUNCTUATION = ".,;:!?。，；：！？、\"'“”‘’()（）"
KNOWLEDGE_TOOLS = ("search_knowledge", "generate_summary", "knowledge_stats", "calculator", "get_current_date")


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {"type": "object"}}}


def normalised(text: str) -> str:
    """Text compared for containment: NFKC, case-folded, whitespace and the punctuation around it removed
    ("two." is a gold span whose full stop ends the sentence, not the answer)."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split()).strip(_EDGE_PUNCTUATION)


def half_of(qid: str) -> str:
    """"tune" or "held": a stable split of the questions by their id."""
    return "tune" if hashlib.sha1(qid.encode()).digest()[0] % 2 == 0 else "held"


def offline_answer(model: Any, question: str, passages: list[dict[str, Any]]) -> str:
    """The offline model's final answer with ``passages`` retrieved for ``question`` (the graph's layout)."""
    lang = "zh" if has_cjk(question) else "en"
    blocks = turn_context(lang, passages=passages)
    reply = model.invoke([HumanMessage(f"{question}\n\n{blocks}" if blocks else question)])
    return str(reply.content)


def run_folder(folder: Path, answers: dict[str, dict[str, str]], top_k: int, show: int) -> dict[str, Any]:
    """Per half: questions counted (gold in the top passage) and passed (gold in the answer)."""
    from cli.kb_eval import _beir_index
    from nodes.settings import Settings

    kb, queries, _problems, _ids = _beir_index(folder, Settings())
    paragraph_lang = "en" if folder.name.endswith("2en") else "zh"
    model = OfflineChatModel().bind_tools([_tool(n) for n in KNOWLEDGE_TOOLS])
    counts = {half: {"questions": 0, "counted": 0, "passed": 0} for half in ("tune", "held")}
    misses: list[dict[str, str]] = []
    for query in queries:
        gold = (answers.get(query.qid) or {}).get(paragraph_lang, "")
        if not gold:
            continue
        half = counts[half_of(query.qid)]
        half["questions"] += 1
        passages = kb.search(query.text, top_k=top_k, mode="hybrid")
        if not passages or normalised(gold) not in normalised(str(passages[0].get("text", ""))):
            continue
        half["counted"] += 1
        answer = offline_answer(model, query.text, passages)
        if normalised(gold) in normalised(answer):
            half["passed"] += 1
        elif len(misses) < show:
            misses.append({"id": query.qid, "question": query.text, "gold": gold, "answer": answer})
    for half in counts.values():
        half["share"] = round(half["passed"] / half["counted"], 4) if half["counted"] else None
    return {"folder": folder.name, **counts, "misses": misses}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="the xquad folder (holds answers.jsonl and the BEIR folders)")
    parser.add_argument("--folders", nargs="*", default=list(FOLDERS))
    parser.add_argument("--top-k", type=int, default=5, help="passages laid out for the model (default 5)")
    parser.add_argument("--show", type=int, default=0, help="print up to N missed answers per folder")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    os.environ.setdefault("KB_AGENT_HOME", str(Path("/tmp") / "kb-bench-xquad-answers"))
    with (args.root / "answers.jsonl").open(encoding="utf-8") as lines:
        answers = {row["id"]: row for row in (json.loads(line) for line in lines if line.strip())}
    results = [run_folder(args.root / name, answers, args.top_k, args.show) for name in args.folders]
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
        return
    print(f"{'folder':8} {'half':5} {'questions':>9} {'gold in top':>11} {'quoted':>7} {'share':>6}")
    for result in results:
        for half in ("tune", "held"):
            row = result[half]
            share = "-" if row["share"] is None else f"{row['share']:.3f}"
            tag = "" if result["folder"] in SAME_LANGUAGE else "  (information)"
            print(
                f"{result['folder']:8} {half:5} {row['questions']:>9} {row['counted']:>11} "
                f"{row['passed']:>7} {share:>6}{tag}"
            )
        for miss in result["misses"]:
            print(f"  miss {miss['id']}: {miss['question']} | gold: {miss['gold']}\n    {miss['answer'][:400]}")


if __name__ == "__main__":
    main()
