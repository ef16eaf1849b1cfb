"""The normal form secrets are read in, with a map back to the text as written.

A secret keeps what it is however it is written: ``１３８``, ``一三八``, ``幺三八`` and ``one three eight`` are
the same digits, so every check reads one form where they are, and a span found there maps back to the
characters the user wrote (redaction removes those, not an approximation of them).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# Digit-by-digit readings: 〇/零 for 0 and 幺 as numbers are read aloud, and the financial 壹贰叁.
# 两 is left out: it counts things ("两个"), it does not spell digits.
_ZH_DIGIT = dict(zip("〇零幺一二三四五六七八九壹贰叁肆伍陆柒捌玖", "001123456789123456789", strict=True))
# Three or more digits in a row, Chinese or not, with at most one space, dot or dash between them: a number
# read out, not "一个" or "三月" (a run that ends at 十/百/千 counts, it does not spell digits).
_ZH_RUN = re.compile(
    r"[〇零幺一二三四五六七八九壹贰叁肆伍陆柒捌玖\d](?:[ .,-]?[〇零幺一二三四五六七八九壹贰叁肆伍陆柒捌玖\d]){2,}"
    r"(?![十百千万亿拾佰仟萬億])"
)
_EN_DIGIT = {
    "zero": "0",
    "oh": "0",
    "o": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
}
_EN_TEENS = {
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14", "fifteen": "15",
    "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19",
}  # fmt: skip
_EN_TENS = {
    "twenty": "2", "thirty": "3", "forty": "4", "fifty": "5", "sixty": "6", "seventy": "7", "eighty": "8",
    "ninety": "9",
}  # fmt: skip
_EN_ONES = r"(?:zero|oh|o|one|two|three|four|five|six|seven|eight|nine)"
_EN_WORD = (
    rf"(?:(?:{'|'.join(_EN_TENS)})(?:[ -](?:one|two|three|four|five|six|seven|eight|nine)(?![\w'’-]))?"
    rf"|{'|'.join(_EN_TEENS)}|(?:(?:double|triple)[ -])?{_EN_ONES})"
)
# Digit words in a row ("four four one two", "five five five, oh one two three"), three or more, or two
# when one is a tens or teens ("nineteen eighty-four", "thirty-two, fourteen, eight"); "oh" and "o" are
# zeros inside such a run, or first in a long one ("oh seven seven zero zero …").
_EN_RUN = re.compile(rf"(?<![\w'’-]){_EN_WORD}(?:[ ,.-]{{1,3}}{_EN_WORD})+(?![\w'’])", re.I)
_EN_PIECE = re.compile(rf"(?<![a-z]){_EN_WORD}(?![a-z])", re.I)
_DASHES = dict.fromkeys(map(ord, "‐‑‒–—―−﹣－"), "-") | {ord("·"): ".", ord("・"): "."}


@dataclass(frozen=True)
class Reading:
    """``text`` in normal form; ``starts[i]``/``ends[i]`` say which characters of the original its i-th
    character stands for."""

    text: str
    starts: tuple[int, ...]
    ends: tuple[int, ...]

    def origin(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original that ``text[start:end]`` was read from."""
        if not self.text:
            return 0, 0
        start = min(max(start, 0), len(self.text) - 1)
        end = min(max(end, start + 1), len(self.text))
        return self.starts[start], self.ends[end - 1]


def _characters(text: str) -> Reading:
    """Width and compatibility forms folded (NFKC), any decimal digit as ASCII, dashes as "-"."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, ch in enumerate(text):
        if ch.isascii():
            folded = ch
        else:
            digit = unicodedata.decimal(ch, None)
            folded = str(digit) if digit is not None else unicodedata.normalize("NFKC", ch).translate(_DASHES)
        for piece in folded:
            out.append(piece)
            starts.append(i)
            ends.append(i + 1)
    return Reading("".join(out), tuple(starts), tuple(ends))


def _rewrite(reading: Reading, edits: Iterable[tuple[int, int, list[tuple[str, int, int]]]]) -> Reading:
    """``reading`` with ``text[start:end]`` replaced by pieces, each ``(chars, from, to)`` standing for
    ``text[from:to]``; edits are in order and do not overlap."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pos = 0
    for start, end, pieces in edits:
        out.append(reading.text[pos:start])
        starts.extend(reading.starts[pos:start])
        ends.extend(reading.ends[pos:start])
        for chars, first, last in pieces:
            for ch in chars:
                out.append(ch)
                starts.append(reading.starts[first])
                ends.append(reading.ends[last - 1])
        pos = end
    out.append(reading.text[pos:])
    starts.extend(reading.starts[pos:])
    ends.extend(reading.ends[pos:])
    return Reading("".join(out), tuple(starts), tuple(ends))


# "六个八" is 888888 as "triple five" is 555: a count, 个, and the digit it repeats.
_ZH_REPEAT = re.compile(r"([二三四五六七八九两])个([〇零幺一二三四五六七八九])")
_ZH_COUNT = dict(zip("二三四五六七八九两", (2, 3, 4, 5, 6, 7, 8, 9, 2), strict=True))


def _chinese_digits(reading: Reading) -> Reading:
    edits = []
    for m in _ZH_REPEAT.finditer(reading.text):
        digits = _ZH_DIGIT[m.group(2)] * _ZH_COUNT[m.group(1)]
        edits.append((m.start(), m.end(), [(digits, m.start(), m.end())]))
    if edits:
        reading = _rewrite(reading, edits)
        edits = []
    for m in _ZH_RUN.finditer(reading.text):
        run = m.group()
        if any(ch in _ZH_DIGIT for ch in run):
            pieces = [(_ZH_DIGIT.get(ch, ch), m.start() + i, m.start() + i + 1) for i, ch in enumerate(run)]
            edits.append((m.start(), m.end(), pieces))
    return _rewrite(reading, edits) if edits else reading


def _spoken(word: str) -> str:
    """The digits one spoken number stands for: "double five" 55, "fourteen" 14, "eighty-four" 84."""
    parts = re.split(r"[ -]", word.lower())
    if parts[0] in _EN_TENS:
        return _EN_TENS[parts[0]] + (_EN_DIGIT[parts[1]] if len(parts) > 1 else "0")
    if parts[0] in _EN_TEENS:
        return _EN_TEENS[parts[0]]
    times = 3 if parts[0] == "triple" else 2 if parts[0] == "double" else 1
    return _EN_DIGIT[parts[-1]] * times


def _english_digits(reading: Reading) -> Reading:
    """Digit words become digits; what separated them goes, as it does when a number is written down."""
    edits = []
    for m in _EN_RUN.finditer(reading.text):
        pieces = []
        for word in _EN_PIECE.finditer(m.group()):
            pieces.append((_spoken(word.group()), m.start() + word.start(), m.start() + word.end()))
        if len(pieces) < 3 and sum(len(digits) for digits, _, _ in pieces) < 4:
            continue  # "one two" and "twenty one" say a count, not a number read out
        if not m.group().lower().startswith("o") or len(pieces) >= 4:  # "oh, one…" is not a zero
            edits.append((m.start(), m.end(), pieces))
    return _rewrite(reading, edits) if edits else reading


def read(text: str) -> Reading:
    """``text`` in the normal form every secret check reads: folded characters, numbers as digits."""
    reading = _characters(text or "")
    if re.search(r"[〇零幺一二三四五六七八九壹贰叁肆伍陆柒捌玖]", reading.text):
        reading = _chinese_digits(reading)
    if re.search(r"(?i)\b(?:zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\w+teen|\w+ty)\b", reading.text):
        reading = _english_digits(reading)
    return reading
