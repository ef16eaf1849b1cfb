"""A value bound to the noun that names it: a credential's, a lock's, a phone's or a bank account's.

People give a secret by naming what it is and then saying it, in any wording: "my VPN password got changed
to Kestrel-2291", "call my sister on 07823 456712", "sort code 20-00-00, account 55779911", "门禁 *1379#". So
a sentence is read as nouns and values. A noun of a sensitive family (a small lexicon of stems, not
sentences) binds a value that follows it in the same sentence, a few words on and not negated, or one said
to be it ("4821, that's my PIN"), when the value has the shape that family's secrets have. A value belongs
to the nearest noun before it, so a look-alike noun ("order", "tracking", "尾号", "会议号", "名称") keeps its
own number, and a value that is a date, a time, a price or a quantity is none of them. A number dialled
with a trunk 0 that no look-alike claims is a phone where some country writes it so (06 45 23 87 19).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from stores.memory.secret_kinds import dialled_abroad
from stores.memory.secret_statements import _ENDS_CLAUSE, _META_AFTER, CREDENTIAL, _is_value, _wanted

Span = tuple[str, int, int]

# Families beyond the credential words ``secret_statements`` already names. A family decides which value
# shapes it binds and what kind of secret it is.
_MORE_CREDENTIAL = re.compile(
    r"\bpuk\d?\b|\bpass\b(?!\s+(?:rate|mark|word|code|phrase|key))|\blog(?:s|ged|ging)?[\s-]?(?:in(?:to)?|on)\b|\bsign(?:s|ed|ing)?[\s-]?in(?:to)?\b|\blogin\b"
    r"|\bcredentials?\b|\bsecret\b|\b(?:api|access|secret|license|licence|product|host|master|encryption|signing|private)\s+keys?\b"
    r"|\b(?:auth|access|bearer|bot|api|refresh|session|github|slack|npm)\s?tokens?\b"
    r"|\btoken\b(?!\s+(?:limits?|counts?|budgets?|usage|window|size))|\btotp\b|\b2fa\b|\bmfa\b|\bwlan\b"
    # a Wi-Fi that qualifies another noun is that noun: "Wi-Fi router", "wifi 名称"
    r"|(?:\bwi-?fi\b|wifi|无线网)(?!\s*(?:router|modem|extender|repeater|adapter|signal|speed|card|chip|standard"
    r"|network\s+name|name|ssid|6|7|路由|信号|网速|速度|名称|名字))"
    r"|\bhotspot\b|\b(?:recovery|backup)\s+(?:codes?|keys?)\b"
    r"|登录|登陆|密钥|秘钥|令牌|(?:恢复|备用|备份)(?:代码|码|密钥)|热点|两步验证|验证器"
    # a command's credential option: curl -u user:pass, --password=…
    r"|(?<![\w-])(?:-[up]|--(?:user(?:name)?|pass(?:word|wd)?|token|api-key|secret))(?=[\s=])"
    r"|(?:背面|背后|反面)[^，。,\s]{0,3}?[三3](?:个|位)(?:数字?|码)?|\b(?:three|four|3|4)\s+(?:digits?|numbers?)\s+on\s+the\s+back\b"
    # a variable named for a credential, as in a config line: DB_PASSWORD=…, smtp_pass: …
    r"|(?<![A-Za-z0-9_])(?:[A-Za-z0-9]+_)*(?:pass(?:word)?|passwd|pwd|secret|token|api_?key|pin)(?:_[A-Za-z0-9]+)*"
    r"(?=\s*[=:])",
    re.I,
)
_LOCK = re.compile(
    r"\b(?:safe|vault|keypad|alarm|padlock|locker|lock|lockbox|key\s?box|key\s?safe|combo|gate|door|garage"
    r"|intercom|buzzer|codes?|entry|entrance)s?\b|\b(?:punch(?:ed|ing)?|key(?:ed|ing)?|tap(?:ped|ping)?)\s+in\b"
    r"|(?:输入?|键入|按下?)(?=\s*[\d*#])"  # keys pressed: "输 1502", not "按年份" (according to)
    r"|门禁|保险柜|保险箱|密码箱|密码锁|门锁|电子锁|指纹锁|大门|单元门|车库门|[门箱柜]锁",
    re.I,
)
# What something opens with is its credential: "my old Hotmail still opens with 'butterfly07'".
_OPENS = re.compile(
    r"\b(?:opens?|opened|unlocks?|unlocked|gets?\s+(?:me\s+|you\s+)?in(?:to)?|got\s+(?:me\s+)?in)\s+(?:with|using|via)\b",
    re.I,
)
# What names a personal identity number: the number that follows it is one, however it is grouped.
_IDENTITY = re.compile(
    r"\b(?:ssn|sin|social\s+(?:security|insurance)(?:\s+number)?|passport(?:\s+(?:number|no\.?))?"
    r"|national\s+insurance(?:\s+number)?|ni\s+number|tax\s+file\s+number|tfn|driver'?s?\s+licen[cs]e(?:\s+number)?)\b"
    r"|身份证(?:号码?)?|护照(?:号码?)?|通行证(?:号码?)?|证件号码?|社保号|驾驶证|驾照",
    re.I,
)
_PHONE = re.compile(
    r"\b(?:phone|cell|mobile|tel|telephone|landline|whatsapp|call(?:ed|ing)?|ring|text\s+(?:me|him|her|them)"
    r"|reach(?:ed)?|dial|numbers?|contact|fax|ping\s+me|hit\s+me\s+up)\b"
    r"|电话|手机|座机|号码|联系|打给|拨打|打我|找我|微信",
    re.I,
)
_ACCOUNT = re.compile(
    r"\b(?:(?:bank|checking|savings?|current|deposit)\s+)?(?:account|acct)(?:\s+(?:number|no\.?|#))?"
    r"|\bsort\s+code\b|\brouting(?:\s+number)?\b|\baba\b|\bbsb\b"
    r"|账号|帐号|账户|帐户|户号",
    re.I,
)
# An account number is a bank's only where the sentence is about a bank: "QQ 账号 12345678" is no secret.
_BANK = re.compile(
    r"bank|sort\s+code|routing|bsb|\baba\b|checking|savings|iban|swift|wire|transfer|deposit|银行|公积金|对公|开户|转账|汇款"
    r"|储蓄|存折|工资",
    re.I,
)
# Nouns that own a number of their own: a value after one of them is that, not a secret.
_OTHER = re.compile(
    r"\b(?:(?:orders?|tracking|parcel|shipment|invoice|receipt|ticket|booking|reservation|confirmation|flight"
    r"|train|seat|room|suite|apt|floor|isbn|sku|barcode|ean|upc|serial|model|version|build|release|commit|pr"
    r"|issue|bug|error|status|exit|cve|request|trace|meeting|case|reference|ref|postcode|zip|postal|area"
    r"|country|stock|ticker|coupon|promo|discount|voucher|referral|invite|invitation|source|qr|bar|swift|bic"
    r"|product|part|course|airport|tax|vat|registration|company|policy|member(?:ship)?|customer|client"
    r"|student|employee|staff|vehicle|plate|table|platform|step|episode|track|lottery|house|street|road"
    r"|avenue|bus|route|channel|batch|lot|item|extension|ext|port)(?:\s+(?:numbers?|no\.?|ids?|codes?|refs?))?"
    r"|(?:door|gate|locker|user|page)\s+(?:numbers?|no\.?|#|ids?)(?=\s+(?:is\s+)?[A-Z]?\d{1,4}\b)"
    r"|gate\s+(?=[A-Z]?\d{1,3}\b)"
    r"|(?:boarding|bus|season|day|ski|hall|guest)\s+pass|network\s+name|ssid|called|named|username|user\s+id|id|ends?\s+in|ending\s+in|last\s+(?:four|4|three|3)"
    r"|price|total|numbers?\s+of|public\s+key|fingerprint|hash|sha\d*|md5|checksum|digest)\b"
    r"|(?:订单|单号|快递|物流|运单|发票|工单|合同|会议|房间|航班|车次|座位|邮编|股票|条码|型号|版本|批次|优惠券?|券"
    r"|错误|报错|出错|状态|返回"
    r"|名称|名字|用户名|会员|学号?|工号?|门牌|社会信用|商品|序列|邮政|[0-9]室|楼|栋|单元(?!门))"
    r"(?:号码|编号|代码|号|码)?|编号|尾号|[后前][四六468]位",
    re.I,
)
# Words in the gap that stop a value from being given: negation, a question, "not", "别".
_NOT_GIVEN = re.compile(
    r"\b(?:not|never|isn'?t|wasn'?t|without|instead\s+of)\b|不是|没有|不能|不要|不可|不应|别|勿|[?？]", re.I
)

NEGATION = re.compile(r"\b(?:not|never|isn'?t|wasn'?t)\b|不是|没有|不能|不要|别|勿", re.I)

# Value shapes. A run of digits, with single spaces, dots, dashes or commas between them, optionally a
# leading + or a bracketed area code, and the * or # a keypad takes.
_DIGITS = re.compile(
    r"(?<![A-Za-z0-9_.\-/])[*#]?\+?(?:\(\d{1,4}\)\s?)?\d(?:[\s.,\-]?\d|[\s.\-]?\(\d{1,4}\))*(?:-?[*#])?"
    r"(?![A-Za-z0-9_/])"
)
_MIXED = re.compile(
    r"(?<![A-Za-z0-9_@./-])(?=[\w!#$%&*@^~+.-]*[A-Za-z])(?=[\w!#$%&*@^~+.-]*(?:\d|[!#$%&*@^~][\w!#$%&*@^~+.-]))"
    r"[A-Za-z\d!#$%&*@^~_+.\-]{4,64}={0,2}"
    r"(?<![.,;:!?])(?![A-Za-z0-9_@/])"
)
_QUOTED = re.compile(r"(?<![A-Za-z])['\"“‘「『《]([^'\"”’」』》\n]{1,40})['\"”’」』》](?![A-Za-z])")
_NUMBERS = re.compile(r"(?<![\d.])\d{1,2}(?![\d.%])")
_SENTENCE = re.compile(r"[。！？!?\n;；]|\.(?=\s|$)")

# What a number is when it is not a secret: a date, a time, a price, a quantity, a version.
_DATE_PARTS = re.compile(r"(\d{1,4})[-./](\d{1,2})(?:[-./](\d{2,4}))?")
UNIT_AFTER = re.compile(
    r"\s*(?:%|‰|年|月|日|号(?!码)|点|时|分|秒|元|块|角|毛|美元|欧|镑|岁|次|天|周|个|位|楼|层|室|栋|斤|公斤|克|米|公里|级|届"
    r"|(?:k?g|lbs?|cm|mm|km|m|mb|gb|tb|kb|ms|hz|px|pt|mph)\b"
    r"|(?:years?|months?|weeks?|days?|hours?|hrs?|minutes?|mins?|seconds?|secs?|times?|characters?|chars?"
    r"|digits?|letters?|words?|people|dollars?|euros?|pounds?|yuan|usd|eur|gbp|rmb|cny|am|pm|st|nd|rd|th"
    r"|percent|points?|items?|pages?|steps?|tries|attempts?|tokens?)\b)",
    re.I,
)
_CURRENCY_BEFORE = re.compile(r"(?:[$¥￥€£]|\b(?:usd|eur|gbp|rmb|cny|hkd)|\brs\.?)\s*$", re.I)
_TIME_BEFORE = re.compile(r"\b(?:in|since|until|till|before|after|from|during|back\s+in|by|around)\s+$", re.I)
_CLOCK_BEFORE = re.compile(r"\b(?:at|for|until|till|by|from)\s+$", re.I)
_VERSION = re.compile(r"v?\d{1,4}(?:\.\d{1,3}){1,3}(?:[-+][\w.]+)?[a-z]?", re.I)


def _is_date(raw: str) -> bool:
    """A day, month and year in some order, each in range: 2024-03-15, 15.03.2024, 11/26; not 20-00-00."""
    m = _DATE_PARTS.fullmatch(raw)
    if not m:
        return False
    parts = [int(p) for p in m.groups() if p is not None]
    if len(m.group(1)) == 4:
        return 1 <= parts[1] <= 12 and (len(parts) < 3 or 1 <= parts[2] <= 31)
    a, b = parts[0], parts[1]
    return (1 <= a <= 31 and 1 <= b <= 12) or (1 <= a <= 12 and 1 <= b <= 31)


def _digit_value(text: str, m: re.Match[str]) -> str | None:
    """The digits of a number that could be a secret, or None when it is a date, time, price or quantity."""
    raw = m.group()
    if _is_date(raw) or _VERSION.fullmatch(raw) or re.match(r":\d", text[m.end() : m.end() + 2]):
        return None  # a date, a version, or a time's hour ("08" of 08:15)
    date = _DATE_PARTS.match(raw)
    if date and _is_date(date.group()) and re.fullmatch(r"\s\d{1,2}", raw[date.end() :]):
        return None  # "2025-01-03 08" of "2025-01-03 08:15"
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+", raw) or re.fullmatch(r"\d+\.\d{1,2}", raw):
        return None  # 1,299 and 65.5 are amounts
    if UNIT_AFTER.match(text, m.end()) or _CURRENCY_BEFORE.search(text, max(0, m.start() - 6), m.start()):
        return None
    before = text[max(0, m.start() - 12) : m.start()]
    if re.fullmatch(r"(?:19|20)\d{2}", raw) and _TIME_BEFORE.search(before):
        return None  # "changed in 2019" is a year
    if re.fullmatch(r"(?:[01]\d|2[0-3])[0-5]\d", raw) and _CLOCK_BEFORE.search(before):
        return None  # "the alarm is set for 0630" is a time
    return re.sub(r"\D", "", raw)


def _mixed_value(token: str) -> bool:
    """A token with letters and digits (or a symbol) that is no version, date or file name."""
    if _VERSION.fullmatch(token) or _is_date(token) or re.fullmatch(r"\d{1,3}-[a-z]{3,}", token, re.I):
        return False  # "4-digit", "12-hour": a length or a span, said as an adjective
    if re.fullmatch(
        r"[\w-]+\.(?:com|org|net|cn|io|txt|pdf|docx?|xlsx?|png|jpe?g|zip|py|js|json|md)", token, re.I
    ):
        return False
    return bool(re.search(r"\d", token)) or len(token) >= 6


# "sign in", "log in", "pass" and "key in" are what someone does; after a determiner they are things.
_VERB_NOUN = re.compile(r"(?:sign|log|pass|key|tap|punch)\b", re.I)
_DETERMINED = re.compile(r"\b(?:a|an|the|this|that|these|those|one|each|every|some|any|no)\s+$", re.I)


# A word glued by ":" to what follows is part of a token ("build:Qu4rtz-19" is user:password), not a label.
_GLUED = re.compile(r":[!-~]")


def _nouns(text: str) -> list[tuple[int, int, str]]:
    """(start, end, family) of every noun that names something a value may belong to, by where they end."""
    found = []
    for family, pattern in (
        ("password", CREDENTIAL),
        ("password", _MORE_CREDENTIAL),
        ("lock", _LOCK),
        ("opens", _OPENS),
        ("identity", _IDENTITY),
        ("phone", _PHONE),
        ("account", _ACCOUNT),
        ("other", _OTHER),
    ):
        found += [
            (m.start(), m.end(), family)
            for m in pattern.finditer(text)
            if not (
                _VERB_NOUN.match(m.group()) and _DETERMINED.search(text, max(0, m.start() - 12), m.start())
            )
            and not (family == "other" and m.group().isascii() and _GLUED.match(text, m.end()))
        ]
    others = sorted((start, end) for start, end, family in found if family == "other")
    other_starts = [start for start, _ in others]

    def overlapped(noun: tuple[int, int, str]) -> bool:  # look-alike nouns are short: look 40 back
        first, last = bisect_left(other_starts, noun[0] - 40), bisect_left(other_starts, noun[1])
        return any(end > noun[0] for _, end in others[first:last])

    found = [noun for noun in found if noun[2] == "other" or not overlapped(noun)]
    # nearest last; at one end a look-alike noun wins: "发票号码" is the invoice's, not a phone's
    found.sort(key=lambda noun: (noun[1], noun[2] == "other", noun[1] - noun[0]))
    return found


def _values(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, shape, digits) of every value-like token: digits, mixed tokens, quoted strings."""
    for m in _DIGITS.finditer(text):
        digits = _digit_value(text, m)
        if digits and len(digits) >= 3:
            yield m.start(), m.end(), "digits", digits
    for m in _MIXED.finditer(text):
        if not m.group().isdigit() and _mixed_value(m.group()):
            yield m.start(), m.end(), "mixed", ""
    for m in _QUOTED.finditer(text):
        inner = m.group(1)
        if not CREDENTIAL.search(inner) and _is_value(inner, zh=bool(re.search(r"[\u3400-\u9fff]", inner))):
            yield m.start(1), m.end(1), "quoted", ""


