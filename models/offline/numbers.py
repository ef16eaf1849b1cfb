"""Numbers as people write them: digits, Chinese numerals, English number words, percentages.

"一千二百五十", "两百", "一千二百五" (colloquial 1250), "twelve hundred", "two point five", "1,250", "８",
"百分之二十", "20%", "7 percent": :func:`find_numbers` says where the numbers of a text are and what each is
worth, exactly (a :class:`~fractions.Fraction`). Whether a numeral written in words is meant as a number
("一下", "someone", "one more thing" are not) is decided by the reader of a calculation, which knows what
stands beside it; this module only reads the words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_ZH_DIGIT = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
    "壹": 1, "贰": 2, "叁": 3, "肆": 4, "伍": 5, "陆": 6, "柒": 7, "捌": 8, "玖": 9,
}  # fmt: skip
_ZH_UNIT = {"十": 10, "拾": 10, "百": 100, "佰": 100, "千": 1000, "仟": 1000}
_ZH_BIG = {"万": 10_000, "亿": 100_000_000}
ZH_NUMERAL_CHARS = "".join([*_ZH_DIGIT, *_ZH_UNIT, *_ZH_BIG])
_ZH_DECIMALS = "零〇一二两三四五六七八九"
_ZH_RUN = re.compile(rf"[{ZH_NUMERAL_CHARS}]+(?:点[{_ZH_DECIMALS}]+)?")

_EN_SMALL = {
    word: n
    for n, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
        ]
    )
}
_EN_TENS = {
    word: 10 * n
    for n, word in enumerate(
        ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    )
    if n > 1
}
_EN_SCALE = {"hundred": 100, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_EN_WORD = "|".join(sorted([*_EN_SMALL, *_EN_TENS, *_EN_SCALE], key=len, reverse=True))
_EN_DIGIT_WORD = "|".join(sorted(w for w in _EN_SMALL if _EN_SMALL[w] < 10))
_EN_RUN = re.compile(
    rf"\b(?:(?:a|one)\s+(?=(?:hundred|thousand|million|billion)\b))?(?:{_EN_WORD})"
    rf"(?:(?:\s+|-|\s+and\s+)(?:{_EN_WORD}))*(?:\s+point(?:\s+(?:{_EN_DIGIT_WORD}))+)?\b",
    re.IGNORECASE,
)
# Digits: "1,250" is one number (groups of three), "3,4" two; a run glued to Latin letters is a name
# ("Q3", "k1", "v2") or a unit or ordinal ("10th", "5km"), not a number, except "3x4".
_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?|\d+(?:\.\d+)?")
# Digits counted in a larger unit: "1.2 亿", "3万", "2.5 million".
_DIGIT_SCALE = re.compile(r"\s*(?:(?P<zh>[万亿])|(?P<en>thousand|million|billion)\b)", re.IGNORECASE)
_SCALES = {"万": 10_000, "亿": 100_000_000, "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000}
_PERCENT_AFTER = re.compile(r"\s*(?:%(?!\s*[\d(])|\bpercent\b|\bper\s*cent\b|\bpct\b)", re.IGNORECASE)
_PERCENT_BEFORE = re.compile(r"百分之\s*$")
_TIMES_OR_PERCENT = re.compile(r"[xX](?=\s*\d)|percent\b|pct\b", re.IGNORECASE)


@dataclass(frozen=True)
class Number:
    """One number of a text: where it is, its value, and whether it was written in words or as a percentage."""

    start: int
    end: int
    value: Fraction
    word: bool = False
    percent: bool = False

    @property
    def shown(self) -> str:
        """The value as the calculator reads it ("1250", "2.5")."""
        return shown(self.value)


def shown(value: Fraction) -> str:
    """A terminating decimal as plain digits; anything else as an exact quotient."""
    if value.denominator == 1:
        return str(value.numerator)
    d = value.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d != 1:
        return f"({value.numerator} / {value.denominator})"
    digits = 0
    while (value * 10**digits).denominator != 1:
        digits += 1
    return f"{float(value):.{digits}f}" if digits < 15 else f"({value.numerator} / {value.denominator})"


def zh_number(text: str) -> int | float | None:
    """The value of a Chinese numeral ("一百二十三", "两万零五", "一千二百五", "三点五"), or None if it is not one.

    A digit straight after a unit counts in the next unit down, as people say it: "一千二" is 1200, "两万五"
    25000, "三百五" 350; after 零 it is a plain digit ("一百零五" is 105).
    """
    value = _zh_fraction(text)
    if value is None:
        return None
    return int(value) if value.denominator == 1 else float(value)


def _zh_fraction(text: str) -> Fraction | None:
    whole, _, decimals = text.partition("点")
    if decimals and not all(ch in _ZH_DIGIT for ch in decimals):
        return None
    if not whole or not all(ch in _ZH_DIGIT or ch in _ZH_UNIT or ch in _ZH_BIG for ch in whole):
        return None
    if whole in ("零", "〇") or all(ch in "零〇" for ch in whole):
        section_total: int | None = 0
    else:
        section_total = _zh_integer(whole)
    if section_total is None:
        return None
    if not decimals:
        return Fraction(section_total)
    return Fraction(f"{section_total}.{''.join(str(_ZH_DIGIT[ch]) for ch in decimals)}")


def _zh_integer(whole: str) -> int | None:
    total, section, digit, last_unit, after_zero = 0, 0, None, None, False
    last_big = None
    for ch in whole:
        if ch in "零〇":  # a placeholder between units: 两万零五
            if digit is not None:
                return None
            after_zero = True
            continue
        if ch in _ZH_DIGIT:
            if digit is not None:  # two digits in a row ("一二三") is a code, not a numeral
                return None
            digit = _ZH_DIGIT[ch]
        elif ch in _ZH_UNIT:
            unit = _ZH_UNIT[ch]
            if last_unit is not None and unit >= last_unit:
                return None
            section += (1 if digit is None else digit) * unit
            digit, last_unit, after_zero = None, unit, False
        else:  # 万 / 亿
            big = _ZH_BIG[ch]
            section += digit or 0
            if section == 0 or (last_big is not None and big >= last_big):
                return None
            total += section * big
            section, digit, last_unit, last_big, after_zero = 0, None, None, big, False
    if digit is not None and not after_zero:
        # A trailing digit right after a unit: 一千二 (1200), 两万五 (25000), 三百五 (350), 十五 (15).
        if last_unit is not None and last_unit > 10:
            return total + section + digit * (last_unit // 10)
        if last_unit is None and last_big is not None and section == 0:
            return total + digit * (last_big // 10)
    return total + section + (digit or 0)


def en_number(text: str) -> int | float | None:
    """The value of English number words ("one hundred and twenty-three", "twelve hundred", "two point
    five", "a thousand"), or None when the words do not make one number ("nineteen ninety", a year said
    in pairs, or "one two")."""
    whole, _, decimals = re.sub(r"\s+", " ", text.lower().strip()).partition(" point ")
    total, current, last, last_scale = 0, 0, "", 10**12
    for word in re.split(r"[\s-]+", whole):
        if word == "" or (word == "a" and not last):
            continue
        if word == "and":
            if last not in ("hundred", "scale"):
                return None
            continue
        if word in _EN_SMALL:
            kind = "digit" if _EN_SMALL[word] < 10 else "teen"
            # a digit follows a tens word, "hundred" or a scale; a teen only "hundred" or a scale
            if last not in ("", "hundred", "scale") and not (kind == "digit" and last == "tens"):
                return None
            current, last = current + _EN_SMALL[word], kind
        elif word in _EN_TENS:
            if last not in ("", "hundred", "scale"):
                return None
            current, last = current + _EN_TENS[word], "tens"
        elif word == "hundred":
            if (
                last not in ("", "digit", "teen") or current >= 100
            ):  # not "twenty hundred", "one hundred hundred"
                return None
            current, last = max(current, 1) * 100, "hundred"
        elif word in _EN_SCALE:
            if (last == "scale" and current == 0) or _EN_SCALE[word] >= last_scale:
                return None  # "thousand million", "one thousand thousand"
            total += max(current, 1) * _EN_SCALE[word]
            current, last, last_scale = 0, "scale", _EN_SCALE[word]
        else:
            return None
    if not last:
        return None
    if not decimals:
        return total + current
    places = [_EN_SMALL.get(w) for w in decimals.split()]
    if not places or any(p is None or p > 9 for p in places):
        return None
    return float(f"{total + current}.{''.join(str(p) for p in places)}")


def find_numbers(text: str) -> list[Number]:
    """Every number of ``text``, in order, without overlaps: digits, Chinese numerals, English number words,
    each marked as a percentage when "%", "percent" or "百分之" goes with it."""
    found: list[Number] = []
    taken = [False] * len(text)

    def add(start: int, end: int, value: Fraction, word: bool) -> None:
        if any(taken[start:end]):
            return
        percent = False
        after = _PERCENT_AFTER.match(text, end)
        if after:
            end, percent = after.end(), True
        before = _PERCENT_BEFORE.search(text, 0, start)
        if before:
            start, percent = before.start(), True
        for i in range(start, end):
            taken[i] = True
        found.append(Number(start, end, value, word, percent))

    for m in _DIGITS.finditer(text):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        times = before in "xX" and text[m.start() - 2 : m.start() - 1].isdigit()  # the 4 of "3x4"
        if before and ((before.isascii() and before.isalpha() and not times) or before in "_."):
            continue
        glued = after.isascii() and after.isalpha() and not _TIMES_OR_PERCENT.match(text, m.end())
        if glued or (after == "." and text[m.end() + 1 : m.end() + 2].isdigit()):  # "10th", "1.2.3"
            continue
        value, end = Fraction(m.group(0).replace(",", "")), m.end()
        scale = _DIGIT_SCALE.match(text, end)
        if scale:
            value, end = value * _SCALES[scale.group(0).strip().lower()], scale.end()
        add(m.start(), end, value, word=False)
    for m in _ZH_RUN.finditer(text.replace("百分之", "分分之")):  # the 百 of 百分之 is no hundred
        zh_value = _zh_fraction(m.group(0))
        if zh_value is not None:
            add(m.start(), m.end(), zh_value, word=True)
    for m in _EN_RUN.finditer(text):
        number = en_number(m.group(0))
        if number is not None:
            add(m.start(), m.end(), Fraction(str(number)), word=True)
    return sorted(found, key=lambda n: n.start)
