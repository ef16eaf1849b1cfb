"""The offline model's rules for tools named by the user: explicit calls and document deletion.

"调用工具 echo {"text": "hi"}" / "call tool echo with {"text": "hi"}" runs any offered tool (MCP tools
included) with the given JSON arguments, so the whole tool platform can be driven without a real model.
"删除文档 guides/rag.md" / "delete document guides/rag.md" → ``delete_document`` (approval-gated).
"""

from __future__ import annotations

import json
import re
from typing import Any

from models.offline.intents import Step
from models.tokens import has_cjk

_EXPLICIT = re.compile(
    r"(?:调用|使用|执行)\s*(?:工具|tool)\s*[`「“\"']?(?P<zh>[A-Za-z0-9_-]{1,64})[`」”\"']?|"
    r"\b(?:call|use|run|invoke)\s+(?:the\s+)?tool\s+[`\"']?(?P<en>[A-Za-z0-9_-]{1,64})[`\"']?",
    re.IGNORECASE,
)
_DELETE = [
    re.compile(
        r"(?:删除|删掉|移除)\s*(?:知识库(?:里|中)?的?)?\s*(?:文档|文件)\s*[「“\"'`]?(?P<doc>[^\s」”\"'`，。？！]+)"
    ),
    re.compile(
        r"(?:把)?\s*(?:文档|文件)\s*[「“\"'`]?(?P<doc>[^\s」”\"'`，。？！]+?)[」”\"'`]?\s*(?:删除|删掉|移除)"
    ),
    re.compile(
        r"\b(?:delete|remove)\s+(?:the\s+)?(?:document|doc|file)\s+[\"'`]?(?P<doc>[^\s\"'`?!,]+?)[\"'`]?"
        r"(?=[\s?!,]|\.?$|\s)",
        re.IGNORECASE,
    ),
]


# What no built-in tool can know: asked for, the offline model says so instead of answering something else.
_NO_TOOL: list[tuple[re.Pattern[str], str, str, str]] = [
    (  # asks what the weather is or will be: "What weather feature do climatologists study?" asks the documents
        re.compile(
            r"天气|气温|下雨|下雪|\b(?:what|how)(?:'s| is| will)(?: the)? weather\b|\bweather (?:like|in|at|for|today|"
            r"tomorrow|tonight|now|this|next|be|going)\b|\bforecast\b|\b(?:is it|will it) (?:going to )?(?:rain|snow)",
            re.I,
        ),
        "weather",
        "查询天气",
        "the weather",
    ),
    (re.compile(r"股价|\bstock (?:price|market)\b", re.I), "stock", "查询股价", "stock prices"),
    (re.compile(r"汇率|\bexchange rate\b", re.I), "exchange", "查询汇率", "exchange rates"),
    (
        re.compile(
            r"(?:发|写|寄)(?:一)?封?(?:电子)?邮件|\b(?:send|write)\b.{0,30}\be-?mail\b|^\s*(?:please\s+)?e-?mail\s+(?!address)\w+",
            re.I,
        ),
        "mail",
        "发送邮件",
        "sending e-mail",
    ),
    (
        re.compile(
            r"发(?:一条|个)?(?:消息|短信|微信)|\bsend\b.{0,30}\b(?:message|text|sms)\b|^\s*(?:please\s+)?(?:text|message|ping)\s+(?:him|her|them|my|the)\b",
            re.I,
        ),
        "message",
        "发送消息",
        "sending messages",
    ),
    (
        re.compile(
            r"(?:订|预订|预定)[^，。？?]{0,12}?(?:票|酒店|房间|餐厅|座位|位子)|"
            r"\bbook\b.{0,20}\b(?:flight|hotel|room|table|ticket|train)s?\b",
            re.I,
        ),
        "book",
        "预订",
        "bookings",
    ),
]


def missing_capability(question: str, tools: set[str]) -> tuple[str, str] | None:
    """(中文, English) names of what the question needs and no offered tool provides, or None."""
    for pattern, key, zh, en in _NO_TOOL:
        if pattern.search(question) and not any(key in name.lower() for name in tools):
            return zh, en
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (the arguments of an explicit call), or None."""
    start = text.find("{")
    while start >= 0:
        try:
            value, _end = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


def explicit_call(question: str, tools: set[str]) -> list[Step] | None:
    """A call of a tool the user named, with the JSON arguments they gave (``{}`` when none)."""
    match = _EXPLICIT.search(question)
    if match is None:
        return None
    name = match.group("zh") or match.group("en")
    if name not in tools:
        return None
    args = _json_object(question[match.end() :])
    return [Step(name, args if args is not None else {})]


def document_to_delete(question: str) -> str | None:
    for pattern in _DELETE:
        match = pattern.search(question)
        if match:
            return match.group("doc").strip().rstrip(".")
    return None


def plan_tool_steps(question: str, tools: set[str]) -> list[Step] | None:
    """A plan for a request that names a tool or asks to delete a document, or None."""
    steps = explicit_call(question, tools)
    if steps is not None:
        return steps
    doc = document_to_delete(question)
    if doc and "delete_document" in tools:
        return [Step("delete_document", {"doc_id": doc})]
    return None


def unavailable_reply(question: str, tools: set[str]) -> str | None:
    """What to say when the user asks for something the run does not offer (e.g. no kb:admin)."""
    zh = has_cjk(question)
    match = _EXPLICIT.search(question)
    if match is not None:
        name = match.group("zh") or match.group("en")
        if name not in tools:
            if zh:
                return f"本轮没有可用的工具 {name}（不存在，或你的角色没有使用它的权限）。"
            return f"The tool {name!r} is not available in this turn (it does not exist, or your roles do not permit it)."
    missing = missing_capability(question, tools)
    if missing is not None and _EXPLICIT.search(question) is None:
        names = ", ".join(sorted(tools)) or ("无" if zh else "none")
        if zh:
            return (
                f"这里做不到：我没有{missing[0]}的工具，所以不会拿别的信息凑数。本轮可用的工具：{names}。"
                "接入提供这类工具的模型或 MCP 服务器后再试。"
            )
        return (
            f"I can't do that here: I have no tool for {missing[1]}, and I will not guess. Tools available "
            f"this turn: {names}. Connect a model or an MCP server that offers one, then ask again."
        )
    if document_to_delete(question) and "delete_document" not in tools:
        if zh:
            return "删除文档需要管理员权限（kb:admin）；你的角色没有这个权限，所以没有删除任何内容。"
        return "Deleting a document needs the kb:admin permission, which your roles do not grant; nothing was deleted."
    return None
