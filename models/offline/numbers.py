"""Numbers written in words, read as digits, so arithmetic in words reaches the calculator.

"一百二十三乘以四百五十六", "what is seven times eight", "15% of 80", "百分之二十乘以五十": the offline model's
expression finder reads digits and operators; this rewrites number words (Chinese numerals, English number
words) and percentages ("X% of Y") into them first. Only a whole run that parses as a number is replaced,
so "一下", "万一" or "someone" stay as they are.
"""

from __future__ import annotations

import re

_ZH_DIGIT = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_UNIT = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG = {"万": 10_000, "亿": 100_000_000}
_ZH_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?")
_ZH_PERCENT = re.compile(
    r"百分之\s*([零〇一二两三四五六七八九十百千]+(?:点[零〇一二三四五六七八九]+)?|\d+(?:\.\d+)?)"
)

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
_EN_SCALE = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_EN_WORD = "|".join(sorted([*_EN_SMALL, *_EN_TENS, *_EN_SCALE], key=len, reverse=True))
_EN_RUN = re.compile(rf"\b(?:{_EN_WORD})(?:(?:\s+|-|\s+and\s+)(?:{_EN_WORD}))*\b", re.IGNORECASE)
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*[%％]\s*(?:of|的)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)
_OPERATOR = re.compile(
    r"乘|除|加|减|平方|次方|[-+*/×÷^%％]|\b(?:plus|minus|times|multiplied|divided|over|power|squared|percent)\b",
    re.IGNORECASE,
)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*[%％](?!\s*\d)")
_OF_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*的\s*(\d+(?:\.\d+)?)\s*[%％]")


def zh_number(text: str) -> int | float | None:
    """The value of a Chinese numeral ("一百二十三", "两万零五", "三点五"), or None if it is not one."""
    whole, _, decimals = text.partition("点")
    if decimals and not all(ch in _ZH_DIGIT for ch in decimals):
        return None
    total, section, digit, last_unit = 0, 0, None, None
    if whole in ("零", "〇"):
        whole = ""
    for ch in whole:
        if ch in "零〇":  # a placeholder between units: 两万零五
            continue
        if ch in _ZH_DIGIT:
            if digit is not None:  # two digits in a row ("一二三") is a code, not a numeral
                return None
            digit = _ZH_DIGIT[ch]
        elif ch in _ZH_UNIT:
            unit = _ZH_UNIT[ch]
            if last_unit is not None and unit >= last_unit and digit is None:
                return None
            section += (1 if digit is None else digit) * unit
            digit, last_unit = None, unit
        else:  # 万 / 亿
            section += digit or 0
            if section == 0:
                return None
            total += section * _ZH_BIG[ch]
            section, digit, last_unit = 0, None, None
    value = total + section + (digit or 0)
    if not decimals:
        return value
    return float(f"{value}.{''.join(str(_ZH_DIGIT[ch]) for ch in decimals)}")


def en_number(text: str) -> int | None:
    """The value of English number words ("one hundred and twenty-three"), or None."""
    total, current, seen = 0, 0, False
    for word in re.split(r"[\s-]+", text.lower()):
        if word in ("and", ""):
            continue
        if word in _EN_SMALL:
            current += _EN_SMALL[word]
        elif word in _EN_TENS:
            current += _EN_TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word in _EN_SCALE:
            total += max(current, 1) * _EN_SCALE[word]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _shown(value: int | float) -> str:
    return str(value)


def digits_for_words(text: str) -> str:
    """``text`` with number words as digits and "X% of Y" as "X / 100 * Y" (other text unchanged)."""

    def percent(match: re.Match[str]) -> str:
        value = match.group(1) if match.group(1)[0].isdigit() else zh_number(match.group(1))
        return match.group(0) if value is None else f"{value}%"

    text = _ZH_PERCENT.sub(percent, text)  # before the numerals: the 百 of 百分之 is no hundred
    text = re.sub(r"(\d)\s*percent\b", r"\1%", text, flags=re.IGNORECASE)
    if not _OPERATOR.search(text):
        return text  # no arithmetic here: "一下", "someone", "两个人" stay words

    def zh(match: re.Match[str]) -> str:
        value = zh_number(match.group(0))
        return match.group(0) if value is None else _shown(value)

    def en(match: re.Match[str]) -> str:
        value = en_number(match.group(0))
        return match.group(0) if value is None else _shown(value)

    text = _ZH_RUN.sub(zh, text)
    text = _EN_RUN.sub(en, text)
    text = re.sub(r"(\d)\s*percent\b", r"\1%", text, flags=re.IGNORECASE)
    text = _PERCENT_OF.sub(r"(\1 / 100 * \2)", text)
    text = _OF_PERCENT.sub(r"(\1 * \2 / 100)", text)
    return _PERCENT.sub(r"(\1 / 100)", text)  # "20% * 50"; "10 % 3" (a remainder) is left alone
