"""The offline model's knowledge-base rules (the four knowledge tools and the requests that reach them).

"知识库里有多少文档？" → ``knowledge_stats``; "搜一下…有没有 RAG 相关文档，有的话整理成摘要" → ``search_knowledge``
then (only if something was found) ``generate_summary``; "刚才那个回答不太准确" → ``submit_feedback(bad)``.
A question for the documents (``models.offline.questions``) is answered by quoting the retrieved passages
with their citations, framed by ``models.extractive``; with none in the request it is searched first, so
"nothing found" is only ever said of a search that returned nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from models.extractive import answer_from_passages, nothing_found, summary_head
from models.offline.intents import Step
from models.offline.numbers import zh_number
from models.offline.questions import asks_the_documents
from stores.text_analysis import tokenize

# A question about how many documents there are: a count word near a document noun, in either order, or the
# knowledge base's statistics by name. "找几篇关于 RAG 的文档" asks for documents, not their count: a request
# with a search verb or a topic is left to the search rules.
_COUNT_WORD = r"(?:多少|几|数量|数目|总数|how many|number of|count of|total)"
_DOC_NOUN = r"(?:文档|文件|资料|片段|chunks?|documents?|docs|files|passages)"
_STATS = re.compile(
    rf"{_COUNT_WORD}[^，,。.？?]{{0,6}}?{_DOC_NOUN}|{_DOC_NOUN}[^，,。.？?]{{0,6}}?(?:数量|数目|总数|有多少|有几)|"
    r"知识库.{0,8}(?:统计|状态|规模|情况)|knowledge[- ]base (?:stats|statistics|size)",
    re.IGNORECASE,
)
_TOPICAL = re.compile(r"关于|有关|相关|\babout\b|\bregarding\b|\bon the topic\b", re.IGNORECASE)
_SUMMARY = re.compile(r"摘要|总结|整理|归纳|概括|概述|汇总|summari[sz]e|summary|overview", re.IGNORECASE)
# A request for a summary uses the summary verb as its own, at the start of a clause ("整理一下…", "…，有的话整理成
# 摘要", "please summarise…", "give me an overview of…"); "谁整理了登月数据？" asks about someone who did.
_SUMMARY_REQUEST = re.compile(
    r"(?:^|[，,。；;:：]|\b(?:and|then)\b|然后|再|并|有的话)\s*(?:请|麻烦|帮我|给我|你|能不能|可以|please|can you|could you|"
    r"kindly)?\s*(?:把[^，,。？?]{1,40}?)?(?:总结|整理|归纳|概括|概述|汇总|做(?:个|一个|一下)?(?:总结|摘要|概述)|"
    r"summari[sz]e|(?:give|write|make|get)(?: me)? (?:a |an )?(?:short |brief |quick )?(?:summary|overview))",
    re.IGNORECASE,
)
_PASSAGE_COUNT = re.compile(
    r"(?P<n>\d+|[一两二三四五六七八九十])\s*(?:个|段|条|篇|份)?\s*(?:片段|段落|资料|文档|来源|passages?|chunks?|"
    r"documents?|docs?|sources?)|\btop\s*(?P<top>\d+)\b|(?<!第)(?P<docs>\d+|[一两二三四五六七八九十])\s*(?:篇|份)",
    re.IGNORECASE,
)
_COUNT_PHRASE = re.compile(
    r"[，,]?\s*(?:最多|至多|不超过|只用|仅用|用|取)?\s*(?:(?:using|with|in|from)\s+)?"
    r"(?:(?:at most|up to|no more than|only)\s+)?(?:" + _PASSAGE_COUNT.pattern + ")",
    re.IGNORECASE,
)
MAX_DOCS_LIMIT = 10  # generate_summary's schema allows 1–10
_SEARCH = re.compile(
    r"搜一下|搜索一下|检索一下|查一下|找一下|帮我(?:搜|查|找)|搜搜|有没有.{0,30}(?:文档|资料|内容)|"
    r"\bsearch (?:for|the)\b|look up|find (?:docs|documents)",
    re.IGNORECASE,
)
_BAD = re.compile(
    r"不太?准确|不对|错了|没用|不满意|答非所问|\bwrong\b|incorrect|not (?:helpful|accurate|right|useful)|useless",
    re.IGNORECASE,
)
_GOOD = re.compile(
    r"很满意|满意|很有用|有帮助|很好|\bhelpful\b|great answer|good answer|satisfied|spot on", re.IGNORECASE
)
# A judgement names what it judges: an answer, reply or result, or points back at it ("刚才", "that").
_ABOUT_PREVIOUS = re.compile(
    r"刚才|上一个|上面|之前|回答|答案|回复|结果|\bthat\b|\bthis\b|\bprevious\b|\blast\b|answer|result|reply",
    re.IGNORECASE,
)
_TOPIC_PATTERNS = [
    re.compile(r"有没有\s*(?:关于)?\s*(.+?)\s*(?:相关|有关)?的?(?:文档|资料|内容)"),
    re.compile(
        r"(?:搜一下|搜索一下|检索一下|查一下|找一下|帮我(?:搜|查|找)|搜搜)\s*(?:知识库(?:里|中)?)?(?:关于)?\s*"
        r"(.+?)\s*的?(?:相关|有关)的?(?:文档|资料|内容)"
    ),
    re.compile(r"关于\s*(.+?)\s*的"),
    re.compile(
        r"(?:整理|总结|归纳|概括|概述)(?:一下)?(?:知识库里|知识库中)?(?:关于)?\s*(.+?)\s*(?:的内容|的资料|$|，|,)"
    ),
    re.compile(
        r"(?:about|on|for|regarding)\s+(.+?)(?:\s+(?:documents?|docs|in the knowledge base)|[,.?!]|$)",
        re.IGNORECASE,
    ),
    re.compile(
        r"(?:summari[sz]e|search)\s+(?:the\s+)?(.+?)(?:\s+(?:documents?|docs)|[,.?!]|$)", re.IGNORECASE
    ),
]
_FILLER = re.compile(r"知识库(?:里|中)?|一下|请|帮我|给我|\bthe knowledge base\b|\bplease\b", re.IGNORECASE)
_EMPTY_KB_ZH = "知识库是空的：还没有导入任何文档（kb-agent ingest 路径）。"
_PASSAGE_BLOCK = re.compile(r"<(检索资料|retrieved_passages)[^>]*>\n(.*?)\n</\1>", re.S)
_PASSAGE_LINE = re.compile(r"^\[([^\]\n]+)\] (?:⟨([^⟩\n]*)⟩ )?(.*?)(?=\n\[[^\]\n]+\] |\Z)", re.M | re.S)


def topic_of(question: str) -> str:
    """The subject of a search/summary request ("RAG" in "搜一下知识库里有没有 RAG 相关文档")."""
    question = _COUNT_PHRASE.sub("", question)
    for pattern in _TOPIC_PATTERNS:
        match = pattern.search(question)
        if match:
            topic = _FILLER.sub("", match.group(1)).strip(" ，,。.？?")
            if topic and len(topic) <= 80:
                return topic
    words = [
        w for w in tokenize(_FILLER.sub(" ", question)) if not _SEARCH.search(w) and not _SUMMARY.search(w)
    ]
    return " ".join(words) or question.strip()


def passage_count(question: str) -> int | None:
    """How many passages the user asked for ("最多 3 个片段", "at most 3 passages", "top 3"), clamped."""
    match = _PASSAGE_COUNT.search(question)
    if match is None:
        return None
    raw = match.group("n") or match.group("top") or match.group("docs")  # "三篇": 篇 counts documents
    n = int(raw) if raw.isdigit() else int(zh_number(raw) or 1)
    return max(1, min(MAX_DOCS_LIMIT, n))


def _has_previous_answer(messages: Sequence[BaseMessage]) -> bool:
    return sum(isinstance(m, HumanMessage) for m in messages) >= 2


def plan_feedback(question: str, tools: set[str], messages: Sequence[BaseMessage]) -> list[Step] | None:
    """A rating of the previous answer ("刚才那个回答不太准确"), or None: a judgement of what the assistant
    said, so it is read before the rules for what the user tells about themselves."""
    judging = _ABOUT_PREVIOUS.search(question) and not question.rstrip().endswith(("?", "？"))
    if "submit_feedback" in tools and _has_previous_answer(messages) and judging:
        rating = "bad" if _BAD.search(question) else "good" if _GOOD.search(question) else None
        if rating:
            return [Step("submit_feedback", {"rating": rating, "reason": question.strip()[:1000]})]
    return None


def plan_kb_steps(question: str, tools: set[str], messages: Sequence[BaseMessage]) -> list[Step] | None:
    """A plan for a knowledge-base request, or None when the question is not one."""
    feedback = plan_feedback(question, tools, messages)
    if feedback is not None:
        return feedback
    counting = _STATS.search(question) and not _SEARCH.search(question) and not _TOPICAL.search(question)
    if "knowledge_stats" in tools and counting:
        return [Step("knowledge_stats", {})]
    wants_summary = "generate_summary" in tools and _SUMMARY_REQUEST.search(question.strip())
    wants_search = "search_knowledge" in tools and _SEARCH.search(question)
    if not (wants_summary or wants_search):
        return None
    topic = topic_of(question)
    steps = [Step("search_knowledge", {"query": topic})] if wants_search else []
    count = passage_count(question)
    if wants_search and count is not None:
        steps = [Step("search_knowledge", {"query": topic, "top_k": count})]
    if wants_summary:
        args: dict[str, Any] = {"topic": topic} if count is None else {"topic": topic, "max_docs": count}
        steps.append(Step("generate_summary", args, then=bool(steps)))
    return steps


def found_nothing(tool: str, content: str) -> bool:
    """True when a search came back empty (so a dependent summary step is skipped)."""
    if tool != "search_knowledge":
        return False
    try:
        return not json.loads(content).get("passages")
    except (ValueError, AttributeError):
        return True


def describe_kb_result(tool: str, content: str, zh: bool, question: str) -> str | None:
    """A sentence for a knowledge tool's result, or None if ``tool`` is not one."""
    try:
        data: Any = json.loads(content)
    except ValueError:
        data = None
    if tool == "search_knowledge":
        if not isinstance(data, dict):  # the tool's own sentence ("nothing has been ingested yet")
            return _EMPTY_KB_ZH if zh and "nothing has been ingested" in content else content
        passages = data.get("passages") or []
        if not passages:
            return nothing_found(zh)
        # A search request is framed by what was searched for ("RAG"), not by its wording ("搜一下…").
        return answer_from_passages(str(data.get("query") or question), passages)
    if tool == "generate_summary" and isinstance(data, dict):
        return _summary_text(data, zh)
    if tool == "knowledge_stats" and isinstance(data, dict):
        if zh:
            return (
                f"知识库共有 {data.get('documents', 0)} 篇文档、{data.get('chunks', 0)} 个片段；"
                f"最近更新：{data.get('last_update') or '无'}；嵌入模型：{data.get('embedder') or '无'}。"
            )
        return (
            f"The knowledge base holds {data.get('documents', 0)} documents in {data.get('chunks', 0)} chunks; "
            f"last update: {data.get('last_update') or 'never'}; embedding model: {data.get('embedder') or 'none'}."
        )
    if tool == "delete_document" and isinstance(data, dict) and "deleted" in data:
        if zh:
            return f"已删除文档 {data['deleted']}（{data.get('chunks_removed', 0)} 个片段）。"
        return f"Deleted document {data['deleted']} ({data.get('chunks_removed', 0)} chunks)."
    if tool == "submit_feedback" and isinstance(data, dict):
        rating = data.get("rating")
        return (
            f"已记录您对上一个回答的反馈（{rating}），谢谢。"
            if zh
            else f"Thanks, your feedback ({rating}) on the previous answer is recorded."
        )
    return None