def _accepts(family: str, shape: str, digits: str, value: str, sentence: str) -> str | None:
    """The kind of secret ``family`` makes of a value of this shape, or None."""
    if family == "password":
        return "password" if shape in {"mixed", "quoted"} or len(digits) >= 3 else None
    if family == "opens":  # a token or a code; a quoted phrase is a title ("the show opens with 'Hamlet'")
        if shape == "quoted":
            return "password" if re.search(r"\d", value) else None
        return "password" if shape == "mixed" or len(digits) >= 3 else None
    if family == "lock":
        keyed = bool(re.search(r"[*#]|\d[\s-]\d", value))
        return "password" if shape == "digits" and (len(digits) >= 4 or keyed) else None
    if family == "identity":
        return "id_card" if shape in {"digits", "mixed"} and sum(ch.isdigit() for ch in value) >= 6 else None
    if family == "phone":
        return "phone" if shape == "digits" and 7 <= len(digits) <= 15 else None
    if family == "account":
        bank = _BANK.search(sentence)
        return "bank_account" if shape == "digits" and len(digits) >= 6 and bank else None
    return None


def sentence_of(text: str, at: int, reach: int = 240) -> str:
    """The sentence around ``at``, read at most ``reach`` characters either way (a long text costs no more)."""
    low = max(0, at - reach)
    begin = max((m.end() for m in _SENTENCE.finditer(text, low, at)), default=low)
    stop = _SENTENCE.search(text, at, at + reach)
    return text[begin : stop.start() if stop else min(len(text), at + reach)]


