"""Which day a date question is about: today, a day counted from it, or a calendar date.

:func:`read_dates` finds the day references of a request ("明天", "下周三", "3 天后", "上个月", "2027年1月1日",
"in 3 days", "next Friday", "2027-03-14") and turns each into arguments of ``get_current_date`` (``{}`` is
today). Then, in one place, it checks what is left: a word that still names a day or a time the rules could
not work out ("上个农历月初一", "周末", "last Friday" — this week's or last week's?, "3 小时后") makes the
reading :attr:`DateReading.unread`, and the model declines rather than answer with today's date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from models.offline.calculation_words import normalized
from models.offline.numbers import en_number, zh_number

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_ZH_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6, "1": 0, "2": 1, "3": 2,
               "4": 3, "5": 4, "6": 5, "7": 6}  # fmt: skip
_MONTH_NAMES = [
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
    ("december", "dec"),
]  # fmt: skip
_MONTHS = {name: i + 1 for i, names in enumerate(_MONTH_NAMES) for name in names}
_QUALIFIER = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2, "last": -1, "this": 0, "next": 1}
_YEAR_WORD = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_UNIT = {"天": "days", "日": "days", "周": "weeks", "星期": "weeks", "礼拜": "weeks", "月": "months", "年": "years",
         "day": "days", "week": "weeks", "month": "months", "year": "years"}  # fmt: skip
_N = r"(?:\d+|[零〇一二两三四五六七八九十百]+)"
_EN_N = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|[a-z]+teen|twenty(?:[\s-]\w+)?|thirty|forty|fifty|sixty|hundred)"
_WEEKDAY_EN = "|".join(WEEKDAYS)
_MONTH_EN = "|".join(sorted(_MONTHS, key=len, reverse=True))
_Q = r"(?P<q>上上|下下|上|下|这|本)"


@dataclass(frozen=True)
class DayReference:
    """One day a request names: where, in its words, and as ``get_current_date`` arguments."""

    start: int
    end: int
    text: str
    args: dict[str, Any]
    anchor: bool = False  # "下个月的今天", "明年今天": today as where the counting starts, not a day asked


@dataclass
class DateReading:
    """What a request asks about days: whether it asks at all, the days it names, and what it could not read."""

    asks: bool = False
    days: list[DayReference] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    counts_days: bool = False  # "还有多少天", "how many days until"
    asked: list[tuple[int, int]] = field(default_factory=list)  # where it asks: "几号", "what day"

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Where the request names days or asks for one (not arithmetic, nor other words, for the
        calculation reader)."""
        return [(d.start, d.end) for d in self.days] + (self.asked if self.asks else [])

    def arguments(self) -> list[dict[str, Any]]:
        """The distinct ``get_current_date`` arguments of the days asked about, in order (today alone: one ``{}``)."""
        out: list[dict[str, Any]] = []
        for args in [d.args for d in self.days if not d.anchor] or [{}]:
            if args not in out:
                out.append(args)
        return out


def _n(raw: str) -> int | None:
    raw = raw.strip().lower()
    if raw.isdigit():
        return int(raw)
    if raw in ("a", "an"):
        return 1
    value = zh_number(raw)
    if value is None:
        value = en_number(raw)
    return int(value) if value is not None and float(value).is_integer() else None


def _zh_year(raw: str) -> int | None:
    if raw.isdigit():
        return int(raw)
    digits = [zh_number(ch) for ch in raw]  # 二〇二七: digit by digit
    return None if any(d is None for d in digits) else int("".join(str(d) for d in digits))


def _iso(year: int | None, month: int | None, day: int | None) -> dict[str, Any] | None:
    if year is None or month is None or day is None or not (1 <= year <= 9999):
        return None
    return {"date": f"{year:04d}-{month:02d}-{day:02d}"}


def _month_day(month: int | None, day: int | None, years: int = 0) -> dict[str, Any] | None:
    """A month and day of this year (``years`` from it): ``get_current_date``'s "MM-DD" date."""
    if month is None or day is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return {"date": f"{month:02d}-{day:02d}", **({"years": years} if years else {})}


def _offset(unit: str, n: int | None, sign: int) -> dict[str, Any] | None:
    return None if n is None else {_UNIT[unit]: sign * n} if n else {}


def _weekday_in_week(weeks: int, weekday: int) -> dict[str, Any]:
    return {"weeks": weeks, "weekday": WEEKDAYS[weekday]} if weeks else {"weekday": WEEKDAYS[weekday]}


