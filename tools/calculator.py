"""Safe arithmetic for the ``calculator`` tool.

Expressions come from the model, so they are untrusted input: we never ``eval`` them. The text is
parsed with :mod:`ast`, only numbers, parentheses, ``+ - * / // % **`` and the roots ``sqrt(x)`` and
``cbrt(x)`` are accepted, and every size (length, nesting, node count, literal digits, exponents,
intermediate results) is bounded so that no input can hang the process or exhaust memory. Arithmetic is
exact (:class:`Fraction`), roots included when they come out whole (``sqrt(16)`` is 4, ``cbrt(-27)`` is
-3); other roots and non-integer powers are computed to 15 significant digits.
"""

from __future__ import annotations

import ast
import math
import re
from decimal import Context, Decimal
from fractions import Fraction

MAX_EXPRESSION_CHARS = 500
MAX_NESTING = 100
MAX_NODES = 200
MAX_LITERAL_DIGITS = 100
MAX_EXPONENT = 1000
MAX_BITS = 10_000
SIGNIFICANT_DIGITS = 15

ACCEPTED = "only numbers, parentheses, + - * / // % ** and sqrt(x), cbrt(x) are accepted"
ROOTS = {"sqrt": 2, "cbrt": 3}  # the functions the calculator knows, by their degree


class CalculatorError(ValueError):
    """An expression the calculator refuses; the message tells the model what to fix."""


_CHAR_MAP = str.maketrans(
    {
        **{chr(0xFF10 + i): str(i) for i in range(10)},
        "（": "(", "）": ")", "＋": "+", "－": "-", "＊": "*", "／": "/", "％": "%",
        "＾": "^", "．": ".", "，": ",", "＝": "=", "？": "?", "\u3000": " ",
        "×": "*", "✕": "*", "÷": "/", "−": "-",
    }
)  # fmt: skip
_TRAILING_EQUALS = re.compile(r"\s*(?:=\s*)?\?*\s*$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TIMES_X = re.compile(r"(?<=[\d.)])\s*[xX]\s*(?=[\d.(])")

_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
    ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
}  # fmt: skip
_OPERATOR_SYMBOLS = {
    ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|",
    ast.BitXor: "^ (bitwise xor)", ast.BitAnd: "&", ast.Invert: "~", ast.Not: "not",
}  # fmt: skip
_CONSTRUCTS = {
    ast.Name: "a name", ast.Call: "a function call", ast.Attribute: "attribute access",
    ast.Subscript: "indexing", ast.Compare: "a comparison", ast.BoolOp: "and/or",
    ast.IfExp: "a conditional expression", ast.Lambda: "a lambda", ast.List: "a list",
    ast.Tuple: "a tuple (a comma)", ast.Set: "a set", ast.Dict: "a dict",
    ast.JoinedStr: "an f-string", ast.NamedExpr: "assignment (:=)", ast.Starred: "unpacking (*)",
}  # fmt: skip


def normalize_expression(text: str) -> str:
    """Map human/Chinese notation (×, ÷, ^, full-width characters, 1,234, trailing =) to Python."""
    text = text.translate(_CHAR_MAP).strip()
    text = _TRAILING_EQUALS.sub("", text)
    text = _THOUSANDS.sub("", text)
    text = _TIMES_X.sub("*", text)
    return text.replace("^", "**")


def _refuse(what: str) -> CalculatorError:
    return CalculatorError(f"{what} is not allowed; {ACCEPTED}")


def _checked(value: Fraction) -> Fraction:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > MAX_BITS:
        raise CalculatorError(f"an intermediate result is too large (over {MAX_BITS} bits)")
    return value


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if abs(exponent) > MAX_EXPONENT:
        shown = str(exponent) if exponent.numerator.bit_length() < 64 else "of this size"
        raise CalculatorError(f"exponent {shown} is too large (at most {MAX_EXPONENT} in absolute value)")
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero: 0 raised to a negative power")
    if exponent.denominator == 1:
        size = max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(exponent.numerator)
        if size > MAX_BITS:
            raise CalculatorError(f"the result of this power would be too large (about {size} bits)")
        return base**exponent.numerator
    if base < 0:
        raise CalculatorError("a negative number to a fractional power has no real result")
    try:
        result = float(base) ** float(exponent)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise CalculatorError("the result of this power is too large")
    return Fraction(result)


