"""PDF files as one text per page, within the bounds of :mod:`stores.knowledge.load_limits`.

Kept apart from :mod:`stores.knowledge.documents` because pypdf needs its noise silenced and its limits set.
"""

from __future__ import annotations

import contextlib
import io
import logging
import threading
import warnings
from collections.abc import Iterator

from stores.knowledge.load_limits import MAX_PDF_PAGES, MAX_TEXT_CHARS, Deadline, LimitExceeded, pdf_limits

_PDF_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_pypdf() -> Iterator[None]:
    """pypdf logs and warns about every oddity of real-world PDFs; a failed load is reported instead."""
    logger = logging.getLogger("pypdf")
    with _PDF_LOCK:  # logger levels and warning filters are process-wide: one PDF at a time
        level = logger.level
        logger.setLevel(logging.CRITICAL)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield
        finally:
            logger.setLevel(level)


def pdf_pages(raw: bytes, deadline: Deadline | None = None) -> tuple[str, list[tuple[str, str]]]:
    """(metadata title or "", [("p.N", page text)]); raises ValueError saying why the PDF cannot be read."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    deadline = deadline or Deadline()
    with _quiet_pypdf(), pdf_limits():
        try:
            reader = PdfReader(io.BytesIO(raw), strict=False)
            if reader.is_encrypted and not reader.decrypt(""):
                raise ValueError("encrypted PDF (needs a password)")
            count = len(reader.pages)
            if count > MAX_PDF_PAGES:
                raise LimitExceeded(f"PDF has {count} pages, over the {MAX_PDF_PAGES} limit; split the file")
            pages, chars = [], 0
            for n, page in enumerate(reader.pages, 1):
                deadline.check(f"PDF (page {n} of {count})")
                text = page.extract_text() or ""
                chars += len(text)
                if chars > MAX_TEXT_CHARS:
                    raise LimitExceeded(f"PDF text is over {MAX_TEXT_CHARS} characters; split the file")
                pages.append((f"p.{n}", text))
            title = str((reader.metadata.title if reader.metadata else None) or "").strip()
        except ValueError:
            raise
        except LimitReachedError as exc:
            raise LimitExceeded(f"PDF is over a bound of stores.knowledge.load_limits ({exc}); a zip bomb?") from exc
        except Exception as exc:  # pypdf raises many kinds on damaged files (and LimitReachedError)
            raise ValueError(f"corrupt or unreadable PDF: {exc}") from exc
    return title, pages
