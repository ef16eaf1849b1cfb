"""Reading a calculation whole, or not at all.

:func:`read_calculation` parses the tokens of a request (:mod:`models.offline.calculation_words`) into the
expressions the calculator will compute, one per step, and then checks, in one place, that those expressions
used every number and every operator word of the request. Whatever is left over ("三加五再乘以 x", "5 的阶乘",
"3 除 6", a number it could not place) makes the reading :attr:`Calculation.unread`, and the model declines
instead of presenting part of the calculation as the result.

Steps follow the request: "先算 12 × 3，再加上 5", "then divide the result by 8", "三加五，乘以二" are one
step per part, a later step using the previous result (``{result}`` in its expression); within one part the
usual precedence holds ("3 + 5 × 2" is 13).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from models.offline.calculation_words import (
    BOTH,
    BY,
    CHAIN,
    CHANGE,
    CONJ,
    FROM,
    LPAREN,
    NEG,
    NUM,
    OF,
    OFF,
    OP,
    OPERATORS,
    POST,
    PRE,
    REF,
    REQUIRED,
    RPAREN,
    SEP,
    SUM_OF,
    TEXT,
    TO,
    VERB,
    Token,
    blank,
    lex,
    normalized,
)
from models.offline.numbers import shown

RESULT = "{result}"  # in a step's expression: the previous step's result
# As the retrieval gate's: a request whose calculation is less than this share of it is not only a calculation.
ARITHMETIC_SHARE = 0.6
_ASKS_RESULT = re.compile(
    r"计算|算一下|算算|帮我算|等于|是多少|得多少|多少钱|是几|等于几|结果是|=|"
    r"\b(?:how\s+much|calculate|compute|equals?|work\s+out|figure\s+out)\b|"
    r"\bwhat(?:'s|\s+is)\s+(?:the\s+)?(?:result|answer|value|total|sum|product)\b",
    re.IGNORECASE,
)
# Words that only ask for the calculation; what else a request says may make it a question of its own.
_ASKING = re.compile(
    r"计算|算一下|算算|算下|帮我算|帮忙算|帮我|帮忙|请问|请|麻烦|告诉我|等于|是多少|得多少|多少钱|多少|是几|几|"
    r"[的是呢吗呀啊吧求先]|一下|结果是|一共|总共|合计|总计|另外|还有|以及|[?？。!！,，:：]|"
    r"\b(?:what(?:'s|\s+is)?|how\s+much(?:\s+is)?|calculate|compute|please|pls|the|is|equals?|tell\s+me|"
    r"can\s+you|could\s+you|work\s+out|figure\s+out|give\s+me|quickly|do|i\s+need|total|altogether|"
    r"in\s+all|if\s+(?:i|we|you)|also|and)\b",
    re.IGNORECASE,
)
MAX_DEPTH = 40  # nested brackets or operators deeper than this are not read (the calculator caps it too)

_SUM, _PRODUCT, _UNARY, _POWER, _ATOM = 1, 2, 3, 4, 5
_BINDING = {"+": (10, 11), "-": (10, 11), "*": (20, 21), "/": (20, 21), "%": (20, 21), "**": (31, 30)}
_STARTS = {NUM, LPAREN, PRE, REF, NEG, SUM_OF, VERB}
_CONTINUES = {OP, POST, OF, OFF, CHANGE, BOTH}
_LONE_NUMBER = re.compile(r"-?\(?[\d.]+(?: / 100)?\)?")  # "5", "-5", "(20 / 100)": nothing computed


class _Unreadable(Exception):
    """The tokens at this point do not make an expression."""


@dataclass(frozen=True)
class _Expr:
    text: str
    prec: int
    percent: bool = False
    ref: bool = False
    part: bool = False  # a fraction ("四分之一"): "360 的四分之一" takes that part of 360


@dataclass(frozen=True)
class CalculationStep:
    """One expression to compute; ``uses_result`` when it contains the previous step's result."""

    expression: str
    uses_result: bool


@dataclass
class Calculation:
    """What a request asks to compute: its steps, and the numbers or operator words no step used."""

    steps: list[CalculationStep] = field(default_factory=list)
    unread: list[Token] = field(default_factory=list)
    is_calculation: bool = False
    mixed: bool = False  # other words make up most of the request: a question a calculation is part of

    @property
    def complete(self) -> bool:
        """A calculation whose every number and operator word is in a step's expression."""
        return self.is_calculation and bool(self.steps) and not self.unread