# Each rule: a pattern and what its match means (None: a day it names but cannot work out).
_RULES: list[tuple[re.Pattern[str], Any]] = [
    (
        re.compile(r"(?<!\d)(?P<y>\d{4})[-/.](?P<m>\d{1,2})[-/.](?P<d>\d{1,2})(?!\d)"),
        lambda m: _iso(int(m["y"]), int(m["m"]), int(m["d"])),
    ),
    (
        re.compile(
            rf"(?P<y>\d{{4}}|[〇零一二三四五六七八九]{{4}})\s*年\s*(?P<m>{_N})\s*月\s*(?P<d>{_N})\s*[日号]"
        ),
        lambda m: _iso(_zh_year(m["y"]), _n(m["m"]), _n(m["d"])),
    ),
    (
        re.compile(rf"(?P<yw>前年|去年|今年|明年|后年)\s*的?\s*(?P<m>{_N})\s*月\s*(?P<d>{_N})\s*[日号]"),
        lambda m: _month_day(_n(m["m"]), _n(m["d"]), years=_YEAR_WORD[m["yw"]]),
    ),
    (
        re.compile(rf"(?<![\d年])(?P<m>{_N})\s*月\s*(?P<d>{_N})\s*[日号]"),
        lambda m: _month_day(_n(m["m"]), _n(m["d"])),
    ),
    (
        re.compile(rf"{_Q}\s*个?\s*月\s*的?\s*(?P<d>{_N})\s*[日号]"),
        lambda m: (
            {**({"months": _QUALIFIER[m["q"]]} if _QUALIFIER[m["q"]] else {}), "day": _n(m["d"])}
            if _n(m["d"]) and 1 <= (_n(m["d"]) or 0) <= 31
            else None
        ),
    ),
    (
        re.compile(rf"(?<![\d月年])(?P<d>{_N})\s*号"),
        lambda m: {"day": _n(m["d"])} if 1 <= (_n(m["d"]) or 0) <= 31 else None,
    ),
    (
        re.compile(
            rf"\b(?P<mon>{_MONTH_EN})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s*(?P<y>\d{{4}}))?\b", re.I
        ),
        lambda m: (
            _iso(int(m["y"]), _MONTHS[m["mon"].lower()], int(m["d"]))
            if m["y"]
            else _month_day(_MONTHS[m["mon"].lower()], int(m["d"]))
        ),
    ),
    (
        re.compile(
            rf"\b(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>{_MONTH_EN})\.?(?:,?\s*(?P<y>\d{{4}}))?\b",
            re.I,
        ),
        lambda m: (
            _iso(int(m["y"]), _MONTHS[m["mon"].lower()], int(m["d"]))
            if m["y"]
            else _month_day(_MONTHS[m["mon"].lower()], int(m["d"]))
        ),
    ),
    (re.compile(r"大后天"), lambda m: {"days": 3}),
    (re.compile(r"大前天"), lambda m: {"days": -3}),
    (re.compile(r"后天|\bthe\s+day\s+after\s+tomorrow\b", re.I), lambda m: {"days": 2}),
    (re.compile(r"前天|\bthe\s+day\s+before\s+yesterday\b", re.I), lambda m: {"days": -2}),
    (re.compile(r"明天|明日|明儿|\btomorrow\b", re.I), lambda m: {"days": 1}),
    (re.compile(r"昨天|昨日|昨儿|\byesterday\b", re.I), lambda m: {"days": -1}),
    (
        re.compile(
            rf"(?:再过|过)?\s*(?P<n>{_N})\s*个?\s*(?P<u>天|日|星期|礼拜|周|月|年)\s*(?P<dir>以后|之后|后|以前|之前|前)"
        ),
        lambda m: _offset(m["u"], _n(m["n"]), 1 if m["dir"].endswith("后") else -1),
    ),
    (
        re.compile(rf"(?:再过|过)\s*(?P<n>{_N})\s*个?\s*(?P<u>天|日|星期|礼拜|周|月|年)"),
        lambda m: _offset(m["u"], _n(m["n"]), 1),
    ),
    (
        re.compile(rf"\bin\s+(?P<n>{_EN_N})\s+(?P<u>day|week|month|year)s?\b", re.I),
        lambda m: _offset(m["u"].lower(), _n(m["n"]), 1),
    ),
    (
        re.compile(
            rf"\b(?P<n>{_EN_N})\s+(?P<u>day|week|month|year)s?\s+(?:from\s+(?:now|today)|later|after\s+today|hence)\b",
            re.I,
        ),
        lambda m: _offset(m["u"].lower(), _n(m["n"]), 1),
    ),
    (
        re.compile(
            rf"\b(?P<n>{_EN_N})\s+(?P<u>day|week|month|year)s?\s+(?:ago|before\s+today|earlier)\b", re.I
        ),
        lambda m: _offset(m["u"].lower(), _n(m["n"]), -1),
    ),
    (
        re.compile(
            r"今天|今日|今儿|今晚|今早|现在|此刻|当前|目前|\btoday\b|\btonight\b|\bnow\b|\bcurrent\b", re.I
        ),
        lambda m: {},
    ),
    (
        re.compile(rf"{_Q}\s*个?\s*(?:周|星期|礼拜)\s*(?P<w>[一二三四五六日天1-7])"),
        lambda m: _weekday_in_week(_QUALIFIER[m["q"]], _ZH_WEEKDAY[m["w"]]),
    ),
    (
        re.compile(
            rf"\b(?P<q>next|last|this)\s+week'?s?\s+(?P<w>{_WEEKDAY_EN})\b|"
            rf"\b(?P<w2>{_WEEKDAY_EN})\s+(?:of\s+)?(?P<q2>next|last|this)\s+week\b",
            re.I,
        ),
        lambda m: _weekday_in_week(
            _QUALIFIER[(m["q"] or m["q2"]).lower()], WEEKDAYS.index((m["w"] or m["w2"]).lower())
        ),
    ),
    # "next Friday" is read as Friday of next week (weeks from Monday); "this/last Friday" stay unread.
    (
        re.compile(rf"\bnext\s+(?P<w>{_WEEKDAY_EN})\b", re.I),
        lambda m: _weekday_in_week(1, WEEKDAYS.index(m["w"].lower())),
    ),
    (
        re.compile(rf"{_Q}\s*个?\s*(?:周|星期|礼拜)(?![一二三四五六日天末])"),
        lambda m: {"weeks": _QUALIFIER[m["q"]]} if _QUALIFIER[m["q"]] else {},
    ),
    (
        re.compile(rf"{_Q}\s*个?\s*月(?![底初末])"),
        lambda m: {"months": _QUALIFIER[m["q"]]} if _QUALIFIER[m["q"]] else {},
    ),
    (
        re.compile(r"前年|去年|今年|明年|后年"),
        lambda m: {"years": _YEAR_WORD[m.group(0)]} if _YEAR_WORD[m.group(0)] else {},
    ),
    (
        re.compile(r"\b(?P<q>next|last|this)\s+(?P<u>week|month|year)\b", re.I),
        lambda m: {_UNIT[m["u"].lower()]: _QUALIFIER[m["q"].lower()]} if _QUALIFIER[m["q"].lower()] else {},
    ),
]

