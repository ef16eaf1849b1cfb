"""The offline model's memory rules: "记住…", "我喜欢…", "其实…", "我喜欢什么样的回答？", "忘掉…".

A statement to keep is written through the ``remember`` tool, and the answer reports what the rules
actually decided (saved, already known, updated, or refused and why), never a promise. A statement the
rules do not keep ("我今天有点累", "it is raining here") is said not to be stored. A question about the
user is answered from the recalled memories in the prompt, with their ids; it is never stored. A question
about the user as a whole ("你还记得我的什么信息？") is answered with the facts recall put first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage

from models.offline.intents import Step
from stores.base import MemoryRecord
from stores.memory.checks import LABELS, has_forget_intent, has_remember_intent
from stores.memory.extraction import (
    OfflineExtractor,
    stated_new_value,
    stated_preference,
    stated_sensitive_fact,
)
from stores.memory.history import asks, is_history
from stores.memory.questions import (
    about_user_as_a_whole,
    about_user_life,
    is_calculation,
    reads_as_question,
    topic,
)
from stores.memory.rules import ExtractionRequest, content_problem
from stores.text_analysis import has_cjk, term_set, tokenize

_PREFERENCE = re.compile(
    r"我(?:比较|更)?(?:不)?(?:喜欢|偏好|习惯|希望)|\bI (?:prefer|like|always want)\b", re.IGNORECASE
)
_QUESTION = re.compile(
    r"[?？]\s*$|[吗呢]\s*[。.]?$|什么|哪些|哪个|怎样|怎么样|多少|是否|"
    r"^\s*(?:what|which|who|how|do|does|did|is|are|am|can|could|would|will)\b",
    re.IGNORECASE,
)
_ABOUT_ME = re.compile(r"我|\b(?:I|me|my|mine)\b", re.IGNORECASE)
_SELF_QUESTION = re.compile(
    r"我(?:的|喜欢|偏好|习惯|讨厌|是谁|叫什么)|你(?:还)?记得|记得我|关于我|"
    r"\b(?:my|do I|am I|about me|what do you (?:know|remember))\b",
    re.IGNORECASE,
)
# Asks what the assistant remembers, or what the user asked before: only memory can answer it.
_MEMORY_QUESTION = re.compile(
    r"你(?:还)?(?:记得|知道)|记得我|关于我|我(?:之前|以前|上次)?问过|我(?:喜欢|偏好|习惯|讨厌|是谁|叫什么|住)|"
    r"\b(?:about me|what do you (?:know|remember)|did I ask|have I asked|my (?:name|preferences?))\b",
    re.IGNORECASE,
)
CLOSEST_SHOWN = 3  # memories shown, framed as possibly unrelated, when none answers a question about the user
_ASKED_BEFORE = re.compile(r"问过|问了什么|\b(?:asked|did I ask)\b", re.IGNORECASE)
_MEMORY_BLOCK = re.compile(r"<(用户长期记忆|user_memories)[^>]*>\n(.*?)\n</\1>", re.S)
_MEMORY_LINE = re.compile(r"^- \[([^\]\n]*)\] \((\w+)(, weak match)?\) (.*)$", re.M)
_RULE_ERROR = re.compile(r"not remembered \(rule (\d+)\): (.*)", re.S)
_QUESTION_WORDS = (
    "我 你 用户 什么 什么样 哪些 哪个 怎样 吗 呢 记得 知道 关于 之前 以前 问过 问 过 "
    "what which do does did i my me user know remember about before ask asked"
)


def is_question(text: str) -> bool:
    """A question, not a statement: "我喜欢什么样的回答？" asks, it does not tell (nor does "我习惯用左手
    还是右手写字", without its mark)."""
    return bool(_QUESTION.search(text.strip())) or reads_as_question(text)


# Asking for something ("帮我查…", "我想了解…", "tell me…", "I'm looking for…"): a request, not news.
_REQUEST = re.compile(
    r"请|帮|麻烦|给我|告诉|列出|列一下|查|搜|找|计算|算一下|解释|说明|介绍|总结|翻译|看看|讲讲|说说|"
    r"(?:我|想|要|需要|希望)(?:知道|了解|问问?|查|看看|找|咨询|请教|申请|办理)|"
    r"^\W*(?:please|tell|show|list|find|search|explain|summari[sz]e|give|calculate|compute|help|describe|"
    r"translate|define|look\s+up|get|open|check|count|compare|convert|delete|remove|add|make|write|send)\b|"
    r"\bi\s*(?:want|'d\s+like|would\s+like|need|wonder|am\s+looking|'m\s+looking|am\s+trying|'m\s+trying)\b|"
    r"\blooking\s+for\b|\blet\s+me\s+know\b",
    re.IGNORECASE,
)
# Telling something: a subject and a finite verb in English ("it is raining here", "I just got back"), a
# first-person subject, a closing particle or exclamation, or a degree word in Chinese ("腿好酸啊").
_EN_TELLING = re.compile(
    r"^\W*(?:(?:well|so|oh|btw|anyway|fyi|honestly|ugh|wow|man|ok|okay|yeah|hmm)\W+)*"
    r"(?:i|i'm|i've|i'd|i'll|we|we're|we've|it|it's|there|there's|this|that|he|she|they|my|our|"
    r"the\s+[\w-]+|today|yesterday|tonight)\b.*?"
    r"(?:\b(?:is|am|are|was|were|been|has|have|had|feel|feels|felt|got|get|gets|just|went|came|left|"
    r"did|do|does)\b|'(?:s|m|re|ve)\b|\b\w+ed\b)",
    re.IGNORECASE,
)
_ZH_TELLING = re.compile(
    r"(?<![给帮替让叫])我|咱|了(?!解)|[啊呀啦哦喔嘛呗]\s*[。！!~～]*$|[！!]\s*$|有点|很|太|挺|真|好(?!的)|特别|非常"
)
# A question word anywhere ("我最爱看哪类电影", "so where's the form"): asking, whatever the punctuation.
_ASKING = re.compile(
    r"[?？]|哪(?!怕)|啥|谁|咋|几|多少|多久|什么|怎|为何|是否|\b(?:what|which|who|whom|whose|where|when|why|how)\b",
    re.IGNORECASE,
)


def told_statement(text: str) -> bool:
    """Whether ``text`` tells something ("我今天有点累", "it is raining here") rather than asks, requests,
    greets, calculates, or asks to remember or forget: news the offline rules may or may not keep."""
    plain = text.strip()
    if (
        not plain
        or is_question(plain)
        or _ASKING.search(plain)
        or _REQUEST.search(plain)
        or is_calculation(plain)
    ):
        return False
    if has_forget_intent(plain) or has_remember_intent(plain) or not topic(plain):
        return False  # nothing of its own besides greetings and pronouns: "hello", "thanks, that helped"
    return bool(_ZH_TELLING.search(plain) or _EN_TELLING.search(plain))


def not_stored_reply(
    question: str, memories: Sequence[MemoryRecord] = (), tools: set[str] | None = None
) -> str | None:
    """For a statement the offline rules keep nothing of (checked against the extractor's own proposal):
    that it was not stored, and how to have it kept. None for anything else, and where the run keeps no
    memory at all (no ``remember`` among ``tools``): there nothing told is ever kept, and the answer is
    what the model can do."""
    if (
        (tools is not None and "remember" not in tools)
        or not told_statement(question)
        or wants_memory(question, memories)
        or _proposal(question, list(memories))
    ):
        return None
    if has_cjk(question):
        return (
            "这句话没有保存为长期记忆；离线规则只保存你明确要求记住的内容（如“记住……”）和你说明的偏好"
            "（如“我喜欢……”）。"
        )
    return (
        "I did not store that as a long-term memory: the offline rules keep only what you ask me to remember "
        "('remember that …') and preferences you state ('I prefer …')."
    )


def memory_answers(question: str) -> bool:
    """Whether only the user's memories can answer ``question``: what the user likes or does, what the
    assistant remembers of them, what they asked before; no tool or document is consulted for it."""
    if has_forget_intent(question):
        return False
    if about_user_as_a_whole(question):  # "tell me what you remember about me" names nothing to keep
        return True
    if has_remember_intent(question):
        return False
    asking = is_question(question) or asks(question) or bool(_ASKING.search(question))
    return asking and (about_user_life(question) or bool(_MEMORY_QUESTION.search(question)))


def memories_in_prompt(messages: Sequence[BaseMessage]) -> list[MemoryRecord]:
    """The recalled memories the system prompt carries (the marked data block), best first."""
    for message in messages:
        if isinstance(message, SystemMessage):
            block = _MEMORY_BLOCK.search(message.text)
            if block:
                return [
                    {
                        "id": m.group(1),
                        "memory_type": m.group(2),
                        "content": m.group(4),
                        "related": not m.group(3),
                    }
                    for m in _MEMORY_LINE.finditer(block.group(2))
                ]
    return []


def _proposal(question: str, memories: list[MemoryRecord]) -> dict[str, Any] | None:
    """What the offline extractor would write for this statement (ADD, or UPDATE for a correction)."""
    request = ExtractionRequest("", question, (), tuple(memories))
    for op in OfflineExtractor()(request)["operations"]:
        if op["action"] in {"ADD", "UPDATE"}:
            return op
    return None


def wants_memory(question: str, memories: Sequence[MemoryRecord] = ()) -> bool:
    """A statement to keep: an explicit "记住/remember", a stated preference, a fact about the user that
    needs their confirmation (health, finances, identity), or a new value for a fact a recalled memory
    holds (where the user lives, works, their name); never a question."""
    if has_forget_intent(question) or is_question(question):
        return False
    if has_remember_intent(question) or _PREFERENCE.search(question) or stated_preference(question):
        return True
    if stated_sensitive_fact(question) is not None:  # held for the user's confirmation, not kept
        return True
    return stated_new_value(question, memories) is not None


def plan_memory_steps(question: str, tools: set[str], messages: Sequence[BaseMessage]) -> list[Step] | None:
    """A ``remember`` call for a statement to keep, or None (a remember request is never arithmetic)."""
    memories = memories_in_prompt(messages)
    if memory_answers(question) or not_stored_reply(question, memories, tools) is not None:
        return []  # answered from memory, or said not to be stored: no tool call, no date, no search
    if "remember" not in tools or not wants_memory(question, memories):
        return None
    op = _proposal(question, memories)
    if op is None:
        return None
    args: dict[str, Any] = {"content": op["content"], "memory_type": op["type"]}
    if op["action"] == "UPDATE" and op.get("target_id"):
        args["replaces"] = op["target_id"]
    return [Step("remember", args)]


def _reason_zh(reason: str) -> str:
    if reason.startswith("sensitive data: "):
        labels = {v: v.split(" / ")[0] for v in LABELS.values()}
        kinds = "、".join(
            labels.get(k.strip(), k.strip()) for k in reason.removeprefix("sensitive data: ").split(", ")
        )
        return f"内容含有敏感信息（{kinds}），按记忆规则不能保存"
    if reason.startswith("content must be"):
        return "内容长度须在 4–400 个字符之间"
    return reason


def _reason_en(reason: str) -> str:
    if reason.startswith("sensitive data: "):
        labels = {v: v.split(" / ")[-1] for v in LABELS.values()}
        kinds = ", ".join(
            labels.get(k.strip(), k.strip()) for k in reason.removeprefix("sensitive data: ").split(", ")
        )
        return f"it contains sensitive data ({kinds}), which the memory rules never store"
    return reason


def describe_memory_result(tool: str, content: str, status: str, zh: bool) -> str | None:
    """The rules' actual verdict on a ``remember`` call, in the user's language; None for other tools."""
    if tool != "remember":
        return None
    if status == "error":
        match = _RULE_ERROR.search(content)
        if match is None:  # not a rule's refusal: saving failed, said as what failed (no rule to cite)
            reason = content.removeprefix("Error: ").strip()
            return (
                f"没有记住：保存这条记忆时出错（{reason}）。"
                if zh
                else f"Not remembered: saving it failed ({reason})."
            )
        rule, reason = match.group(1), match.group(2).strip()
        if zh:
            return f"没有记住：{_reason_zh(reason)}（规则 {rule}）。"
        return f"Not remembered: {_reason_en(reason)} (rule {rule})."
    try:
        data = json.loads(content)
    except ValueError:
        return None
    saved, memory_id = data.get("content") or "", data.get("id")
    if data.get("pending"):
        held = data.get("pending_id")
        if zh:
            return (
                f"这条涉及健康、财务或身份的信息还没有保存：{saved}。确认后才会记住："
                f"kb-agent memories confirm {held}（或 drop {held} 放弃）。"
            )
        return (
            f"Not saved yet: {saved} touches health, finances or identity, so it waits for your confirmation: "
            f"kb-agent memories confirm {held} (or drop {held})."
        )
    if data.get("note"):
        return (
            f"这条我之前已经记住了：{saved}（记忆 {memory_id}）。"
            if zh
            else (f"I already remember that: {saved} (memory {memory_id}).")
        )
    if data.get("replaced"):
        if zh:
            return f"好的，已更新记忆 {memory_id}：原来是“{data['replaced']}”，现在是“{saved}”。"
        return f'Updated memory {memory_id}: it was "{data["replaced"]}", now it is "{saved}".'
    return (
        f"好的，我记住了：{saved}（记忆 {memory_id}）。"
        if zh
        else f"Got it, I remember: {saved} (memory {memory_id})."
    )


def _lines(memories: Sequence[MemoryRecord]) -> str:
    return "\n".join(f"- {m['content']} [{m['id']}]" for m in memories)


def _everything_reply(memories: Sequence[MemoryRecord], zh: bool) -> str:
    """What the assistant remembers of the user as a whole: the facts first, then the questions asked."""
    facts = [m for m in memories if not is_history(m["content"])]
    asked = [m for m in memories if is_history(m["content"])]
    if facts:
        text = ("根据我记住的关于你的信息：\n" if zh else "From what I remember about you:\n") + _lines(facts)
        if asked:
            text += ("\n你还问过：\n" if zh else "\nYou also asked:\n") + _lines(asked)
        return text
    if asked:
        if zh:
            return "我没有记住关于你的事实或偏好；记下的只有你问过的问题：\n" + _lines(asked)
        return "I have kept no facts or preferences about you; only questions you asked:\n" + _lines(asked)
    if zh:
        return "我还没有记住关于你的任何信息（说“记住……”可以让我记下）。"
    return "I remember nothing about you yet (say 'remember …' to have me keep something)."


def _about_user_reply(question: str, messages: Sequence[BaseMessage], zh: bool) -> str | None:
    """Answer "我喜欢什么样的回答？" from the recalled memories recall judged related to it (a shared term,
    or close in meaning in either language), with their ids; a question with no subject of its own ("what
    do you know about me?") gets every recalled fact. A question about what the user asked before ("我之前
    问过什么？") is answered from those records only, any other from the rest. None when nothing recalled answers a question that may be
    about the documents ("what do I need on day one?"): the knowledge base is asked instead."""
    history = bool(_ASKED_BEFORE.search(question))
    if about_user_as_a_whole(question) and not history:  # recall put the user's facts first
        return _everything_reply(memories_in_prompt(messages), zh)
    wanted = {t for t in tokenize(question) if t not in term_set(_QUESTION_WORDS)}
    memories = [m for m in memories_in_prompt(messages) if is_history(m["content"]) == history]
    matching = [m for m in memories if m.get("related", True)] if wanted else memories
    if not matching:
        if not memory_answers(question):
            return None
        # Recall's closeness is weak across languages ("我玩什么乐器？" and "The user plays the cello"): the
        # closest memories are shown for what they are, as the closest passages of a search would be.
        closest = [m for m in memories if not m.get("related", True)][:CLOSEST_SHOWN]
        text = "我没有关于这个问题的记忆。" if zh else "I have no memory about that."
        if closest:
            head = (
                "\n我记得的关于你的其他信息（可能与此无关）：\n"
                if zh
                else "\nOther things I remember about you (they may not answer it):\n"
            )
            text += head + _lines(closest)
        return text
    return ("根据我记住的信息：\n" if zh else "From what I remember about you:\n") + _lines(matching)


def _forget_reply(question: str, messages: Sequence[BaseMessage], zh: bool) -> str:
    """Say which recalled memories the request names (the offline extractor's own choice, which the memory
    update applies after the answer), or that none does: never a promise to forget what is not there."""
    memories = memories_in_prompt(messages)
    by_id = {m["id"]: m for m in memories}
    ops = OfflineExtractor.forget(question, memories)
    named = [by_id[op["target_id"]] for op in ops if op["action"] == "DELETE" and op["target_id"] in by_id]
    if not named:
        if zh:
            return "我没有与此相符的记忆，所以没有可忘掉的内容（问我“你记得我什么”可以看到我记住的全部）。"
        return (
            "I have no memory that matches that, so there is nothing to forget (ask me what I remember about you to see them all)."
        )
    lines = "\n".join(f"- {m['content']} [{m['id']}]" for m in named)
    if zh:
        return f"回答之后，我会按记忆规则忘掉：\n{lines}\n（之后问我“你记得我什么”可以查看）"
    return f"After this answer I will forget, under the memory rules:\n{lines}\n(ask me what I remember about you to check)"


def _no_memory_reply(zh: bool, forgetting: bool, content: str = "") -> str:
    """The run offers no memory tool, so nothing is written after the answer either: say so."""
    if zh:
        what = "忘掉任何记忆" if forgetting else f"记住：{content}" if content else "保存长期记忆"
        return f"这里不能为你{what}（你的角色没有记忆写入权限，或长期记忆已关闭）。"
    what = (
        "forget any memory"
        if forgetting
        else f"keep this: {content}"
        if content
        else "keep long-term memories"
    )
    return f"I can't {what} here (your role has no memory rights, or long-term memory is off)."


def memory_reply(
    question: str, messages: Sequence[BaseMessage] = (), tools: set[str] | None = None
) -> str | None:
    """A reply when no memory tool ran: questions about the user, forget requests, statements to keep.

    ``tools``: the tools this run offers. Without ``remember`` (or ``forget``) the caller may not write
    memories, and the update after the answer writes none either, so nothing is promised."""
    zh = has_cjk(question)
    if has_forget_intent(question):
        if tools is not None and "forget" not in tools:
            return _no_memory_reply(zh, forgetting=True)
        return _forget_reply(question, messages, zh)
    # a fact about the user that recall found related: the question is about them, not the documents
    recalled = any(
        m.get("related", True) and not is_history(m["content"]) for m in memories_in_prompt(messages)
    )
    if memory_answers(question) or (
        is_question(question)
        and (_SELF_QUESTION.search(question) or (recalled and _ABOUT_ME.search(question)))
    ):
        return _about_user_reply(question, messages, zh)
    memories = memories_in_prompt(messages)
    if (untold := not_stored_reply(question, memories, tools)) is not None:
        return untold
    if not wants_memory(question, memories):
        return None
    op = _proposal(question, memories)
    if op is None:
        return None
    problem = content_problem(op["type"], op["content"], latest_user_message=question)
    if problem is not None:
        if zh:
            return f"没有记住：{_reason_zh(problem.reason)}（规则 {problem.rule}）。"
        return f"Not remembered: {_reason_en(problem.reason)} (rule {problem.rule})."
    if tools is not None and "remember" not in tools:
        return _no_memory_reply(zh, forgetting=False, content=op["content"])
    if zh:
        return f"这条会在回答之后按记忆规则保存：{op['content']}（之后问我“你记得我什么”可以查看）。"
    return f"This will be saved under the memory rules after this answer: {op['content']} (ask me what I remember about you to check)."
