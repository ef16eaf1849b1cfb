"""Word ``.docx`` files as sections: one per heading (Heading 1–3 / 标题 1–3), tables as rows of cells.

Kept apart from :mod:`stores.knowledge.documents` because it needs ``python-docx`` (pure Python over lxml). The zip
is checked against :mod:`stores.knowledge.load_limits` before python-docx sees it: it loads every part whole.
"""

from __future__ import annotations

import io
import re
from typing import Any

from stores.knowledge.load_limits import Deadline, check_docx_archive

_LEVEL = re.compile(r"(?:heading|标题)\s*(\d)", re.IGNORECASE)


def docx_sections(raw: bytes, fallback_title: str) -> tuple[str, list[tuple[str, str]]]:
    """(title, [(heading path, text)]) of a .docx; raises ValueError for a file that is not one."""
    from docx import Document
    from docx.oxml.ns import qn

    deadline = Deadline()
    check_docx_archive(raw, deadline)
    try:
        document = Document(io.BytesIO(raw))
    except Exception as exc:  # python-docx raises zipfile, KeyError, lxml errors… on damaged files
        raise ValueError(f"corrupt or unreadable .docx: {exc}") from exc
    title = (document.core_properties.title or "").strip()
    path: list[str] = []
    sections: list[tuple[str, list[str]]] = [("", [])]
    body = document.element.body
    for n, child in enumerate(body.iterchildren()):
        if n % 1024 == 0:
            deadline.check(".docx")
        if child.tag == qn("w:p"):
            paragraph = _paragraph(document, child)
            text = paragraph.text.strip()
            level = _heading_level(paragraph)
            if level and text:
                path = [*path[: level - 1], text]
                title = title or (text if level == 1 else "")
                sections.append((" > ".join(path), []))
            elif text:
                sections[-1][1].append(text)
        elif child.tag == qn("w:tbl"):
            sections[-1][1].extend(_table_rows(document, child))
    found = [(heading, "\n".join(lines)) for heading, lines in sections if lines]
    return title or fallback_title, found


def _paragraph(document: Any, element: Any) -> Any:
    from docx.text.paragraph import Paragraph

    return Paragraph(element, document)


def _heading_level(paragraph: Any) -> int:
    name = getattr(paragraph.style, "name", "") or ""
    if name.lower() == "title":
        return 1
    match = _LEVEL.search(name)
    return int(match.group(1)) if match and 1 <= int(match.group(1)) <= 3 else 0


def _table_rows(document: Any, element: Any) -> list[str]:
    from docx.table import Table

    rows = []
    for row in Table(element, document).rows:
        cells = [cell.text.strip() for cell in row.cells]
        if any(cells):
            rows.append(" | ".join(dict.fromkeys(cells)))  # merged cells repeat: show them once
    return rows