def _wrap(e: _Expr, least: int) -> str:
    return e.text if e.prec >= least else f"({e.text})"


_AS_TYPED = {
    "×": "×",
    "÷": "÷",
    "x": "×",
    "X": "×",
    "✕": "×",
    "*": "*",
    "/": "/",
    "+": "+",
    "-": "-",
    "^": "**",
}


def _binary(op: str, left: _Expr, right: _Expr, typed: str = "") -> _Expr:
    """``left op right`` with the brackets precedence needs; ``typed``: the symbol as the user wrote it
    ("123 × 456" stays so in the answer), else the calculator's own."""
    symbol = _AS_TYPED.get(typed, op)
    if op in "+-":
        if left.percent != right.percent:
            # "150 - 20%": 149.8 or 120? Calculators disagree, so the reader does not guess.
            raise _Unreadable
        text = f"{_wrap(left, _SUM)} {symbol} {_wrap(right, _PRODUCT if op == '-' else _SUM)}"
        return _Expr(text, _SUM, left.percent and right.percent, left.ref or right.ref)
    if op == "**":
        return _Expr(f"{_wrap(left, _ATOM)} ** {_wrap(right, _POWER)}", _POWER, ref=left.ref or right.ref)
    return _Expr(
        f"{_wrap(left, _PRODUCT)} {symbol} {_wrap(right, _UNARY)}", _PRODUCT, ref=left.ref or right.ref
    )


def _postfix(arg: tuple[str, Fraction], operand: _Expr) -> _Expr:
    kind, n = arg
    if kind == "pow":
        return _binary("**", operand, _number(n))
    if kind == "mul":
        return _binary("*", operand, _number(n))
    return _root(n, operand)


def _root(n: Fraction, operand: _Expr) -> _Expr:
    if n == 2:
        return _Expr(f"sqrt({operand.text})", _ATOM, ref=operand.ref)
    if n == 3:
        return _Expr(f"cbrt({operand.text})", _ATOM, ref=operand.ref)
    if n.denominator != 1 or n < 2:
        raise _Unreadable
    return _Expr(f"{_wrap(operand, _ATOM)} ** (1 / {n})", _POWER, ref=operand.ref)


def _number(value: Fraction) -> _Expr:
    text = shown(value)
    return _Expr(text, _ATOM if not text.startswith("-") else _UNARY)


def _change(sign: str, base: _Expr, amount: _Expr) -> _Expr:
    """ "80 increased by 25%" is 80 × 1.25; "80 increased by 5" is 80 + 5."""
    if not amount.percent:
        return _binary(sign, base, amount)
    factor = _Expr(f"1 {sign} {_wrap(amount, _PRODUCT)}", _SUM)
    return _binary("*", base, factor)


