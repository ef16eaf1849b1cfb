"""``kb-agent eval --answers``: answer-level checks on a JSON test set.

Each question runs through the whole agent (in memory: no thread is kept and no memory is learnt), then:
citation precision (cited chunks that contain the sentence citing them) and, with a model endpoint, an
LLM judge's faithfulness score (0–1). The offline model is never its own judge: that part is skipped.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from graph.builder import build_graph
from models import follows_instructions, get_chat_model
from models.deadline import invoke_with_timeout
from models.rerank import parse_json_object
from nodes import prompts
from nodes.conversation import language
from nodes.settings import Settings
from stores.knowledge.evaluation import EvalQuery, citation_precision, cited_claims


def _answer(graph: Any, ctx: Settings, query: EvalQuery) -> str:
    config = {"configurable": {"thread_id": f"eval-{query.qid}", "user_id": ctx.user_id}}
    result = graph.invoke({"messages": [HumanMessage(query.text)]}, config, context=ctx)
    finals = [m for m in result.get("messages", []) if isinstance(m, AIMessage) and not m.tool_calls]
    return finals[-1].text if finals else ""


def _judge(model: Any, answer: str, passages: dict[str, str], timeout: float) -> float | None:
    """The judge's 0–1 score, None when its reply is unusable."""
    lang = language(answer)
    body = "\n\n".join(f"[{cid}] {text}" for cid, text in passages.items()) or "(none)"
    prompt = prompts.FAITHFULNESS_JUDGE[lang].format(passages=body, answer=answer)
    reply = invoke_with_timeout(model, [SystemMessage(prompt)], timeout, inherit_run=False)
    parsed = parse_json_object(reply.text) or {}
    score = parsed.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 10:
        return None
    return float(score) / 10


def answer_checks(ctx: Settings, kb: Any, queries: list[EvalQuery]) -> dict[str, Any]:
    """Run every question through the agent and score its answer; the figures ``eval --answers`` prints."""
    quiet = ctx.replace(long_term_memory=False, checkpoint_prune=False)
    graph = build_graph(InMemorySaver(), memory=None, settings=quiet)
    model = get_chat_model(ctx)
    judge = model if follows_instructions(model) else None
    good = total = cited = 0
    scores: list[float] = []
    rows = []
    for query in queries:
        answer = _answer(graph, quiet, query)
        ids = sorted({cid for _, cited_ids in cited_claims(answer) for cid in cited_ids})
        chunks = {p["id"]: p.get("text", "") for p in kb.get(ids, groups=ctx.group_list)} if ids else {}
        ok, n = citation_precision(answer, chunks)
        good, total, cited = good + ok, total + n, cited + int(n > 0)
        score = _judge(judge, answer, chunks, ctx.model_timeout) if judge is not None and answer else None
        if score is not None:
            scores.append(score)
        rows.append({"qid": query.qid, "citations": n, "supported": ok, "faithfulness": score})
    return {
        "questions": len(queries),
        "answers_with_citations": cited / len(queries) if queries else 0.0,
        "citation_precision": good / total if total else 0.0,
        "citations": total,
        "faithfulness": sum(scores) / len(scores) if scores else None,
        "faithfulness_note": None if judge is not None else "skipped: the offline model is not a judge",
        "per_question": rows,
    }