# "今天是周三吗", "is tomorrow a Friday?": a guess about a named day, which that day's date answers.
_GUESS = re.compile(
    rf"是\s*(?:周|星期|礼拜)[一二三四五六日天]\s*[吗嘛么]|\bis\s+(?:it|today|tomorrow|that|this)\s+(?:a\s+)?(?:{_WEEKDAY_EN})\b",
    re.IGNORECASE,
)
_ASKS = re.compile(
    r"几号|几月几[日号]?|几日|多少号|星期几|礼拜几|周几|哪天|哪一天|哪日|什么日子|是几月|几月了|哪个月|"
    r"现在时间|当前时间|现在的时间|(?:现在|此刻|目前|当前|以后|之后|后|以前|之前|前)是?几点|几点了|什么日期|哪个日期|"
    r"(?:还有|还剩|过了|过去了?|相差|相隔|差|隔了?)(?:多少|几)天|"
    r"\b(?:what|which)\s+day\s+of\s+the\s+week\b|\bday\s+of\s+the\s+week\b|"
    r"\bwhat\s+time\s+(?:will|would|was)\s+it\s+be\b|\bwhat\s+time\s+was\s+it\b|"
    r"\bwhat(?:'s|\s+is|\s+was|\s+will\s+be)\s+(?:the\s+)?(?:date|day|weekday|time)\b|"
    r"\b(?:which|what)\s+(?:date|day|weekday)\b|\bwhat\s+(?:year|month)\s+is\s+it\b|\btime\s+is\s+it\b|"
    r"\bhow\s+many\s+days\s+(?:until|till|to|since|between|from|left|ago|before|after)\b|\bfalls?\s+on\b|"
    r"\bwhat\s+is\s+today\b|\b(?:tell\s+me|give\s+me|know)\s+the\s+date\b|\b(?:today's|todays|current)\s+"
    r"(?:date|time)\b|^\s*date\s*[?？]?\s*$|" + _GUESS.pattern,
    re.IGNORECASE,
)
# "日期" / "the date" ask for a date when a day is named ("明天的日期", "the date tomorrow"): alone they are
# a word of the documents ("更新日期是什么").
_DATE_WORD = re.compile(r"日期|\bdate\b", re.IGNORECASE)
_COUNTS = re.compile(r"(?:多少|几)天|\bhow\s+many\s+days\b", re.IGNORECASE)
# Left after the day references and question words are taken out: a word still naming a day or a time.
_DAY_WORDS = re.compile(
    r"最后一天|第一天|[上下这本]?个?周末|半\s*个?\s*(?:月|年|天|小时|钟头)|"
    r"(?:天|日|周|星期|礼拜|月|年)\s*(?:以后|之后|后|以前|之前|前)|(?:[上下这本]个?)?月[底初末]|(?:[今明去]年)?年[底初末]|农历|阴历|初[一二三四五六七八九十]|廿[一二三四五六七八九]?|春节|中秋|端午|元宵|清明|国庆|元旦|除夕|圣诞|七夕|重阳|"
    r"劳动节|儿童节|情人节|教师节|母亲节|父亲节|感恩节|万圣节|复活节|节日|节假日|假期|假日|放假|工作日|周末|月底|月初|月末|年底|年初|年末|上旬|中旬|下旬|小时|分钟|"
    r"[上下]午|晚上|早上|凌晨|半夜|中午|傍晚|半年|半个月|生日|纪念日|"
    r"(?:周|星期|礼拜)[一二三四五六日天]|[上下这本]个?(?:周|星期|礼拜|月)|"
    rf"{_N}\s*个?\s*(?:天|日|号|周|星期|礼拜|月|年)|"
    r"\b(?:tomorrow|yesterday|weekends?|holidays?|business\s+days?|working\s+days?|lunar|christmas|easter|"
    r"thanksgiving|new\s+year'?s?|halloween|birthday|hours?|minutes?|fortnight|noon|midnight|morning|"
    r"evening|afternoon|ago|later|days?|weeks?|months?|years?)\b|"
    rf"\b(?:{_WEEKDAY_EN}|january|february|march|april|june|july|august|september|october|november|"
    r"december)\b|\b\d+(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)
_ONLY_A_DAY = re.compile(
    r"[\s?？!！。.,，呢吗呀啊是的]*|[\s?？!！。.,，]*(?:and|what\s+about|how\s+about)?[\s?？!！。.,，]*", re.I
)


def _as_anchor(day: DayReference, days: list[DayReference], text: str) -> DayReference:
    """Today named right after another day ("下个月的今天", "this day next year" aside) only anchors it."""
    if day.args or not any(
        other.end <= day.start and not text[other.end : day.start].strip(" 的") for other in days
    ):
        return day
    return DayReference(day.start, day.end, day.text, day.args, anchor=True)


def read_dates(text: str) -> DateReading:
    """The days ``text`` asks about, and any day word in it the rules could not work out."""
    text = normalized(text)
    masked = text
    days: list[DayReference] = []
    unread: list[str] = []
    for pattern, meaning in _RULES:
        for match in pattern.finditer(masked):
            if not match.group(0).strip():
                continue
            args = meaning(match)
            if args is None:
                unread.append(match.group(0).strip())
            else:
                days.append(DayReference(match.start(), match.end(), match.group(0).strip(), args))
            masked = masked[: match.start()] + " " * (match.end() - match.start()) + masked[match.end() :]
    days.sort(key=lambda d: d.start)
    days = [_as_anchor(d, days, text) for d in days]
    rest = _DATE_WORD.sub(" ", _ASKS.sub(" ", masked))
    named = bool(days) or bool(unread)
    asks = bool(_ASKS.search(text)) or (
        named and (_DATE_WORD.search(masked) is not None or _ONLY_A_DAY.fullmatch(rest) is not None)
    )
    for word in _DAY_WORDS.finditer(rest):
        unread.append(word.group(0).strip())
    return DateReading(
        asks=asks,
        days=days,
        unread=unread if asks else [],
        counts_days=bool(_COUNTS.search(text)),
        asked=[(m.start(), m.end()) for m in _ASKS.finditer(masked)],
    )
