"""What may not be remembered or logged: secrets and personal numbers, found by what they are.

The text is read in one normal form (:mod:`stores.memory.secret_text`), each kind is checked by its own
structure (:mod:`stores.memory.secret_kinds`), and a sentence that states a credential is refused whatever
the value looks like (:mod:`stores.memory.secret_statements`). Spans map back to the text as written, so
``redact`` removes what the user typed; the audit history keeps only the kinds (``withheld``).
"""

from __future__ import annotations

import re

from stores.memory.secret_binding import bound_values, claimed
from stores.memory.secret_kinds import EMAIL, structural_findings
from stores.memory.secret_phrases import said_in_words
from stores.memory.secret_statements import credential_statements
from stores.memory.secret_text import read

AUDIT_CHARS = 500
# A number read as a phone only by libphonenumber's guess (no +, not a Chinese mobile) is another thing's
# when a look-alike noun names it: "学号 2021110456" is a student number.
_CLAIMABLE = re.compile(r"(?!\+|(?:86)?1[3-9])[\d\s().-]+")
LABELS = {
    "phone": "电话号码 / phone number",
    "id_card": "身份证号 / ID number",
    "bank_card": "银行卡号 / bank-card number",
    "bank_account": "银行账号 / bank account (IBAN)",
    "password": "密码或口令 / password or PIN",  # no comma: reasons join labels with ", "
    "api_key": "密钥或令牌 / API key or token",
    "credentials_url": "带凭据的网址 / URL with credentials",
    "email": "邮箱地址 / e-mail address",
    "private_key": "私钥 / private key",
}
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+/=.:@%~!#$&*")


def _claimed_phone(text: str, span: tuple[str, int, int]) -> bool:
    kind, start, end = span
    return kind == "phone" and bool(_CLAIMABLE.fullmatch(text[start:end])) and claimed(text, start)


def _widen(text: str, start: int, end: int) -> tuple[int, int]:
    """A span that cuts through a token grows to the whole token: no part of a value is left beside it."""
    while start > 0 and text[start] in _TOKEN_CHARS and text[start - 1] in _TOKEN_CHARS:
        start -= 1
    while end < len(text) and text[end - 1] in _TOKEN_CHARS and text[end] in _TOKEN_CHARS:
        end += 1
    return start, end


def findings(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every sensitive span of ``text``, in the text as written."""
    if not text:
        return []
    reading = read(text)
    spans = [span for span in structural_findings(reading.text) if not _claimed_phone(reading.text, span)]
    spans += [("password", start, end) for start, end in credential_statements(reading.text)]
    spans += bound_values(reading.text)
    spans += said_in_words(reading.text)
    out = []
    for kind, start, end in spans:
        first, last = reading.origin(start, end)
        out.append((kind, *_widen(text, first, last)))
    return out


def sensitive_kinds(content: str, *, allow_email: bool = False) -> list[str]:
    """Which kinds of sensitive data ``content`` holds (empty: none)."""
    kinds = {kind for kind, _, _ in findings(content or "")}
    if allow_email:
        kinds.discard("email")
    return sorted(kinds)


def addresses_given(content: str, wanted_in: str) -> bool:
    """Every e-mail address in ``content`` is one written in ``wanted_in`` (the user's own message)."""
    wanted = {m.lower() for m in EMAIL.findall(read(wanted_in).text)}
    found = {m.lower() for m in EMAIL.findall(read(content).text)}
    return bool(found) and found <= wanted


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…(+{len(text) - limit} chars)"


def redact(text: str, limit: int = AUDIT_CHARS) -> str:
    """``text`` with every sensitive span replaced by its kind and cut to ``limit``: what a trace may show."""
    text = text or ""
    spans = sorted(findings(text), key=lambda span: (span[1], -span[2]))
    out, pos = [], 0
    for kind, start, end in spans:
        if start < pos:  # overlapping spans: the earlier redaction grows to cover both
            pos = max(pos, end)
            continue
        out.append(text[pos:start] + f"[REDACTED:{kind}]")
        pos = end
    out.append(text[pos:])
    return _cut("".join(out), limit)


def withheld(text: str | None, limit: int = AUDIT_CHARS, *, allow_email: bool = False) -> str | None:
    """What the audit history may keep of ``text``: the text (cut) when it holds no secret, else only the
    kinds it held. A redaction can miss the edge of a value; keeping none of the text cannot."""
    if text is None:
        return None
    kinds = sensitive_kinds(text, allow_email=allow_email)
    if kinds:
        return "[withheld: " + ", ".join(kinds) + "]"
    return _cut(text, limit)