class _Parser:
    def __init__(self, tokens: list[Token], has_result: bool) -> None:
        self.tokens = tokens
        self.pos = 0
        self.used: set[int] = set()
        self.has_result = has_result
        self.depth = 0

    def peek(self, ahead: int = 0) -> Token | None:
        i = self.pos + ahead
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self, *kinds: str) -> Token:
        token = self.peek()
        if token is None or token.kind not in kinds:
            raise _Unreadable
        self.used.add(self.pos)
        self.pos += 1
        return token

    def at(self, *kinds: str) -> bool:
        token = self.peek()
        return token is not None and token.kind in kinds

    def ref(self) -> _Expr:
        if not self.has_result:
            raise _Unreadable
        return _Expr(RESULT, _ATOM, ref=True)

    def expression(self, least: int = 0, left: _Expr | None = None) -> _Expr:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Unreadable
        try:
            if left is None:
                left = self.prefix()
            while (token := self.peek()) is not None:
                if token.kind == POST:
                    self.take(POST)
                    left = _postfix(token.arg, left)  # type: ignore[arg-type]
                elif token.kind == OP and _BINDING[str(token.arg)][0] >= least:
                    self.take(OP)
                    right = self.expression(_BINDING[str(token.arg)][1])
                    left = _binary(str(token.arg), left, right, token.text)
                elif token.kind in (OF, OFF) and least <= 20:
                    self.take(token.kind)
                    right = self.expression(21)
                    if token.kind == OFF:  # "20% off 150"
                        if not left.percent:
                            raise _Unreadable
                        left = _change("-", right, left)
                    elif (
                        left.percent or right.percent or left.part or right.part
                    ):  # "20% of 150", "1250 的 8%"
                        left = _binary("*", _plain(left), _plain(right))
                    else:
                        raise _Unreadable
                elif token.kind == CHANGE and least <= 10:
                    self.take(CHANGE)
                    left = _change(str(token.arg), left, self.expression(11))
                elif token.kind == CONJ and least <= 10 and self.both_follows():
                    self.take(CONJ)
                    right = self.expression(11)
                    left = _binary(str(self.take(BOTH).arg), left, right)
                else:
                    break
            return left
        finally:
            self.depth -= 1

    def both_follows(self) -> bool:
        """Whether "和 5 的和" / "与 2 相除" follows: an operand, then the word naming the operation."""
        for ahead in range(1, 8):
            token = self.peek(ahead)
            if token is None or token.kind in (TEXT, SEP, CHAIN, CONJ):
                return False
            if token.kind == BOTH:
                return True
        return False

    def prefix(self) -> _Expr:
        token = self.peek()
        if token is None:
            raise _Unreadable
        kind = token.kind
        if kind == NUM:
            self.take(NUM)
            value = token.arg if isinstance(token.arg, Fraction) else Fraction(0)
            if token.number is not None and token.number.percent:
                return _Expr(f"({shown(value)} / 100)", _ATOM, percent=True)
            if "分之" in token.text:
                return _Expr(shown(value), _ATOM, part=True)
            return _number(value)
        if kind == LPAREN:
            self.take(LPAREN)
            inner = self.expression()
            self.take(RPAREN)
            return _Expr(f"({inner.text})", _ATOM, inner.percent, inner.ref)
        if kind == NEG or (kind == OP and token.text in ("-", "+", "−", "–")):
            self.take(kind)
            operand = self.expression(25)
            if kind == OP and token.arg == "+":
                return operand
            return _Expr(f"-{_wrap(operand, _POWER)}", _UNARY, operand.percent, operand.ref)
        if kind == PRE:
            self.take(PRE)
            return _root(token.arg[1], self.expression(30))  # type: ignore[index]
        if kind == REF:
            self.take(REF)
            return self.ref()
        if kind == SUM_OF:
            self.take(SUM_OF)
            return self.listed(str(token.arg))
        if kind == VERB:
            self.take(VERB)
            return self.verb(str(token.arg))
        raise _Unreadable

    def listed(self, op: str) -> _Expr:
        """ "the sum of 3, 4 and 5", "the difference between 10 and 3"."""
        total = self.expression(11)
        count = 1
        while self.at(SEP, CONJ) and (nxt := self.peek(1)) is not None and nxt.kind in _STARTS:
            last = self.peek()
            self.take(SEP, CONJ)
            total = _binary(op, total, self.expression(11))
            count += 1
            if last is not None and last.kind == CONJ:
                break
        if count < 2 or (count > 2 and op in "-/"):
            raise _Unreadable
        return total

    def verb(self, name: str) -> _Expr:
        """ "add 5 to it", "subtract 3 from 10", "multiply 4 by 6", "divide it by 8", "square 7"."""
        if name in ("square", "cube"):
            operand = self.expression(30) if self.at(*_STARTS) else self.ref()
            return _binary("**", operand, _number(Fraction(2 if name == "square" else 3)))
        if name in ("multiply", "divide") and self.at(BY):
            self.take(BY)
            return _binary("*" if name == "multiply" else "/", self.ref(), self.expression(11))
        first = self.expression(11)
        if name == "add":
            if self.at(CONJ, TO):
                joiner = self.take(CONJ, TO)
                other = self.expression(11)
                return _binary("+", other, first) if joiner.kind == TO else _binary("+", first, other)
            return _binary("+", self.ref(), first)
        if name == "subtract":
            if self.at(FROM):
                self.take(FROM)
                return _binary("-", self.expression(11), first)
            return _binary("-", self.ref(), first)
        if name in ("increase", "decrease"):
            self.take(BY)
            return _change("+" if name == "increase" else "-", first, self.expression(11))
        joiner = self.take(BY, CONJ) if name == "multiply" else self.take(BY)
        del joiner
        return _binary("*" if name == "multiply" else "/", first, self.expression(11))


