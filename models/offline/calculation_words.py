"""The words of a calculation, found in a request: numbers, operators, roots and powers, percentages, chains.

:func:`lex` turns a request (in Chinese, English or both) into :class:`Token`s with their places, in three
passes: forms that carry a number inside them ("的十次方", "打八折", "to the power of 3", "三分之一"), then
the numbers (:mod:`models.offline.numbers`), then the operator and linking words around them. What lies
between two tokens and is neither blank nor a unit ("元", "dollars") is a ``text`` token: an expression does
not run across one. Dates, clock times, phone numbers and ranges ("3-5 天") are blanked first: they are not
subtractions.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from models.offline.numbers import Number, en_number, find_numbers, zh_number

# What a token is; the parser reads ``op``/``post``/``pre`` by their ``arg``.
NUM, OP, POST, PRE, OF, OFF, CHANGE, VERB, SUM_OF, BOTH, NEG = (
    "num", "op", "post", "pre", "of", "off", "change", "verb", "sum_of", "both", "neg",
)  # fmt: skip
CHAIN, REF, CONJ, BY, TO, FROM, SEP, LPAREN, RPAREN, UNKNOWN, TEXT = (
    "chain", "ref", "conj", "by", "to", "from", "sep", "lparen", "rparen", "unknown", "text",
)  # fmt: skip
# Numbers and operator words: each must end up in the computed expression, or the request is declined.
REQUIRED = {NUM, OP, POST, PRE, OF, OFF, CHANGE, VERB, SUM_OF, BOTH, NEG, UNKNOWN}
OPERATORS = REQUIRED - {NUM}


@dataclass(frozen=True)
class Token:
    """One word of a calculation: its kind, where it is, and what it means (an operator, a value)."""

    kind: str
    start: int
    end: int
    text: str
    arg: object = None
    number: Number | None = None


_ZH_NUM = r"[零〇一二两三四五六七八九十百千万]+(?:点[零〇一二三四五六七八九]+)?"
_NUMERAL = rf"(?:-?\d+(?:\.\d+)?|{_ZH_NUM})"
_ORDINALS = {
    "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10,
}  # fmt: skip
_EN_SMALL_NUM = (
    r"(?:-?\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    + "|".join(_ORDINALS)
    + ")"
)

# -- pass 1: forms with a number inside --------------------------------------------------------------
_COMPOSITES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"开\s*(?P<n>{_NUMERAL})\s*次(?:方根?|根号)"), "root"),
    (re.compile(rf"的?\s*(?P<n>{_NUMERAL})\s*次(?:方|幂)(?P<root>根)?"), "power"),
    (re.compile(r"的?\s*(?:算术)?平方根|开\s*平方|开\s*根号|开方"), "sqrt"),
    (re.compile(r"的?\s*立方根|开\s*立方"), "cbrt"),
    (re.compile(r"的?\s*平方(?![米根公千厘分])"), "square"),
    (re.compile(r"的?\s*立方(?![米根厘分])"), "cube"),
    (
        re.compile(
            r"(?:打|按|的)\s*(?P<n>\d+(?:\.\d+)?|[一二三四五六七八九][一二三四五六七八九]?(?:点五)?)\s*折(?![扣叠线腾磨服算])"
        ),
        "discount",
    ),
    (re.compile(rf"的\s*(?P<n>{_NUMERAL})\s*倍"), "times"),
    (re.compile(r"的\s*(?P<n>[一二两三四五六七八九]|\d)\s*成(?![本功为立员果绩交])"), "tenths"),
    (
        re.compile(
            rf"(?P<d>\d+|[一二两三四五六七八九十千万][零〇一二两三四五六七八九十百千万]*)\s*分之\s*(?P<n>{_NUMERAL})"
        ),
        "fraction",
    ),
    (re.compile(r"根号\s*下?|√"), "sqrt_of"),
    (
        re.compile(
            rf"\b(?:to|raised\s+to)\s+(?:the\s+)?(?:power\s+(?:of\s+)?)?(?P<n>{_EN_SMALL_NUM})(?:st|nd|rd|th)?"
            r"(?:\s+power)?\b",
            re.IGNORECASE,
        ),
        "power",
    ),
    (re.compile(r"\bsquared\b", re.IGNORECASE), "square"),
    (re.compile(r"\bcubed\b", re.IGNORECASE), "cube"),
    (re.compile(r"\b(?:the\s+)?(?:square\s+root|sqrt)(?:\s+of)?\b", re.IGNORECASE), "sqrt_of"),
    (re.compile(r"\b(?:the\s+)?(?:cube\s+root|cbrt)(?:\s+of)?\b", re.IGNORECASE), "cbrt_of"),
    (
        re.compile(rf"\b(?:the\s+)?(?P<n>{_EN_SMALL_NUM})(?:st|nd|rd|th)?\s+root(?:\s+of)?\b", re.IGNORECASE),
        "root_of",
    ),
    (
        re.compile(
            r"\b(?:the\s+)?(?P<op>sum|total|product|difference|quotient)\s+(?:of|between)\b", re.IGNORECASE
        ),
        "sum_of",
    ),
]

# -- pass 3: operator and linking words --------------------------------------------------------------
_SUM_OPS = {"sum": "+", "total": "+", "product": "*", "difference": "-", "quotient": "/"}
_BOTH_OPS = {"和": "+", "加": "+", "差": "-", "减": "-", "积": "*", "乘": "*", "商": "/", "除": "/"}
_WORDS: list[tuple[str, str, object]] = [
    (r"\*\*|\^", OP, "**"),
    (r"(?<![A-Za-z+])\+(?![+])", OP, "+"),
    (r"(?<![A-Za-z-])[-−–](?![-])", OP, "-"),
    (r"[*×✕·]", OP, "*"),
    (r"[/÷]", OP, "/"),
    (r"%", OP, "%"),
    (r"(?<![A-Za-z])[xX](?![A-Za-z])", OP, "*"),
    (r"(?:的|之)(?:和|差|积|乘积|商)|相(?:加|减|乘|除)|加起来|乘起来", BOTH, None),
    (r"增加了?|增长了?|上涨了?|上升了?|涨了?|提高了?|提升了?", CHANGE, "+"),
    (r"减少了?|降低了?|下降了?|下跌了?|降了?|跌了?", CHANGE, "-"),
    (r"加上|(?<![增参更追附外添施])加(?![班油入速密载强工快盟拿州热重深急价])", OP, "+"),
    (r"减去|减掉|(?<!缩)减(?![肥少轻速免半压持退排])", OP, "-"),
    (r"乘以|乘上|(?<!搭)乘(?![客车坐凉务机船法飞警])", OP, "*"),
    (r"除以", OP, "/"),
    (r"负", NEG, None),
    (r"再|然后|接着|随后|之后|最后", CHAIN, None),
    (r"结果|得数|答案|这个数|该数|此数|它", REF, None),
    (r"以及|[和与跟同及、]", CONJ, None),
    (r"\(|（|\[", LPAREN, None),
    (r"\)|）|\]", RPAREN, None),
    (r"=", SEP, "="),
    (r"[,，;；。!！?？:：]", SEP, None),
    (r"\bplus\b", OP, "+"),
    (r"\bminus\b", OP, "-"),
    (r"\bmultiplied\s+by\b|\btimes\b", OP, "*"),
    (r"\bdivided\s+by\b|\bover\b", OP, "/"),
    (r"\bmod(?:ulo)?\b", OP, "%"),
    (r"\b(?:increased|raised|grew|grown|went\s+up|goes\s+up|up)\s+by\b", CHANGE, "+"),
    (r"\b(?:decreased|reduced|dropped|fell|cut|went\s+down|goes\s+down|down)\s+by\b", CHANGE, "-"),
    (r"\b(?:off(?:\s+of)?|discount(?:\s+on)?)\b", OFF, None),
    (r"\bnegative\b", NEG, None),
    (r"\b(?:and\s+then|then|after\s+that|afterwards)\b", CHAIN, None),
    (r"\b(?:the\s+)?(?:result|answer)\b|\bthat\s+number\b|\bthis\s+number\b|\bit\b|\bthat\b", REF, None),
    (r"\badd\b", VERB, "add"),
    (r"\bsubtract\b|\btake\s+away\b", VERB, "subtract"),
    (r"\bmultiply\b", VERB, "multiply"),
    (r"\bdivide\b", VERB, "divide"),
    (r"\bsquare\b", VERB, "square"),
    (r"\bcube\b", VERB, "cube"),
    (r"\bincrease\b|\braise\b", VERB, "increase"),
    (r"\bdecrease\b|\breduce\b|\bcut\b", VERB, "decrease"),
    (r"\bby\b", BY, None),
    (r"\bto\b", TO, None),
    (r"\bfrom\b", FROM, None),
    (r"\band\b", CONJ, None),
    (r"\bof\b|的", OF, None),
    # Mathematics the reader cannot compute: a request using it is declined, never half-computed.
    (
        r"阶乘|对数|正弦|余弦|正切|平均|均值|方差|标准差|中位数|余数|取余|取模|模(?![型式块板拟糊样范仿特])|绝对值|四舍五入|约等于|"
        r"约分|倒数|相反数|公约数|公倍数|倍数|因数|质数|素数|方程|积分|导数|微分|极限|一半|几倍|百分之几|"
        r"(?<![以了外])除(?![以了非外夕去草湿尘名此])|"
        r"\b(?:factorial|logarithm|log|ln|sin|cos|tan|sine|cosine|tangent|average|mean|median|remainder|"
        r"absolute|round(?:ed)?|gcd|lcm|derivative|integral|solve|equation|half|twice|double|triple|"
        r"quarter|percentage|what\s+percent|binary|hex(?:adecimal)?|octal|rounded|decimal\s+places?|"
        r"fraction|scientific\s+notation|pi)\b|π|圆周率|二进制|八进制|十六进制|保留.{0,4}位|取整|分数形式|科学计数",
        UNKNOWN,
        None,
    ),
]
_WORD_RE = re.compile(
    "|".join(f"(?P<w{i}>{pattern})" for i, (pattern, _, _) in enumerate(_WORDS)), re.IGNORECASE
)

# Blanked before reading: not arithmetic, though made of digits and dashes.
_NOT_ARITHMETIC = re.compile(
    r"\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}\s*[日号]?|\d{1,2}\s*月\s*\d{1,2}\s*[日号]|"
    r"\d{1,2}:\d{2}(?::\d{2})?|\b\d{3,4}-\d{4}\b|\d{4}\s*年|"
    r"\d+(?:\.\d+)?(?:[-—–]|\s*[~～]\s*)\d+(?:\.\d+)?\s*(?=[%％个天日周年月小时分钟秒人次元块岁倍]|\s*(?:days?|weeks?|months?|"
    r"years?|hours?|minutes?|people|times|items|percent)\b)|"
    r"第\s*[\d零〇一二两三四五六七八九十百千]+|[A-Za-z]+-\d+"
)
# A Chinese numeral inside a word, or counting things ("一下", "一共", "三个问题"), is no number.
_ZH_NOT_NUMBER = re.compile(
    r"一共|一起|一下|一些|一点(?![零〇一二三四五六七八九])|一样|一直|一般|一定|一切|一旦|一向|一边|一会儿?|一再|"
    r"统一|唯一|万一|之一|一一|不一|千万(?=[别不要])|十分|一半|"
    r"[零〇一二两三四五六七八九十百千万几]+(?=[个位只条件次遍种岁本张篇段份名人句行页章节项类回趟])"
)
# Between two tokens of one expression: blanks, units of money and "个"; anything else ends the expression.
_FILLER = re.compile(
    r"(?:\s|个|元|块钱|块|美元|欧元|英镑|[$¥€£]|\b(?:the|a|an|number|dollars?|bucks|yuan|rmb|usd|eur|cny)\b)*",
    re.IGNORECASE,
)


# "560 元的外套", "3000 块的工资": after a number and 的, the thing the number is the price or amount of.
_THING = re.compile(r"\s*[\u4e00-\u9fff]{1,4}\s*")


def normalized(text: str) -> str:
    """Full-width digits and signs as ASCII (``８＋２`` → ``8+2``), so one set of patterns reads both."""
    return unicodedata.normalize("NFKC", text)


def _value(raw: str) -> Fraction | None:
    raw = raw.strip()
    if re.fullmatch(r"-?\d+(?:\.\d+)?", raw):
        return Fraction(raw)
    if raw.lower() in _ORDINALS:
        return Fraction(_ORDINALS[raw.lower()])
    value = zh_number(raw)
    if value is None:
        value = en_number(raw)
    return None if value is None else Fraction(str(value))


def _discount(raw: str) -> Fraction | None:
    """打八折 → 0.8, 打75折 / 打七五折 → 0.75, 打8.5折 / 打八五折 / 打八点五折 → 0.85."""
    if re.fullmatch(r"\d+\.\d+", raw):
        return Fraction(raw) / 10
    if raw.isdigit():
        return Fraction(int(raw), 10 if len(raw) == 1 else 100)
    digits = raw.replace("点五", "五")
    values = [zh_number(ch) for ch in digits]
    if any(v is None for v in values):
        return None
    return Fraction(int("".join(str(v) for v in values)), 10 ** len(values))


def _composite(kind: str, match: re.Match[str], start: int, end: int) -> Token | None:
    text = match.group(0)
    if kind in ("square", "cube"):
        return Token(POST, start, end, text, ("pow", Fraction(2 if kind == "square" else 3)))
    if kind in ("sqrt", "cbrt"):
        return Token(POST, start, end, text, ("root", Fraction(2 if kind == "sqrt" else 3)))
    if kind in ("sqrt_of", "cbrt_of"):
        return Token(PRE, start, end, text, ("root", Fraction(2 if kind == "sqrt_of" else 3)))
    if kind == "sum_of":
        return Token(SUM_OF, start, end, text, _SUM_OPS[match.group("op").lower()])
    if kind == "discount":
        value = _discount(match.group("n"))
        return None if value is None or not 0 < value < 1 else Token(POST, start, end, text, ("mul", value))
    if kind == "fraction":
        den, num = _value(match.group("d")), _value(match.group("n"))
        if den is None or num is None or den == 0:
            return None
        number = Number(start, end, num / den, word=True)
        return Token(NUM, start, end, text, number.value, number)
    n = _value(match.group("n"))
    if n is None:
        return None
    if kind == "times":
        return Token(POST, start, end, text, ("mul", n))
    if kind == "tenths":  # 三成: three tenths
        return Token(POST, start, end, text, ("mul", n / 10))
    if kind == "root_of":
        return Token(PRE, start, end, text, ("root", n))
    root = kind == "root" or match.groupdict().get("root")
    return Token(POST, start, end, text, ("root" if root else "pow", n))


def blank(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with ``spans`` turned to spaces (positions kept), so patterns skip what another rule read."""
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            chars[i] = " "
    return "".join(chars)


