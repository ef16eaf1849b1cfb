"""What the user asked and what a memory may hold: forget/remember intents and the sensitive-data check.

Both are rules the program applies (what may be stored, and what asks to forget), so they are plain, deterministic code with
Chinese and English phrasings; ``redact`` keeps what the audit history stores free of the same secrets.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

AUDIT_CHARS = 500


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


# -- sensitive data (rule 4) ---------------------------------------------------------------------
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_ID_CARD = r"[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx]"
_VALUE = r"\s*(?:number|no\.?|号码?|#)?\s*(?:是|为|:|=|is|was)?\s*"
# What names a personal identity number (China, passports, and the national ones of the US, Canada, the UK,
# Australia): the number that follows it is one, however it is grouped.
_ID_WORD = (
    r"身份证|证件号|护照|社保号|社会保险号|\bpassport|\bssn\b|social\s+security|\bsin\b|social\s+insurance"
    r"|\bni(?:no)?\b|national\s+insurance|\btfn\b|tax\s+file\s+number"
)
# What names a secret, and how a sentence sets one: "密码叫 …", "口令改成了 …", "PIN 码是 …", "pw: …",
# "passphrase is …", "set the password to …".
_SECRET_WORD = (
    r"(?:密码|口令|暗号|PIN\s*码?|\bpin(?:\s*code)?|\bpass(?:word|phrase|code)s?|\bpasswd|\bpwd|\bpw)"
)
_SET_TO = r"(?:叫做?|改成了?|改为|换成了?|设成了?|设为|设置为|设置成|变成了?|:|=|\bis\s+now|\b(?:set|changed?)\s+to|\bto)"
# A value that looks chosen rather than said: letters with digits or symbols, or a long run of them.
_SECRETISH = r"(?=[!-~]*(?:\d[!-~]*[A-Za-z]|[A-Za-z][!-~]*\d|[!#$%&*@^~]))[!-~]{4,}"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("id_card", re.compile(rf"(?<!\d){_ID_CARD}(?![\dA-Za-z])")),
    (
        "id_card",
        re.compile(
            rf"(?:{_ID_WORD}){_VALUE}[a-z]{{0,2}}\s?\d(?:[\da-z-]|\s(?=\d)){{5,}}",
            re.I,
        ),
    ),
    (
        "phone",
        re.compile(
            r"(?<![\w+])\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}[\s.-]?\d{3,4}[\s.-]?\d{3,4}(?!\d)"
        ),
    ),
    ("phone", re.compile(r"(?<![\d-])(?:\(\d{3}\)\s?|\d{3}[\s.-])\d{3}[\s.-]\d{4}(?![\d-])")),
    ("phone", re.compile(r"(?<!\d)0\d{2,3}-\d{7,8}(?!\d)")),
    (
        "phone",
        re.compile(r"(?:电话|手机|联系方式|\bphone|\bmobile|\bcell|\btel\b)\D{0,12}\d[\d\s-]{6,}\d", re.I),
    ),
    (
        "bank_card",
        re.compile(
            r"(?:银行卡|卡号|信用卡|储蓄卡|card\s+number|credit\s+card|\biban)\D{0,12}\d[\d\s.-]{10,}\d", re.I
        ),
    ),
    (
        "password",
        re.compile(rf"{_SECRET_WORD}\s*(?:已经|已|现在|now|still)?\s*{_SET_TO}\s*[!-~]{{3,}}", re.I),
    ),
    ("password", re.compile(rf"{_SECRET_WORD}\s*(?:是|为|:|=|is|was)\s*{_SECRETISH}", re.I)),
    (
        "password",
        re.compile(rf"{_SECRET_WORD}\s*(?:是|为|:|=|is|was)\s*\d{{4,}}(?![\d,%]|\.\d)", re.I),
    ),  # a PIN
    (
        "password",
        re.compile(r"(?:密码|口令|暗号)\s*(?:是|为)\s*[!-~]{3,}"),
    ),  # an ASCII value in a Chinese sentence
    ("password", re.compile(r"(?:密码|口令|PIN\s*码?)\s+\d{4,8}(?![\d,%]|\.\d)")),  # "支付密码 551234"
    ("password", re.compile(r"\bpass\s*phrase\s*(?:is|was|:|=)\s*[\w'-]+(?:\s+[\w'-]+)+", re.I)),
    (  # "I use X as my password", "用 X 做密码", "X is my PIN"
        "password",
        re.compile(
            rf"(?:\buse|\bchose|\bpicked|用|拿)\s*{_SECRETISH}\s*(?:as|for|做|当|作为)\s*(?:my|the|our|a)?\s*{_SECRET_WORD}"
            rf"|{_SECRETISH}\s+(?:is|was)\s+(?:my|the|our)\s+(?:new\s+)?{_SECRET_WORD}",
            re.I,
        ),
    ),
    ("api_key", re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}")),
    ("api_key", re.compile(r"\b(?:ghp|gho|ghs|github_pat|glpat|xox[abpr]|AKIA|ASIA|AIza)[A-Za-z0-9_-]{10,}")),
    ("api_key", re.compile(r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}")),
    ("api_key", re.compile(r"\bbearer\s+[\w.~+/-]{12,}", re.I)),
    (
        "api_key",
        re.compile(
            r"(?:api[\s_-]?key|secret|token|access[\s_-]?key|密钥|私钥|令牌|秘钥)\s*(?:是|为|:|=|is)\s*(?=\S*[\d_-])\S{6,}",
            re.I,
        ),
    ),
    ("api_key", re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{32,}(?![0-9A-Fa-f])")),
    (  # the whole block when it is there: header, body, footer
        "private_key",
        re.compile(
            r"-{2,}\s*begin\s+(?:[a-z0-9]+\s+)*private\s+key(?:\s+block)?[\s\S]*?"
            r"(?:-{2,}\s*end\s+(?:[a-z0-9]+\s+)*private\s+key(?:\s+block)?\s*-*|\Z)",
            re.I,
        ),
    ),
    ("email", _EMAIL),
)
# Chinese numerals, one character for one digit (so spans found in the translation fit the original):
# 一三八一二三四五六七八, 〇/零 for 0, 幺 as phone numbers are read aloud, and the financial 壹贰叁.
_ZH_DIGITS = str.maketrans("〇零幺一二三四五六七八九壹贰叁肆伍陆柒捌玖", "001123456789123456789")
_TOKENISH = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}")
_DIGIT_RUN = re.compile(r"(?<![\d+.])\+?\d(?:[\s.-]?\d){6,22}[Xx]?(?![\d.]\d)")
LABELS = {
    "phone": "电话号码 / phone number",
    "id_card": "身份证号 / ID number",
    "bank_card": "银行卡号 / bank-card number",
    "password": "密码 / password",
    "api_key": "密钥或令牌 / API key or token",
    "email": "邮箱地址 / e-mail address",
    "private_key": "私钥 / private key",
}


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _findings(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every sensitive span in ``text`` (already NFKC-normalised).

    Numbers written in Chinese numerals are found by reading them as digits: the translation keeps every
    position, so its spans are the original's.
    """
    spans = _spans(text)
    digits = text.translate(_ZH_DIGITS)
    if digits != text:
        spans += [span for span in _spans(digits) if span[0] in _NUMBER_KINDS]
    return spans


