"""What the user asked and what a memory may hold: forget/remember intents and the sensitive-data check.

Both are rules the program applies (what may be stored, and what asks to forget), so they are plain, deterministic code with
Chinese and English phrasings. The sensitive-data check itself lives in :mod:`stores.memory.secrets`; its
names are here too, beside the rules that use them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from stores.memory.secrets import AUDIT_CHARS, LABELS, addresses_given, redact, sensitive_kinds, withheld

__all__ = [
    "AUDIT_CHARS",
    "LABELS",
    "email_allowed",
    "has_forget_intent",
    "has_remember_intent",
    "high_risk",
    "memory_tool_ran",
    "redact",
    "sensitive_kinds",
    "withheld",
]


# -- intents ---------------------------------------------------------------------------------------
# A delete verb and what is remembered, in either order ("删掉关于我的记忆", "把关于我的记忆都删掉").
_ZH_DELETE_VERB = r"(?:删除|删掉|删了|清除|清空|清掉|移除|抹掉|去掉)"
_ZH_REMEMBERED = r"(?:记忆|记住的|记下的|记得的)"
_ZH_DELETE_MEMORY = re.compile(
    rf"{_ZH_DELETE_VERB}.{{0,30}}{_ZH_REMEMBERED}|{_ZH_REMEMBERED}.{{0,12}}{_ZH_DELETE_VERB}(?![^。！？!?]*[吗？?])"
)
_ZH_STOP_REMEMBERING = re.compile(r"(?:不要|别|不用|无需|不必)再?(?:记住|记着|记得|记)")
_ZH_FORGET = re.compile(r"忘掉|忘记|忘了|忘却")
_ZH_CLAUSE = re.compile(r"[。！？!?，,；;\n]")
_ZH_SELF_SUBJECT = re.compile(r"(?<![帮让给])(?:我|他|她)")
_ZH_REQUEST = re.compile(r"请|麻烦|你|帮我|让")
_EN_DELETE_MEMORY = re.compile(
    r"\b(?:delete|remove|erase|drop|clear|wipe|purge)\b.{0,40}"
    r"\b(?:memor(?:y|ies)|you\s+(?:remember|know)\b)"
)
_EN_STOP_REMEMBERING = re.compile(
    r"\b(?:don'?t|do\s+not|stop|no\s+longer)\s+(?:remember(?:ing)?|stor(?:e|ing)|keep(?:ing)?)\b"
)
_EN_FORGET = (
    re.compile(
        r"^\W*(?:ok\W+|now\W+)?(?:please\s+|pls\s+)?(?:(?:can|could|would|will)\s+you\s+)?(?:please\s+)?forget\b"
    ),
    re.compile(r"\b(?:want|need|ask|asking)\s+you\s+to\s+forget\b"),
    re.compile(r"\bforget\s+(?:about\s+)?(?:that|this|it|everything|all|what|my|me|the)\b"),
)
_EN_NOT_FORGET = re.compile(r"\b(?:don'?t|do\s+not|never|won'?t|i|we|they)\s+(?:ever\s+)?(?:forget|forgot)\b")
_EN_SUBJECT_BEFORE = re.compile(r"\b(?:i|we|they|he|she)\s*$")
_REMEMBER = re.compile(
    r"(?<![不别])(?:记住|记下|记一下|记着)|(?<!don't )(?<!dont )(?<!not )\bremember\b|\bkeep\s+in\s+mind\b|\bnote\s+(?:that|down)\b|\bsave\b"
)


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").lower().replace("\u2019", "'")


def _zh_forget_request(plain: str) -> bool:
    """忘掉/忘记 as a request ("请忘掉…", "帮我忘了…"), not a report ("我忘了密码", "我把密码忘了")."""
    for match in _ZH_FORGET.finditer(plain):
        clause = _ZH_CLAUSE.split(plain[: match.start()])[-1]
        head = clause.split("把", 1)[0]  # the subject stands before 把: "我把钥匙忘了" vs "把这个忘了"
        if _ZH_SELF_SUBJECT.search(head) and not _ZH_REQUEST.search(head):
            continue
        if re.match(r"[了]?吗[？?]?\s*$", plain[match.end() : match.end() + 4]):
            continue  # "你忘了吗？" asks, it does not request
        return True
    return False


def has_forget_intent(text: str) -> bool:
    """An explicit request to forget, in Chinese or English ("我忘了密码", "don't forget" are not)."""
    plain = _plain(text)
    if _ZH_DELETE_MEMORY.search(plain) or _ZH_STOP_REMEMBERING.search(plain) or _zh_forget_request(plain):
        return True
    if _EN_DELETE_MEMORY.search(plain):
        return True
    stop = _EN_STOP_REMEMBERING.search(plain)
    if stop and not _EN_SUBJECT_BEFORE.search(plain[: stop.start()]):
        return True  # "don't remember that" requests; "I don't remember where" reports
    return any(p.search(plain) for p in _EN_FORGET) and not _EN_NOT_FORGET.search(plain)


def has_remember_intent(text: str) -> bool:
    plain = _plain(text)
    return bool(_REMEMBER.search(plain)) and not has_forget_intent(text)


MEMORY_TOOLS = frozenset({"remember", "forget"})


def memory_tool_ran(messages: Sequence[BaseMessage]) -> bool:
    """True when the latest turn already changed memory through a tool (extraction would only repeat it)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return False
        if isinstance(message, ToolMessage) and message.name in MEMORY_TOOLS:
            return True
    return False


# -- sensitive data (rule 4): found by what it is, in stores.memory.secrets -----------------------------
def email_allowed(content: str, latest_user_message: str) -> bool:
    """The e-mail exception: the user asked to remember, and the address is in their own message."""
    return has_remember_intent(latest_user_message) and addresses_given(content, latest_user_message)


# High-risk subjects: remembered only once the user confirms. Words, not a classifier: a miss
# is stored as usual, a false alarm costs one confirmation.
_HIGH_RISK = {
    "health": re.compile(
        r"病|药|诊断|怀孕|抑郁|焦虑症|手术|过敏|血压|血糖|癌|艾滋|HIV|精神|心理咨询|"
        r"\b(?:diagnos\w*|illness|disease|medication|medicine|pregnan\w*|depress\w*|anxiety|surgery|"
        r"allerg\w*|blood pressure|diabet\w*|cancer|therapy|therapist|mental health)\b",
        re.I,
    ),
    "finances": re.compile(
        r"工资|薪水|月薪|年薪|收入|存款|负债|欠款|贷款|房贷|信用卡|投资|股票|理财|资产|"
        r"\b(?:salary|income|savings|debt|loan|mortgage|credit card|invest\w*|stocks?|net worth|bank account)\b",
        re.I,
    ),
    "identity": re.compile(
        r"宗教|信仰|政治|党员|性取向|同性恋|民族|种族|国籍|护照|"
        r"\b(?:religio\w*|political|sexual orientation|gay|lesbian|ethnicity|race|nationality|passport)\b",
        re.I,
    ),
}


def high_risk(content: str) -> str | None:
    """The high-risk subject ``content`` touches (health, finances, identity), else None."""
    for subject, pattern in _HIGH_RISK.items():
        if pattern.search(content or ""):
            return subject
    return None