def lex(text: str, blanked: list[tuple[int, int]] | None = None) -> list[Token]:
    """The tokens of ``text`` (already :func:`normalized`), in order; ``blanked`` spans are read as blanks
    (a date reference the date rules took)."""
    masked = blank(text, [*(blanked or []), *((m.start(), m.end()) for m in _NOT_ARITHMETIC.finditer(text))])
    tokens: list[Token] = []
    for pattern, kind in _COMPOSITES:
        for match in pattern.finditer(masked):
            token = _composite(kind, match, match.start(), match.end())
            if token is not None and not any(t.start < token.end and token.start < t.end for t in tokens):
                tokens.append(token)
    masked = blank(masked, [(t.start, t.end) for t in tokens])
    no_words = blank(masked, [(m.start(), m.end()) for m in _ZH_NOT_NUMBER.finditer(masked)])
    for number in find_numbers(no_words):
        tokens.append(
            Token(NUM, number.start, number.end, text[number.start : number.end], number.value, number)
        )
    masked = blank(masked, [(t.start, t.end) for t in tokens])
    for match in _WORD_RE.finditer(masked):
        index = int(next(name for name, value in match.groupdict().items() if value is not None)[1:])
        _, kind, arg = _WORDS[index]
        if kind == BOTH:
            arg = _BOTH_OPS.get(match.group(0)[-1]) or _BOTH_OPS[match.group(0)[1]]
        tokens.append(Token(kind, match.start(), match.end(), match.group(0).strip(), arg))
    tokens.sort(key=lambda t: t.start)
    return _with_text(text, masked, tokens)


