"""What reaches the terminal: text from documents, tools and models is data, never terminal commands.

A document (or a model, or an MCP server) can carry escape sequences that recolour, retitle or rewrite the
user's terminal, and bytes that are not UTF-8 would crash the print. Everything the CLI prints that came
from outside goes through :func:`clean`; arguments and stdin go through :func:`undecodable` first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console

# CSI (ESC [ … final), OSC (ESC ] … BEL or ST), other ESC sequences (DCS/SOS/PM/APC strings up to ST,
# two-byte escapes), their 8-bit C1 forms, then any C0/C1 control left except \n and \t.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_SURROGATES = re.compile("[\ud800-\udfff]")
# Bidirectional controls reorder what follows them on screen ("evil\u202egnp.md" shows as "evildm.png"):
# shown as their escape, so the text reads as what it is.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\n\t\u2028\u2029\x85]")


def clean(text: object) -> str:
    """``text`` as a string safe to print: no escape sequences or controls (but \\n, \\t), valid UTF-8.

    A lone \\r is dropped too: it would let a line overwrite what the terminal just showed. Bytes that are
    not UTF-8 (surrogate escapes) become U+FFFD.
    """
    text = str(text).replace("\r\n", "\n")
    return _BIDI.sub(_escape, _SURROGATES.sub("\ufffd", _ESCAPES.sub("", text)))


def _escape(match: re.Match[str]) -> str:
    return {"\n": "\\n", "\t": "\\t"}.get(match.group(), f"\\u{ord(match.group()):04x}")


def shown_name(text: object) -> str:
    """A name (a file, a source, an id) for a rich ``print``: :func:`shown`, and on one line — a newline
    or tab in a file name is shown as ``\\n``/``\\t`` instead of splitting the line it is on."""
    from rich.markup import escape

    return escape(_LINE_BREAKS.sub(_escape, clean(text)))


class Terminal(Console):
    """A rich console that wraps long lines only on a terminal: piped or redirected output keeps each
    message on its one line, whatever the width rich assumes for a file."""

    def print(self, *objects: Any, soft_wrap: bool | None = None, **options: Any) -> None:  # type: ignore[override]
        super().print(*objects, soft_wrap=(not self.is_terminal) if soft_wrap is None else soft_wrap, **options)


def undecodable(text: str) -> str | None:
    """The bytes of ``text`` that are not UTF-8, shown as ``\\xff\\xfe`` (None when it is all valid)."""
    found = _SURROGATES.findall(text)
    if not found:
        return None
    raw = "".join(found).encode("utf-8", "surrogateescape") if _escaped(found) else b"?"
    return "".join(f"\\x{byte:02x}" for byte in raw[:8]) + ("…" if len(raw) > 8 else "")


def _escaped(found: list[str]) -> bool:
    return all("\udc80" <= char <= "\udcff" for char in found)


def shown(text: object) -> str:
    """Outside text for a rich ``print``: cleaned, and its ``[…]`` kept literal (not read as markup)."""
    from rich.markup import escape

    return escape(clean(text))


# json.dumps(ensure_ascii=False) leaves these raw: C1 controls, lone surrogates, bidirectional controls
_RAW_IN_JSON = re.compile("[\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_text(data: Any, **options: Any) -> str:
    """``data`` as indented JSON whose text cannot drive the terminal: C1 controls and bytes that are not
    UTF-8 are written as ``\\u`` escapes (C0 ones always are), so the data itself is unchanged."""
    text = json.dumps(data, ensure_ascii=False, indent=2, **options)
    return _RAW_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
