"""Query planning: rewrite a follow-up into a standalone query, split a complex one into sub-queries, and
ask for the query in the knowledge base's other language (cross-language search).

The configured model does the rewriting, every step falls back to
the user's question on timeout, error, empty or malformed output, and the planned queries are only
ever used to *search* - the answer is generated for ``QueryPlan.original``.
"""

from __future__ import annotations

import contextvars
import json
import logging
from collections.abc import Callable, Collection, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from models import follows_instructions
from models.deadline import ModelTimeout, ainvoke_with_timeout, invoke_with_timeout
from models.rerank import MAX_REPLY_CHARS, parse_json_object
from nodes import prompts
from nodes.conversation import language
from nodes.node_io import IO, run_steps
from stores.base import Passage
from stores.fusion import rrf
from stores.knowledge.languages import LANGUAGES, languages_in, written_in

log = logging.getLogger(__name__)

MAX_QUERY_CHARS = 300  # a search query longer than this is a paragraph, not a query
HISTORY_MESSAGES = 6  # the last three exchanges carry what a follow-up refers to
HISTORY_CHARS = 600  # per message: enough to name the subject, cheap enough to send every turn

REWRITE_INPUT = {
    "zh": "<最近对话>\n{history}\n</最近对话>\n\n追问：{question}",
    "en": "<recent_conversation>\n{history}\n</recent_conversation>\n\nFollow-up: {question}",
}
DECOMPOSE_INPUT = {"zh": "问题：{question}", "en": "Question: {question}"}
TRANSLATE_INPUT = DECOMPOSE_INPUT
TRANSLATION_GROWTH = 4  # a translation may be this many times the question's length (zh -> en grows ~3x)
ROLE = {"zh": {"human": "用户", "ai": "助手"}, "en": {"human": "User", "ai": "Assistant"}}


@dataclass(frozen=True)
class QueryPlan:
    """What to search for this turn; ``fallbacks`` holds ``"<step>:<reason>"`` for each step that fell back;
    ``translated`` the query in each other language of the knowledge base (also among ``sub_queries``)."""

    original: str
    standalone: str
    sub_queries: list[str]
    model_calls: int = 0
    fallbacks: list[str] = field(default_factory=list)
    translated: dict[str, str] = field(default_factory=dict)


class _Fallback(Exception):
    """A planning step produced nothing usable; ``reason`` is the short code recorded in the plan."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _recent_turns(question: str, history: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The last user/assistant text messages before the current question (tool traffic left out)."""
    turns: list[BaseMessage] = [
        m
        for m in history
        if isinstance(m, HumanMessage | AIMessage) and not getattr(m, "tool_calls", None) and m.text.strip()
    ]
    if turns and isinstance(turns[-1], HumanMessage) and turns[-1].text.strip() == question.strip():
        turns = turns[:-1]  # callers often pass the state's messages, which end with the question itself
    return turns[-HISTORY_MESSAGES:]


Planning = Generator[IO[Any], Any, Any]  # yields its model calls: awaited under ainvoke (nodes/node_io.py)


def _ask(model: BaseChatModel, system: str, user: str, timeout: float) -> Planning:
    """One model call parsed to a JSON object, or :class:`_Fallback` saying why not."""
    request = [SystemMessage(system), HumanMessage(user)]
    try:
        reply = yield IO(
            lambda: invoke_with_timeout(model, request, timeout),
            lambda: ainvoke_with_timeout(model, request, timeout),
        )
    except ModelTimeout as exc:
        raise _Fallback("timeout", str(exc)) from exc
    except Exception as exc:
        raise _Fallback("error", f"{type(exc).__name__}: {exc}") from exc
    text = reply.text.strip()
    if not text:
        raise _Fallback("empty")
    if len(text) > MAX_REPLY_CHARS:
        raise _Fallback("too_long", f"{len(text)} characters")
    parsed = parse_json_object(text)
    if parsed is None:
        raise _Fallback("not_json", text[:80])
    return parsed