def bound_values(text: str) -> list[Span]:
    """(kind, start, end) of every value a sensitive noun binds in ``text`` (already in normal form)."""
    spans: list[Span] = []
    if not _ANY_VALUE.search(text):
        return spans
    values = list(_values(text))
    if not values:  # most text holds nothing a noun could bind; its nouns need not be read
        dials = _combinations(text, _nouns(text)) if len(_NUMBERS.findall(text)) >= 3 else []
        return spans + dials
    nouns = _Nouns(
        [noun for noun in _nouns(text) if noun[2] == "other" or not _META_AFTER.match(text, noun[1])]
    )
    for start, end, shape, digits in values:
        kind = _kind_of(text, nouns, start, end, shape, digits)
        if kind:
            spans.append((kind, start, end))
    spans += [("password", m.start("value"), m.end("value")) for m in _PAIR.finditer(text)]
    return spans + _combinations(text, nouns.all)


_ANY_VALUE = re.compile(r"\d|['\"“‘「『]")
_HAS_DIGIT = re.compile(r"\d")


def _kind_of(text: str, nouns: _Nouns, start: int, end: int, shape: str, digits: str) -> str | None:
    """What secret the value at ``start:end`` is, by the noun it belongs to (or its own shape), or None."""
    value = text[start:end]
    if shape != "digits" and _HAS_DIGIT.search(value) and _FOR_ACCOUNTS.match(text, end):
        return "password"
    named = _named_after(text, nouns, start, end)
    kind = _accepts(named, shape, digits, value, sentence_of(text, start)) if named else None
    if kind:
        return kind
    owner = nouns.ending_by(start)
    near = owner is not None and start - owner[1] <= 48
    if near and owner is not None and owner[2] != "other" and _bound(text, nouns, owner, start, end, shape):
        kind = _accepts(owner[2], shape, digits, value, sentence_of(text, start))
    if kind is None and shape == "digits" and not (near and owner is not None and owner[2] == "other"):
        kind = "phone" if dialled_abroad(text, start, end) else None
    return kind


