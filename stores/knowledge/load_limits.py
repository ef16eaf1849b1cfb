"""Bounds on what one file may cost to read, so a hostile file is refused instead of eating the machine.

A 78 KB ``.docx`` of five million empty paragraphs, or a zip member that inflates to gigabytes, must fail
fast with one line while the rest of the batch ingests. Every bound is a module constant (README lists them)
and every refusal is a :class:`LimitExceeded` (a ``ValueError``) that the loader turns into a skip.
"""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

MiB = 1024 * 1024
MAX_TEXT_BYTES = 512 * MiB  # .txt/.md: streamed above 8 MiB, so this bounds time, not memory
MAX_HTML_BYTES = 32 * MiB  # .html is decoded and parsed whole
MAX_PDF_BYTES = 128 * MiB
MAX_PDF_PAGES = 5_000
MAX_PDF_STREAM_BYTES = 32 * MiB  # one decompressed stream (page content, object stream, image)
MAX_DOCX_BYTES = 64 * MiB
MAX_DOCX_UNZIPPED_BYTES = 256 * MiB  # all members together, as declared (zipfile never inflates past that)
MAX_ZIP_RATIO = 100  # uncompressed / compressed for any member over 1 MiB; real Word XML is 5-20
MAX_DOCX_MEMBERS = 5_000
MAX_DOCX_XML_ELEMENTS = 1_000_000  # python-docx holds the tree: ~120 MB of memory at this bound
MAX_DOCX_PARAGRAPHS = 100_000  # ~3,000 pages of prose
MAX_TEXT_CHARS = 64 * MiB  # extracted text of one PDF (a .docx's is bounded by its unzipped size)
LOAD_SECONDS = 120.0  # wall time to read one .docx, .pdf or .html into sections
_RATIO_FLOOR = MiB  # tiny members may have silly ratios without costing anything


class LimitExceeded(ValueError):
    """A file is over one of this module's bounds; the message names the bound and how to get past it."""


def check_size(kind: str, size: int, limit: int) -> None:
    """Refuse a file bigger than ``limit`` bytes before anything reads it."""
    if size > limit:
        raise LimitExceeded(f"{kind} of {_mib(size)} is over the {_mib(limit)} limit; split the file")


class Deadline:
    """Wall-time budget for one file, checked between pages, paragraphs and parser feeds."""

    def __init__(self, seconds: float = LOAD_SECONDS) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def check(self, what: str) -> None:
        if time.monotonic() > self._end:
            raise LimitExceeded(
                f"reading the {what} took over {self.seconds:g} s; split or simplify the file"
            )


def check_docx_archive(raw: bytes, deadline: Deadline | None = None) -> None:
    """Inspect a .docx's zip before python-docx loads it: sizes, ratios, and XML elements by streaming.

    python-docx reads every member into memory and parses each XML part into a tree, so all of that has to
    be bounded here, without inflating anything whole. Declared sizes can be trusted as upper bounds:
    zipfile never returns more than a member's declared size.
    """
    deadline = deadline or Deadline()
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
        members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ValueError(f"corrupt or unreadable .docx: {exc}") from exc
    if len(members) > MAX_DOCX_MEMBERS:
        raise LimitExceeded(f".docx has {len(members)} parts, over the {MAX_DOCX_MEMBERS} limit")
    total = sum(member.file_size for member in members)
    if total > MAX_DOCX_UNZIPPED_BYTES:
        raise LimitExceeded(f".docx unzips to {_mib(total)}, over the {_mib(MAX_DOCX_UNZIPPED_BYTES)} limit")
    for member in members:
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > _RATIO_FLOOR and ratio > MAX_ZIP_RATIO:
            raise LimitExceeded(
                f".docx part {member.filename} inflates {ratio:.0f}x (over {MAX_ZIP_RATIO}x): a zip bomb?"
            )
    elements = paragraphs = 0
    for member in members:
        if member.filename.endswith((".xml", ".rels")):
            with archive.open(member) as stream:
                counted, found = _count_elements(stream, MAX_DOCX_XML_ELEMENTS - elements, deadline)
            elements, paragraphs = elements + counted, paragraphs + found
            if paragraphs > MAX_DOCX_PARAGRAPHS:
                raise LimitExceeded(f".docx has over {MAX_DOCX_PARAGRAPHS} paragraphs; split the file")


_W_P = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}p"


def _count_elements(stream: IO[bytes], budget: int, deadline: Deadline) -> tuple[int, int]:
    """(elements, paragraphs) of one XML part, parsed as a stream that keeps nothing; stops at ``budget``."""
    from lxml import etree

    elements = paragraphs = 0
    parser = etree.iterparse(
        stream, events=("end",), resolve_entities=False, no_network=True, huge_tree=False
    )
    try:
        for _, element in parser:
            elements += 1
            paragraphs += element.tag == _W_P
            if elements > budget:
                raise LimitExceeded(f".docx has over {MAX_DOCX_XML_ELEMENTS} XML elements; split the file")
            if elements % 65536 == 0:
                deadline.check(".docx")
            element.clear()
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]  # finished siblings: the stream keeps nothing it has passed
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"corrupt or unreadable .docx: {exc}") from exc
    return elements, paragraphs


@contextmanager
def pdf_limits() -> Iterator[None]:
    """pypdf's own resource bounds, tightened to ours for the duration of one read."""
    from pypdf import apply_configuration

    stream = MAX_PDF_STREAM_BYTES
    with apply_configuration(
        maximum_declared_stream_length=stream,
        array_based_stream_maximum_output_length=stream,
        jbig2_maximum_output_length=stream,
        lzw_maximum_output_length=stream,
        run_length_maximum_output_length=stream,
        zlib_maximum_output_length=stream,
        brotli_maximum_output_length=stream,
        image_maximum_buffer_size=stream,
        stream_decoding_work_maximum_length=4 * stream,
        page_tree_maximum_entries=MAX_PDF_PAGES * 2,
    ):
        yield


def _mib(size: int) -> str:
    return f"{size / MiB:.1f} MiB"