def _clean(query: Any) -> str:
    return " ".join(query.split()) if isinstance(query, str) else ""


def _rewrite(
    question: str,
    turns: list[BaseMessage],
    model: BaseChatModel,
    lang: str,
    timeout: float,
    targets: list[str],
) -> Planning:
    """The rewrite call's JSON object; with ``targets``, the same call also asks for the translations."""
    roles = ROLE[lang]
    history = "\n".join(
        f"{roles['human'] if isinstance(m, HumanMessage) else roles['ai']}: {m.text.strip()[:HISTORY_CHARS]}"
        for m in turns
    )
    system = prompts.REWRITE_PROMPT[lang]
    if targets:
        system = prompts.REWRITE_TRANSLATE_PROMPT[lang].format(
            names=_names(lang, targets), shape=_shape(lang, targets, with_query=True)
        )
    user = REWRITE_INPUT[lang].format(history=history, question=question)
    return (yield from _ask(model, system, user, timeout))


def _rewritten(parsed: dict[str, Any], question: str) -> str:
    """The standalone query of a rewrite reply, or :class:`_Fallback`."""
    if "query" not in parsed or not isinstance(parsed["query"], str):
        raise _Fallback("malformed", "no 'query' string")
    query = _clean(parsed["query"])
    if not query:
        raise _Fallback("empty", "blank query")
    if len(query) > max(MAX_QUERY_CHARS, 2 * len(question)):
        raise _Fallback("too_long", f"query of {len(query)} characters")
    return query


def translation_targets(question: str, languages: Collection[str]) -> list[str]:
    """The knowledge base's ``languages`` the question is not written in, each to search a translation in.

    A question written in one language needs the others; a mixed one ("线程 stored where?") is written
    whole in none, so it gets a version in each; one without letters (digits, emoji) is searched as it is.
    """
    if not languages_in(question):
        return []
    own = written_in(question)
    return [lang for lang in LANGUAGES if lang in languages and lang != own]


def _names(lang: str, targets: list[str]) -> str:
    return prompts.NAMES_JOINED[lang].join(prompts.LANGUAGE_NAMES[lang][t] for t in targets)


def _shape(lang: str, targets: list[str], *, with_query: bool) -> str:
    """The JSON the model is asked for, with a placeholder for each value."""
    names = prompts.LANGUAGE_NAMES[lang]
    translations = {t: prompts.TRANSLATION_PLACEHOLDER[lang].format(name=names[t]) for t in targets}
    shape: dict[str, Any] = {"query": prompts.QUERY_PLACEHOLDER[lang]} if with_query else {}
    return json.dumps({**shape, "translations": translations}, ensure_ascii=False)


def _translate(
    question: str, model: BaseChatModel, lang: str, targets: list[str], timeout: float
) -> Planning:
    system = prompts.TRANSLATE_PROMPT[lang].format(
        names=_names(lang, targets), shape=_shape(lang, targets, with_query=False)
    )
    return (yield from _ask(model, system, TRANSLATE_INPUT[lang].format(question=question), timeout))


def _translations(parsed: dict[str, Any], targets: list[str], source: str) -> dict[str, str]:
    """The usable translation of ``source`` per target language, or :class:`_Fallback` when there is none.

    Usable: a string, not blank, not ``source`` again, not a paragraph, and written (at least partly) in
    the language asked for. A model that puts them at the top level instead of under "translations" is
    understood too.
    """
    raw = parsed.get("translations", parsed)
    if not isinstance(raw, dict):
        raise _Fallback("malformed", "'translations' is not an object")
    usable: dict[str, str] = {}
    reasons: list[_Fallback] = []
    for target in targets:
        text = _clean(raw.get(target))
        if not text:
            reasons.append(_Fallback("malformed" if target not in raw else "empty", f"no {target!r} string"))
        elif len(text) > max(MAX_QUERY_CHARS, TRANSLATION_GROWTH * len(source)):
            reasons.append(_Fallback("too_long", f"{target} query of {len(text)} characters"))
        elif _same_query(text) == _same_query(source):
            reasons.append(_Fallback("unchanged", f"{target} query is the question"))
        elif target not in languages_in(text):
            reasons.append(_Fallback("wrong_language", f"{target} query {text[:60]!r}"))
        else:
            usable[target] = text
    if not usable:
        raise reasons[0]
    return usable