def _bound(text: str, nouns: _Nouns, owner: tuple[int, int, str], start: int, end: int, shape: str) -> bool:
    """Whether ``owner`` binds the value: same sentence, not negated, not qualifying the noun after it."""
    if any(noun[2] == "other" for noun in nouns.starting_in(end, end + 2)):
        return False  # "the lock 2019 model": the number qualifies the noun after it
    gap = text[owner[1] : start]
    if _SENTENCE.search(gap) or _NOT_GIVEN.search(gap):
        return False
    word = text[owner[0] : owner[1]]
    generated = shape == "mixed" and end - start >= 16 and word.lower() == "key"
    before = text[max(0, owner[0] - 80) : owner[0]]
    # a bare "key" binds only what looks generated: "the Mailgun key is key-3ax6…"
    return owner[2] != "password" or generated or _wanted(word, gap + text[start:end], before)


_CLAIMED = re.compile(rf"(?:{_OTHER.pattern})[\s:：#是为]*$", re.I)


def claimed(text: str, start: int) -> bool:
    """Whether a look-alike noun right before ``start`` owns the number there ("学号 2021110456")."""
    return bool(_CLAIMED.search(text, max(0, start - 16), start))


class _Nouns:
    """Nouns found in a text, looked up by where they end and where they start in log time."""

    def __init__(self, nouns: list[tuple[int, int, str]]) -> None:
        self.all = nouns  # sorted by end, the nearest owner last among equals
        self._ends = [noun[1] for noun in nouns]
        self._by_start = sorted(nouns, key=lambda noun: noun[0])
        self._starts = [noun[0] for noun in self._by_start]

    def ending_by(self, at: int) -> tuple[int, int, str] | None:
        """The noun that ends nearest before ``at``."""
        i = bisect_right(self._ends, at)
        return self.all[i - 1] if i else None

    def ending_in(self, low: int, high: int) -> list[tuple[int, int, str]]:
        return self.all[bisect_left(self._ends, low) : bisect_right(self._ends, high)]

    def starting_in(self, low: int, high: int) -> list[tuple[int, int, str]]:
        return self._by_start[bisect_left(self._starts, low) : bisect_right(self._starts, high)]