def _summary_text(data: dict[str, Any], zh: bool) -> str:
    """The summary as the tool wrote it; an extractive one gets its first line in the question's language."""
    summary, topic = str(data.get("summary") or ""), str(data.get("topic") or "")
    if not summary:
        return (
            f"知识库中没有关于「{topic}」的资料可以总结。"
            if zh
            else f"The knowledge base has nothing on '{topic}' to summarise."
        )
    if data.get("model") == "offline-extractive":
        head, _, body = summary.partition("\n")
        count = len(data.get("sources") or [])
        about = head not in {summary_head(topic, count, lang, about=False) for lang in (True, False)}
        return summary_head(topic, count, zh, about=about) + "\n" + body
    return summary


def passages_in_prompt(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    """The retrieved passages the system prompt carries (the marked data block), best first."""
    for message in messages:
        if isinstance(message, SystemMessage):
            block = _PASSAGE_BLOCK.search(message.text)
            if block:
                return [
                    {"id": m.group(1), "heading": m.group(2) or "", "text": m.group(3)}
                    for m in _PASSAGE_LINE.finditer(block.group(2))
                ]
    return []


def knowledge_reply(question: str, messages: Sequence[BaseMessage], tools: set[str]) -> str | None:
    """The answer to a question for the documents from the passages retrieved for it; None for a request
    that is not one ("帮我写首诗", "what should I do"), which the capabilities reply answers instead, and
    for a question with no passages in the request (:func:`search_first` searches it first)."""
    passages = passages_in_prompt(messages)
    if not passages or not asks_the_documents(question, passages):
        return None  # without passages: searched first, or no search tool (the capabilities reply says so)
    return answer_from_passages(question, passages)


def search_first(question: str, messages: Sequence[BaseMessage], tools: set[str]) -> list[Step] | None:
    """A search for a question for the documents that reached the model without passages (retrieval was
    skipped or found nothing): only after the search has run may the answer say what it found."""
    if "search_knowledge" not in tools or passages_in_prompt(messages):
        return None
    if not asks_the_documents(question):
        return None
    return [Step("search_knowledge", {"query": question.strip()[:1000]})]