_AMBIGUOUS = re.compile(r"times|over|x", re.IGNORECASE)
# What may stand on either side of "times", "over" or "x" for it to be an operator ("pi times 2" too: the
# request is then a calculation, declined for the pi it cannot read).
_LEFT_OPERAND = {NUM, RPAREN, POST, REF, UNKNOWN}
_RIGHT_OPERAND = {NUM, LPAREN, PRE, REF, NEG, UNKNOWN}


def _meant(tokens: list[Token]) -> list[Token]:
    """Drop words that are operators only between operands: "的"/"of" beside a percentage ("1250 的 8%",
    "20% of 150"), "times"/"over" between two numbers ("3 times a week", "over 3 days" are words)."""
    kept = []
    for i, token in enumerate(tokens):
        before = tokens[i - 1] if i > 0 else None
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        between = (
            before is not None
            and before.kind in _LEFT_OPERAND
            and after is not None
            and after.kind in _RIGHT_OPERAND
        )
        if token.kind == OF:
            percent = [
                t
                for t in (before, after)
                if t is not None and t.kind == NUM and t.number and (t.number.percent or "分之" in t.text)
            ]
            if not (percent and between):
                continue  # "我的问题", "5 的阶乘": a plain 的 / of joins words, it does not multiply
        equation = before is not None and before.kind in _LEFT_OPERAND  # "k1=1.2" names a setting
        if (
            token.kind == SEP
            and token.arg == "="
            and equation
            and after is not None
            and after.kind in (NUM, LPAREN)
        ):
            token = Token(UNKNOWN, token.start, token.end, token.text)  # "x + 3 = 5": an equation to solve
        if token.kind == NEG and (after is None or after.kind not in (NUM, LPAREN)):
            continue  # 负责, 负载: not a sign
        if token.text.lower() == "times" and before is not None and before.kind in (CHAIN, SEP):
            between = (
                after is not None and after.kind in _RIGHT_OPERAND
            )  # "…, then times 2": the result times 2
        if token.kind == OP and _AMBIGUOUS.fullmatch(token.text) and not between:
            token = Token(TEXT, token.start, token.end, token.text)
        kept.append(token)
    return kept