# A value then whose it is: "4821, that's my PIN", "0151 2345678 is Oma's number", "xyz99 是我的 wifi".
_OWNED_AS = re.compile(
    r"\s*[,，—–-]?\s*(?:(?:that|this|it|which)(?:'s|’s|\s+is|\s+was)|is|was|would\s+be|will\s+be|=|就是|这是|那是"
    r"|是|为|作为|当作?)\s*(?:(?:my|our|his|her|their|the\s+user'?s|[A-Z][a-z]+'?s)\s+|(?:我|我们|他|她|家里|公司)的?)"
    r"|\s*(?:这个|那个)",
)


# A token used for accounts is their password, named or not: "uses 'orchid1990' for most streaming sites".
_FOR_ACCOUNTS = re.compile(
    r"['\"”’」』]?\s+(?:for|on|across|with)\s+(?:[\w'’-]+\s+){0,3}?(?:sites|websites|accounts|logins|apps"
    r"|services|platforms)\b|['\"”’」』]?\s*(?:当|做|作为)\S{0,6}?(?:网站|账号|账户|应用)",
    re.I,
)


# A user name and a password given as a pair after what they open: "Grandma's Facebook is rose.m52 / garden1951".
_PAIR = re.compile(
    r"(?:\bis|[:=：])\s*(?=[\w.@+-]*[A-Za-z])[\w.@+-]{3,40}\s?/\s?"
    r"(?P<value>(?=[!-~]*\d)(?=[!-~]*[A-Za-z])[A-Za-z\d!#$%&*@^~_+.\-]{5,64})(?![\w/])",
    re.I,
)