def _plain(e: _Expr) -> _Expr:
    return _Expr(e.text, e.prec, False, e.ref)


_NEEDS_LEFT = {POST, CHANGE, BOTH, OF, OFF}  # "8 的平方根", "80 涨了 20%": an operation on what stands before
_NEEDS_RIGHT = {PRE, VERB, SUM_OF, NEG}  # "根号 2", "add 5": an operation on what follows


def _signals(tokens: list[Token]) -> bool:
    """Whether the request asks for arithmetic: an operator word right beside the number it works on
    ("营收增长了 15%" has a percentage but no number that grew)."""
    for i, token in enumerate(tokens):
        before = tokens[i - 1].kind if i > 0 else None
        after = tokens[i + 1].kind if i + 1 < len(tokens) else None
        if token.kind in _NEEDS_LEFT:
            operands = [before]
        elif token.kind in _NEEDS_RIGHT:
            operands = [after]
        elif token.kind in OPERATORS:
            operands = [before, after]
        else:
            continue
        if any(kind in (NUM, LPAREN, RPAREN) for kind in operands):
            return True
    return False


def read_calculation(
    text: str, *, blanked: list[tuple[int, int]] | None = None, previous: str | None = None
) -> Calculation:
    """The calculation ``text`` asks for, step by step, and whatever of it could not be read.

    ``blanked``: spans of ``text`` another rule has read (a date); ``previous``: an earlier result that
    "结果" / "the result" may refer to before any step of this request.
    """
    text = normalized(text)
    tokens = lex(text, blanked)
    if not _signals(tokens):
        return Calculation()
    parser = _Parser(tokens, has_result=previous is not None)
    steps: list[CalculationStep] = []
    may_continue = previous is not None
    while parser.peek() is not None:
        token = parser.peek()
        assert token is not None
        if token.kind in (TEXT, SEP, CONJ, CHAIN, BY, TO, FROM, RPAREN):
            may_continue = token.kind in (SEP, CHAIN, CONJ) or (may_continue and token.kind == TEXT)
            parser.pos += 1
            continue
        start, used = parser.pos, set(parser.used)
        try:
            if may_continue and parser.has_result and token.kind in _CONTINUES:
                expr = parser.expression(0, left=parser.ref())
            elif token.kind in _STARTS or (token.kind == OP and token.text in ("-", "+", "−", "–")):
                expr = parser.expression()
            else:
                raise _Unreadable
            if _LONE_NUMBER.fullmatch(expr.text):
                raise _Unreadable  # a number on its own is no step: "3 + 5 for 2 people" leaves the 2
        except _Unreadable:
            parser.pos, parser.used = start, used
            break
        if expr.text == RESULT:  # "最后结果是多少": a mention of the result, nothing to compute
            continue
        steps.append(CalculationStep(expr.text, expr.ref))
        parser.has_result, may_continue = True, False
    if previous is not None:
        steps = [
            CalculationStep(s.expression.replace(RESULT, f"({previous})"), False) if i == 0 else s
            for i, s in enumerate(steps)
        ]
    unread = [t for i, t in enumerate(tokens) if t.kind in REQUIRED and i not in parser.used]
    mixed = _mostly_other_words(blank(text, blanked or []), tokens)
    return Calculation(steps, unread, is_calculation=True, mixed=mixed)


def _mostly_other_words(text: str, tokens: list[Token]) -> bool:
    """Whether words other than the calculation and the asking for it make up most of the request ("2 + 2
    会议的纪要在哪", "what does the policy say about 2 + 2 meetings?"): a question the calculation is part of,
    for the documents, the way the retrieval gate weighs it (``ARITHMETIC_SHARE``). A request that asks for
    the result ("九九乘法表里七乘八是多少", "how much is …") is a calculation however it is worded."""
    if _ASKS_RESULT.search(text):
        return False
    other = sum(len(_ASKING.sub("", t.text).replace(" ", "")) for t in tokens if t.kind == TEXT)
    total = len(_ASKING.sub("", text).replace(" ", ""))
    return total > 0 and other > (1 - ARITHMETIC_SHARE) * total