_NUMBER_KINDS = frozenset({"phone", "id_card", "bank_card"})


def _spans(text: str) -> list[tuple[str, int, int]]:
    spans = [(kind, m.start(), m.end()) for kind, p in _PATTERNS for m in p.finditer(text)]
    for m in _DIGIT_RUN.finditer(text):  # numbers written with spaces or dashes: 138 1234 5678
        compact = re.sub(r"[\s.+-]", "", m.group())
        if re.fullmatch(r"(?:86)?1[3-9]\d{9}", compact):
            spans.append(("phone", m.start(), m.end()))
        elif re.fullmatch(_ID_CARD, compact):
            spans.append(("id_card", m.start(), m.end()))
        elif compact.isdigit() and 16 <= len(compact) <= 19 and _luhn(compact):
            spans.append(("bank_card", m.start(), m.end()))
    spans += _phone_numbers(text)
    for m in _TOKENISH.finditer(text):  # long random-looking strings: base64/url-safe secrets
        token = m.group()
        if all(re.search(c, token) for c in ("[a-z]", "[A-Z]", "[0-9]")):
            spans.append(("api_key", m.start(), m.end()))
    return spans


_PHONE_REGIONS = ("CN", "US")  # numbers without a country code are read as Chinese, then North American


def _phone_numbers(text: str) -> list[tuple[str, int, int]]:
    """Phone numbers in any written form (dots, spaces, 0086, area codes), as libphonenumber finds valid
    ones; a plain run of digits that is no valid number (an order number, a date) is not one."""
    if sum(ch.isdigit() for ch in text) < 7:
        return []
    from phonenumbers import Leniency, PhoneNumberMatcher

    return [
        ("phone", match.start, match.end)
        for region in _PHONE_REGIONS
        for match in PhoneNumberMatcher(text, region, leniency=Leniency.VALID)
    ]


def sensitive_kinds(content: str, *, allow_email: bool = False) -> list[str]:
    """Which kinds of sensitive data ``content`` holds (empty: none)."""
    kinds = {kind for kind, _, _ in _findings(unicodedata.normalize("NFKC", content))}
    if allow_email:
        kinds.discard("email")
    return sorted(kinds)


def email_allowed(content: str, latest_user_message: str) -> bool:
    """The e-mail exception: the user asked to remember, and the address is in their own message."""
    if not has_remember_intent(latest_user_message):
        return False
    wanted = {m.lower() for m in _EMAIL.findall(unicodedata.normalize("NFKC", latest_user_message))}
    found = {m.lower() for m in _EMAIL.findall(unicodedata.normalize("NFKC", content))}
    return bool(found) and found <= wanted


def redact(text: str, limit: int = AUDIT_CHARS) -> str:
    """``text`` with sensitive spans replaced and cut to ``limit``: what the audit history may keep."""
    normal = unicodedata.normalize("NFKC", text or "")
    spans = sorted(_findings(normal), key=lambda span: (span[1], -span[2]))
    out, pos = [], 0
    for kind, start, end in spans:
        if start < pos:  # overlapping spans: the earlier redaction grows to cover both
            pos = max(pos, end)
            continue
        out.append(normal[pos:start] + f"[REDACTED:{kind}]")
        pos = end
    out.append(normal[pos:])
    result = "".join(out)
    return result if len(result) <= limit else result[:limit] + f"…(+{len(result) - limit} chars)"


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