def _same_query(text: str) -> str:
    """What a query asks, for telling repeats apart: case, spacing and punctuation do not count."""
    return "".join(ch for ch in text.casefold() if ch.isalnum())


def screen_sub_queries(question: str, raw: Sequence[Any], limit: int) -> list[str]:
    """The model's sub-queries worth a search each, in the model's order: cleaned and cut to length, without
    blanks, without repeats of one another and without the question itself (which a decomposition exists
    to go beyond). When nothing else is left the question is searched alone."""
    queries: list[str] = []
    seen = {_same_query(question)}
    for item in raw:
        sub = _clean(item)[:MAX_QUERY_CHARS]
        key = _same_query(sub)
        if key and key not in seen:
            seen.add(key)
            queries.append(sub)
    if not queries and any(_same_query(_clean(item)) == _same_query(question) for item in raw):
        return [question]  # the model judged the question to need no split
    return queries[:limit]


def _decompose(query: str, model: BaseChatModel, lang: str, limit: int, timeout: float) -> Planning:
    parsed = yield from _ask(
        model,
        prompts.DECOMPOSE_PROMPT[lang].format(n=limit),
        DECOMPOSE_INPUT[lang].format(question=query),
        timeout,
    )
    raw = parsed.get("queries")
    if not isinstance(raw, list):
        raise _Fallback("malformed", "no 'queries' list")
    queries = screen_sub_queries(query, raw, limit)
    if not queries:
        raise _Fallback("empty", "no usable sub-queries")
    return queries


def plan_queries(
    question: str, history: Sequence[BaseMessage], model: BaseChatModel | None, **options: Any
) -> QueryPlan:
    """Plan the searches for ``question`` with blocking model calls (see :func:`planned_queries`)."""
    # run_steps is typed for node bodies (a state update); it returns whatever the generator returns
    return cast(QueryPlan, run_steps(planned_queries(question, history, model, **options)))


def planned_queries(
    question: str,
    history: Sequence[BaseMessage],
    model: BaseChatModel | None,
    *,
    rewrite: bool = True,
    decompose: bool = False,
    max_sub_queries: int = 4,
    timeout: float = 20.0,
    rewrite_alone: bool = False,
    languages: Collection[str] = (),
) -> Planning:
    """Plan the searches for ``question``: never raises, at worst searches for the question itself.

    The rewrite runs when there are earlier turns to resolve the question against, or with ``rewrite_alone``
    also for a question on its own (the evaluation's ``hybrid+rewrite``: a search query in place of the
    question). ``languages`` are those the knowledge base holds (for this caller): in each the question is
    not written in (:func:`translation_targets`), the query is also searched, translated in the rewrite's
    call when a rewrite runs, else in a call of its own, and appended to the sub-queries (fused by RRF).
    A generator of its model calls, for a node body to ``yield from``; :func:`plan_queries` runs it blocking.
    """
    question = question.strip()
    if not follows_instructions(model) or not question:
        return QueryPlan(question, question, [question] if question else [], 0, [])
    lang = language(question)
    calls = 0
    fallbacks: list[str] = []
    standalone = question
    translated: dict[str, str] = {}
    targets = translation_targets(question, languages)

    def fell_back(step: str, exc: _Fallback) -> None:
        fallbacks.append(f"{step}:{exc.reason}")
        log.warning("query %s fell back (%s)", step, exc)

    turns = _recent_turns(question, history) if rewrite else []
    if turns or rewrite_alone:
        calls += 1
        try:
            parsed = yield from _rewrite(question, turns, model, lang, timeout, targets)
        except _Fallback as exc:
            for step in ("rewrite", "translate") if targets else ("rewrite",):
                fell_back(step, exc)
        else:
            try:
                standalone = _rewritten(parsed, question)
            except _Fallback as exc:
                fell_back("rewrite", exc)
            if targets:
                try:
                    translated = _translations(parsed, targets, standalone)
                except _Fallback as exc:
                    fell_back("translate", exc)
    elif targets:
        calls += 1
        try:
            parsed = yield from _translate(question, model, lang, targets, timeout)
            translated = _translations(parsed, targets, question)
        except _Fallback as exc:
            fell_back("translate", exc)
    sub_queries = [standalone]
    if decompose and max_sub_queries > 1:
        calls += 1
        try:
            sub_queries = yield from _decompose(standalone, model, lang, max_sub_queries, timeout)
        except _Fallback as exc:
            fell_back("decompose", exc)
    seen = {_same_query(q) for q in sub_queries}
    for query in translated.values():
        if _same_query(query) not in seen:
            seen.add(_same_query(query))
            sub_queries.append(query)
    return QueryPlan(question, standalone, sub_queries, calls, fallbacks, translated)


