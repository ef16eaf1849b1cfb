"""HTML pages as sections of visible text, one per h1-h3 heading.

Kept apart from :mod:`stores.knowledge.documents` like the PDF and .docx loaders: it returns (heading path, text)
pairs and the caller tidies them, so this module needs nothing from there.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from stores.knowledge.load_limits import Deadline

_SKIP_TAGS = frozenset({"script", "style", "nav", "noscript", "template", "svg"})
_HEADINGS = frozenset({"h1", "h2", "h3"})
_BLOCK_TAGS = frozenset(  # tags that end a paragraph (a word list reads better than 34 quoted strings)
    "p div section article main header footer aside blockquote pre ul ol li dl dt dd table thead tbody "  # noqa: SIM905
    "tfoot tr caption figure figcaption form fieldset address hr h4 h5 h6 details summary br".split()
)


class _HTMLSections(HTMLParser):
    """Visible text by h1-h3 section with paragraph breaks; script, style and nav never reach the index."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title = self.first_h1 = ""
        self.sections: list[tuple[str, str]] = []  # (heading path, text not yet tidied)
        self._stack: list[tuple[int, str]] = []
        self._buf: list[str] = []
        self._capture: list[str] = []  # text of the <title> or heading being read
        self._tag = ""  # which one ("" when none)
        self._skip = self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS or self._skip:
            self._skip += tag in _SKIP_TAGS
        elif tag == "title" or tag in _HEADINGS:
            if tag != "title":
                self._flush()
            self._capture, self._tag = [], tag
        elif tag in _BLOCK_TAGS:
            self._pre += tag == "pre"
            self._break("\n" if tag == "br" else "\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == self._tag:
            name, self._tag = " ".join("".join(self._capture).split()), ""
            if tag == "title":
                self.title = self.title or name
                return
            level = int(tag[1])
            self.first_h1 = self.first_h1 or (name if level == 1 else "")
            while self._stack and self._stack[-1][0] >= level:
                self._stack.pop()
            self._stack.append((level, name))
        elif tag in _BLOCK_TAGS and tag != "br":
            self._pre = max(0, self._pre - (tag == "pre"))
            self._break("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._tag:
            self._capture.append(data)
        elif self._pre:
            self._buf.append(data)
        else:
            data = re.sub(r"\s+", " ", data)
            self._buf.append(data.lstrip() if not self._buf or self._buf[-1].endswith("\n") else data)

    def _break(self, newlines: str) -> None:
        if self._buf:
            self._buf[-1] = self._buf[-1].rstrip(" ")
        self._buf.append(newlines)

    def _flush(self) -> None:
        if (text := "".join(self._buf)).strip():
            self.sections.append((" > ".join(name for _, name in self._stack if name), text))
        self._buf = []

    def close(self) -> None:
        super().close()
        self._flush()


def html_sections(text: str, fallback_title: str, block: int) -> tuple[str, list[tuple[str, str]]]:
    """(title, [(heading path, text)]) of a decoded page, fed ``block`` characters at a time.

    Raises LimitExceeded when the page takes past the load deadline (a pathological page stops there).
    """
    parser, deadline = _HTMLSections(), Deadline()
    for start in range(0, len(text), block):
        deadline.check("HTML")
        parser.feed(text[start : start + block])
    parser.close()
    return parser.title or parser.first_h1 or fallback_title, parser.sections