def _named_after(text: str, nouns: _Nouns, start: int, end: int) -> str | None:
    """The family of a noun the value is said to be, right after it, when nothing claims it before."""
    owned = _OWNED_AS.match(text, end)
    if not owned:
        return None
    if any(noun[2] == "other" for noun in nouns.ending_in(start - 12, start)):
        return None
    after = nouns.starting_in(owned.end(), owned.end() + 30)
    if not after or after[0][2] == "other":
        return None
    between = text[owned.end() : after[0][0]]
    if not re.fullmatch(r"(?:[\w'’-]+\s*){0,3}", between) or not _ENDS_CLAUSE.match(text, after[0][1]):
        return None  # "123456 这种密码太常见了" goes on to judge it
    return after[0][2]


def _combinations(text: str, nouns: list[tuple[int, int, str]]) -> list[Span]:
    """A lock's dial read out as three or more small numbers in its sentence: "左转到 27，右转到 8，再左到 41"."""
    spans: list[Span] = []
    for _, end, family in nouns:
        if family != "lock":
            continue
        stop = _SENTENCE.search(text, end, end + 60)
        numbers = [
            m
            for m in _NUMBERS.finditer(text, end, stop.start() if stop else end + 60)
            if not UNIT_AFTER.match(text, m.end()) and ":" not in text[max(0, m.start() - 1) : m.end() + 1]
        ]
        if len(numbers) >= 3:
            spans.append(("password", numbers[0].start(), numbers[-1].end()))
    return spans