def _integer_root(n: int, degree: int) -> int:
    """The largest integer whose ``degree``-th power is at most ``n`` (``n`` ≥ 0), by Newton's method."""
    if n < 2:
        return n
    guess = 1 << -(-n.bit_length() // degree)  # a power of two at or above the root
    while True:
        better = ((degree - 1) * guess + n // guess ** (degree - 1)) // degree
        if better >= guess:
            return guess
        guess = better


def _root(value: Fraction, degree: int) -> tuple[Fraction, bool]:
    """The real ``degree``-th root of ``value`` and whether it is exact (a whole or rational root)."""
    if value < 0 and degree % 2 == 0:
        raise CalculatorError("the square root of a negative number has no real result")
    sign = -1 if value < 0 else 1
    value = abs(value)
    top, bottom = _integer_root(value.numerator, degree), _integer_root(value.denominator, degree)
    if top**degree == value.numerator and bottom**degree == value.denominator:
        return sign * Fraction(top, bottom), True
    context = Context(prec=SIGNIFICANT_DIGITS + 10)
    quotient = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    if degree == 2:
        root = quotient.sqrt(context)
    else:
        root = context.exp(context.divide(quotient.ln(context), Decimal(degree)))
    return sign * Fraction(root), False


def _literal(node: ast.Constant, source: str) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float):  # a parsed constant is no other subclass
        kinds = {bool: "a boolean", complex: "a complex number", str: "a string", bytes: "a bytes string"}
        raise _refuse(kinds.get(type(value), "this constant"))
    text = ast.get_source_segment(source, node) or repr(value)
    if sum(ch.isdigit() for ch in text) > MAX_LITERAL_DIGITS:
        raise CalculatorError(f"a number has more than {MAX_LITERAL_DIGITS} digits")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CalculatorError("a number is too large")
        return Fraction(repr(value))
    return Fraction(value)


class _Evaluator:
    """Walks the parsed tree; ``inexact`` records whether a float fallback happened."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.inexact = False

    def eval(self, node: ast.AST) -> Fraction:
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            return _literal(node, self.source)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.eval(node.operand)
            return -operand if isinstance(node.op, ast.USub) else operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _checked(self.binop(node.op, self.eval(node.left), self.eval(node.right)))
        if isinstance(node, ast.Call):
            return self.root(node)
        op = getattr(node, "op", None)
        if op is not None and type(op) in _OPERATOR_SYMBOLS:
            raise _refuse(f"the operator {_OPERATOR_SYMBOLS[type(op)]}")
        raise _refuse(_CONSTRUCTS.get(type(node), f"{type(node).__name__} syntax"))

    def root(self, call: ast.Call) -> Fraction:
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name not in ROOTS:
            raise _refuse("a function call other than sqrt(x) or cbrt(x)")
        if len(call.args) != 1 or call.keywords or isinstance(call.args[0], ast.Starred):
            raise CalculatorError(f"{name}() takes exactly one number, e.g. {name}(8)")
        value, exact = _root(self.eval(call.args[0]), ROOTS[name])
        self.inexact = self.inexact or not exact
        return value

    def binop(self, op: ast.operator, left: Fraction, right: Fraction) -> Fraction:
        if isinstance(op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise CalculatorError(f"division by zero ({_BINOPS[type(op)]} 0) is undefined")
        if isinstance(op, ast.Add):
            return left + right
        if isinstance(op, ast.Sub):
            return left - right
        if isinstance(op, ast.Mult):
            return left * right
        if isinstance(op, ast.Div):
            return left / right
        if isinstance(op, ast.FloorDiv):
            return Fraction(left // right)
        if isinstance(op, ast.Mod):
            return left % right
        if right.denominator != 1:
            self.inexact = True
        return _power(left, right)


def _format(value: Fraction, inexact: bool) -> str:
    if value.denominator == 1 and not inexact:
        return str(value.numerator)
    context = Context(prec=SIGNIFICANT_DIGITS)
    number = context.divide(Decimal(value.numerator), Decimal(value.denominator)).normalize(context)
    if -7 < number.adjusted() < SIGNIFICANT_DIGITS:
        return format(number, "f")
    return format(number, "e")


def _max_nesting(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def evaluate(expression: str) -> str:
    """Evaluate an arithmetic expression and return the result as a string, or raise CalculatorError."""
    if not isinstance(expression, str):
        raise CalculatorError(f"the expression must be a string, not {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(
            f"expression is too long ({len(expression)} characters; the limit is {MAX_EXPRESSION_CHARS})"
        )
    source = normalize_expression(expression)
    if not source:
        raise CalculatorError(f"the expression is empty; {ACCEPTED}")
    if _max_nesting(source) > MAX_NESTING:
        raise CalculatorError(f"parentheses are nested too deeply (the limit is {MAX_NESTING})")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        detail = getattr(exc, "msg", None) or type(exc).__name__
        raise CalculatorError(f"could not parse {source!r} ({detail}); {ACCEPTED}") from None
    nodes = sum(1 for n in ast.walk(tree) if not isinstance(n, ast.operator | ast.unaryop | ast.expr_context))
    if nodes > MAX_NODES:
        raise CalculatorError(f"expression is too complex ({nodes} parts; the limit is {MAX_NODES})")
    try:
        evaluator = _Evaluator(source)
        value = evaluator.eval(tree)
        return _format(value, evaluator.inexact)
    except CalculatorError:
        raise
    except (ArithmeticError, RecursionError, MemoryError, ValueError) as exc:
        raise CalculatorError(f"could not evaluate the expression ({type(exc).__name__}: {exc})") from None