def _with_text(text: str, masked: str, tokens: list[Token]) -> list[Token]:
    """``tokens`` with a ``text`` token wherever words stand between two of them."""
    out: list[Token] = []
    position = 0
    for token in [*tokens, None]:
        end = token.start if token is not None else len(masked)
        gap = masked[position:end]
        of_a_thing = (
            token is not None
            and len(out) >= 2
            and out[-1].kind == OF
            and out[-2].kind == NUM
            and _THING.fullmatch(gap) is not None
        )
        discount = token is not None and (
            token.kind == CHANGE
            or (token.kind == POST and isinstance(token.arg, tuple) and token.arg[0] == "mul")
        )
        if of_a_thing and discount:
            gap = ""  # "560 元的外套打九折": the coat's price is what is discounted
        if gap.strip() and _FILLER.fullmatch(gap) is None:
            out.append(Token(TEXT, position, end, text[position:end].strip()))
        if token is None:
            break
        out.append(token)
        position = token.end
    return _numbers_in_words_checked(_meant(out))


def _numbers_in_words_checked(tokens: list[Token]) -> list[Token]:
    """Keep a number written in words only beside an operator or a bracket ("三加五", "八的平方根"): alone,
    "one" or "一" is a word ("one more thing", "which one")."""
    kept: list[Token] = []
    for i, token in enumerate(tokens):
        if token.kind == NUM and token.number is not None and token.number.word and not token.number.percent:
            neighbours = [tokens[j] for j in (i - 1, i + 1) if 0 <= j < len(tokens)]
            if not any(n.kind in OPERATORS | {CONJ, LPAREN, RPAREN, BY, TO, FROM} for n in neighbours):
                kept.append(Token(TEXT, token.start, token.end, token.text))
                continue
        kept.append(token)
    return kept
