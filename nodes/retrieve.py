"""``retrieve``: consult the knowledge base before the model decides, when the question needs it.

The search runs for the user's identity and groups from the run's context. A follow-up question is first
rewritten into a standalone query (and optionally decomposed) through the configured model, with a
fall-back to the original question; with cross-language search on, the model also gives the query in each
language of the knowledge base the question is not written in, and both are searched and fused. The
answer is still generated for the original question.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.language_models import BaseChatModel
from langgraph.runtime import Runtime

from models import ChatModelFactory, follows_instructions, get_chat_model
from models.rerank import cut_below, reranker_from_setting
from nodes.context import Context, run_settings
from nodes.conversation import current_question, last_human_index
from nodes.node_io import IO, Node, Steps, dual_node
from nodes.query_planning import planned_queries, retrieve_planned
from nodes.retrieval_gate import needs_retrieval
from nodes.settings import Settings
from nodes.state import State
from stores.base import KnowsLanguages, Passage, PassageSearch
from tools.passage_search import Penalties, pool_size, rated_bad, reordered

log = logging.getLogger("kb_agent.retrieve")
KnowledgeSource = PassageSearch | Callable[[Settings], PassageSearch | None] | None


def resolve_knowledge(source: KnowledgeSource, ctx: Settings) -> PassageSearch | None:
    if source is None or isinstance(source, PassageSearch):
        return source
    return source(ctx)


def make_retrieve(
    knowledge: KnowledgeSource,
    model: BaseChatModel | None = None,
    deployment: Settings | None = None,
    penalties: Penalties | None = None,
    *,
    chat_models: ChatModelFactory = get_chat_model,
) -> Node:
    """The node; ``penalties`` gives the chunks bad feedback down-weights (``KB_AGENT_FEEDBACK_PENALTY``).

    Under ``ainvoke`` the query rewrite is awaited; the searches (Chroma, bm25s), the feedback store and
    the reranker are blocking and run as one piece on a worker thread.
    """

    def retrieve(state: State, runtime: Runtime[Context]) -> Steps:
        question, _ = current_question(state.messages)
        if not question.strip() or not needs_retrieval(question):
            return {"passages": []}
        ctx = run_settings(runtime, deployment)
        kb = resolve_knowledge(knowledge, ctx)
        if kb is None:
            return {"passages": []}
        groups = ctx.group_list
        history = state.messages[: max(0, last_human_index(state.messages))]
        chat = model if model is not None else (None if ctx.uses_offline_model else chat_models(ctx))

        # Only a model that follows instructions is asked for a translation, and only a knowledge base
        # that knows its languages says which: the offline model and other searches never pay the read.
        languages: frozenset[str] = frozenset()
        if ctx.cross_language and isinstance(kb, KnowsLanguages) and follows_instructions(chat):
            try:
                languages = yield IO(lambda: kb.languages(groups))
            except Exception:  # an optional step: the search below says what is wrong, if anything is
                log.warning("the knowledge base's languages are unknown; no cross-language query", exc_info=True)
        # The rewrite and decomposition calls are awaited under ainvoke; the rest is blocking work.
        plan = yield from planned_queries(
            question,
            history,
            chat,
            rewrite=ctx.rewrite_query,
            decompose=ctx.decompose_query,
            languages=languages,
        )

        def find() -> list[Passage]:
            reranker = reranker_from_setting(ctx.reranker, chat, api_key=ctx.api_key)
            penalised = rated_bad(penalties, ctx)
            pool = pool_size(ctx, ctx.top_k, penalised=penalised, memories=state.memories, reranking=reranker is not None)

            def search(query: str) -> list[Passage]:
                return list(kb.search(query, user_id=ctx.user_id, groups=groups, top_k=pool))

            passages = retrieve_planned(plan, search, rrf_k=ctx.rrf_k, top_k=pool)
            passages = reordered(passages, ctx, penalised=penalised, memories=state.memories)
            if reranker is not None and passages:
                passages = cut_below(reranker.rerank(question, passages, ctx.top_k), ctx.rerank_min_score)
            return passages[: ctx.top_k]

        passages = yield IO(find)
        log.info(
            "node=retrieve user=%s queries=%d translated=%s model_calls=%d fallbacks=%s passages=%d",
            ctx.user_id,
            len(plan.sub_queries),
            ",".join(plan.translated) or "-",
            plan.model_calls,
            plan.fallbacks,
            len(passages),
        )
        runtime.stream_writer(
            {
                "type": "passages",
                "passages": [
                    {"id": p.get("id"), "score": round(float(p.get("score", 0.0)), 4), "retrievers": p.get("retrievers", [])}
                    for p in passages
                ],
            }
        )
        return {"passages": passages}

    return dual_node(retrieve, "retrieve")