def retrieve_planned(
    plan: QueryPlan,
    search: Callable[[str], list[Passage]],
    *,
    rrf_k: int = 60,
    top_k: int = 5,
    max_workers: int = 4,
) -> list[Passage]:
    """Search every sub-query in parallel and fuse the lists by RRF, deduped by passage id.

    The order is stated: by fused score; a tie goes to the passage the earlier sub-query found (the plan's
    order is the model's), then to the better rank in that sub-query's list. One sub-query needs no fusion:
    its passages come back as the search ranked and scored them. A sub-query whose search fails is logged
    and skipped; if all fail, the first error is raised.
    """
    queries = plan.sub_queries or [plan.standalone]
    if len(queries) == 1:
        return list(search(queries[0]))[:top_k]
    with ThreadPoolExecutor(
        max_workers=max(1, min(max_workers, len(queries))), thread_name_prefix="kb-search"
    ) as pool:
        # each search runs in a copy of the caller's context, so run ids and tracing follow it
        futures = [pool.submit(contextvars.copy_context().run, search, q) for q in queries]
    results: list[list[Passage]] = []
    errors: list[BaseException] = []
    for query, future in zip(queries, futures, strict=True):
        error = future.exception()
        if error is not None:
            log.warning("search for sub-query %r failed: %s", query, error)
            errors.append(error)
            results.append([])
        else:
            results.append(list(future.result()))
    if errors and len(errors) == len(queries):
        raise errors[0]
    best: dict[str, Passage] = {}
    retrievers: dict[str, dict[str, None]] = {}
    for passages in results:
        for p in passages:
            best.setdefault(p["id"], p)  # the first list's copy; all copies are the same chunk
            retrievers.setdefault(p["id"], {}).update(dict.fromkeys(p.get("retrievers", [])))
    # keyed by position: two identical sub-queries are still two rankings
    rankings = {str(i): [p["id"] for p in passages] for i, passages in enumerate(results)}

    def first_found(pid: str, found_by: list[str]) -> tuple[int, int]:
        return int(found_by[0]), rankings[found_by[0]].index(pid)  # found_by follows the plan's order

    ordered = sorted(rrf(rankings, k=rrf_k), key=lambda item: (-item[1], first_found(item[0], item[2])))
    fused: list[Passage] = []
    for pid, score, found_by in ordered[:top_k]:
        p = best[pid]
        found = list(dict.fromkeys(queries[int(i)] for i in found_by))
        metadata = {**(p.get("metadata") or {}), "sub_queries": found}
        fused.append({**p, "score": score, "retrievers": list(retrievers[pid]), "metadata": metadata})
    return fused
