"""Turn files into titled sections of clean text, so chunking never deals with formats or encodings."""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from stores.knowledge.html_loader import html_sections
from stores.knowledge.load_limits import (
    MAX_DOCX_BYTES,
    MAX_HTML_BYTES,
    MAX_PDF_BYTES,
    MAX_TEXT_BYTES,
    LimitExceeded,
    check_size,
)

SUPPORTED = frozenset({".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx"})
STREAM_THRESHOLD = 8 * 1024 * 1024  # bytes: bigger .txt/.md files are streamed, never held whole
BLOCK = 1024 * 1024  # bytes per read when hashing, characters per read when streaming
SECTION_CHARS = 256 * 1024  # a longer section is cut at a paragraph break: bounds the splitter's memory
_SAMPLE = 8192  # bytes inspected for binary content
PLAIN_TITLE_CHARS = 200  # a longer first line is a paragraph, not a title
SENTENCE_ENDS = tuple("。！？；：，、,;:")
_BOMS: tuple[tuple[bytes, str], ...] = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"))
_BOMS += ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))  # after UTF-32 LE: same start
_NOT_CONTROL = bytes(b for b in range(256) if b >= 32 or b in b"\t\n\r\f\b\x1b")
_MARK = re.compile(r"^ {0,3}(?:#{1,3}(?:[ \t]|$)|`{3,}|~{3,}).*$", re.MULTILINE)  # heading or fence lines
_ATX = re.compile(r" {0,3}(#{1,3})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n(?:.*\n){0,100}?(?:\1|\.\.\.)[ \t]*(?:\n|\Z)")
_META_CHARSET = re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)


class DocumentError(ValueError):
    """Why a file was not ingested (empty, binary, corrupt, unsupported, unreadable)."""


@dataclass(frozen=True)
class Section:
    """One markdown heading / HTML h1-h3 / PDF page worth of text; ``heading`` is its path ("A > B")."""

    heading: str
    text: str


@dataclass(frozen=True)
class LoadedDocument:
    """A file ready to chunk; ``sections`` is a one-shot generator when the file is streamed.

    ``encoding`` is the codec the text was decoded with ("binary" for PDFs).
    """

    source: str
    title: str
    sections: list[Section] | Iterator[Section]
    encoding: str
    content_hash: str
    size: int


def discover(paths: Sequence[Path], unreadable: list[tuple[Path, str]] | None = None) -> list[tuple[Path, Path]]:
    """(file, root) pairs to ingest: named files as given, folders walked without hidden entries.
    A folder that cannot be listed is added to ``unreadable`` as (folder, why) instead of passing unseen."""
    found: dict[Path, tuple[Path, Path]] = {}
    for given in map(Path, paths):
        if given.is_file():
            pairs = [(given, given.parent)] if given.suffix.lower() in SUPPORTED else []
        elif given.is_dir():
            pairs = [(file, given) for file in _walk(given, unreadable)]
        else:
            raise FileNotFoundError(f"no such file or folder: {given}")
        for file, root in pairs:
            found.setdefault(file.absolute(), (file, root))
    return sorted(found.values(), key=lambda pair: pair[0].as_posix())


def _walk(root: Path, unreadable: list[tuple[Path, str]] | None = None) -> Iterator[Path]:
    def note(exc: OSError) -> None:
        if unreadable is not None:
            unreadable.append((Path(exc.filename or root), exc.strerror or str(exc)))

    for folder, dirs, files in os.walk(root, onerror=note):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        for name in files:  # "<file>.groups" sidecars fall out here: ".groups" is no supported suffix
            if not name.startswith(".") and Path(name).suffix.lower() in SUPPORTED:
                yield Path(folder) / name


def read_groups(path: Path, root: Path | None = None) -> list[str] | None:
    """Groups for ``path``: its "<file>.groups" beats the nearest folder ".groups" (up to ``root``)."""
    path = Path(path).absolute()
    stop = Path(root).absolute() if root is not None else None
    candidates = [path.with_name(path.name + ".groups")]
    for folder in path.parents:
        candidates.append(folder / ".groups")
        if folder == stop:
            break
    file = next((candidate for candidate in candidates if candidate.is_file()), None)
    if file is None:
        return None
    lines = file.read_text(encoding="utf-8-sig", errors="replace").splitlines()
    names = (
        name.strip()
        for line in lines
        if not line.lstrip().startswith("#")
        for name in re.split("[,，]", line)
    )
    return list(dict.fromkeys(name for name in names if name))


def shown_path(path: Path | str) -> str:
    """A path for a report line: bytes that are not UTF-8 appear as ``\\xff`` instead of breaking the print."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def load(path: Path, root: Path, max_bytes: int | None = None) -> LoadedDocument:
    """Read one file into sections; raise DocumentError saying why it cannot be ingested. ``max_bytes`` is
    the operator's per-file limit, checked before any of the file is read."""
    path, suffix = Path(path), Path(path).suffix.lower()
    if shown_path(path) != str(path):  # the name would become a chunk id, a manifest key, a citation
        raise DocumentError("the file's path is not valid UTF-8: rename it")
    if suffix not in SUPPORTED:
        kinds = ", ".join(sorted(SUPPORTED))
        raise DocumentError(f"unsupported file type {suffix or '(no suffix)'!r} (supported: {kinds})")
    try:
        source = path.absolute().relative_to(Path(root).absolute()).as_posix()
    except ValueError:
        source = path.name
    source = path.name if source in ("", ".") else source
    try:
        size = path.stat().st_size
        if size == 0:
            raise DocumentError("empty file")
        if max_bytes and size > max_bytes:
            raise DocumentError(
                f"{size / 1024 / 1024:.1f} MiB, over the {max_bytes / 1024 / 1024:g} MiB per-file limit "
                "(KB_AGENT_MAX_FILE_MB): split it, or raise the limit"
            )
        _check_size(suffix, size)
        if size > STREAM_THRESHOLD and suffix in {".txt", ".md", ".markdown"}:
            return _load_streamed(path, source, size, markdown=suffix != ".txt")
        raw = path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"cannot read file: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if suffix == ".pdf":
        return LoadedDocument(source, *_load_pdf(path, raw), "binary", digest, size)
    if suffix == ".docx":
        return LoadedDocument(source, *_load_docx(path, raw), "binary", digest, size)
    _check_text(raw[:_SAMPLE])
    html = suffix in {".html", ".htm"}
    match = _META_CHARSET.search(raw[:4096]) if html else None
    text, encoding = _decode(raw, match.group(1).decode("ascii") if match else None)
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    if not text.strip():
        raise DocumentError("empty file")
    if html:
        try:
            title, found = html_sections(text, path.stem, BLOCK)
        except LimitExceeded as exc:
            raise DocumentError(str(exc)) from exc
        sections = [Section(heading, body) for heading, raw in found if (body := _tidy(raw))]
    else:
        markdown = suffix != ".txt"
        title = (_markdown_title(text) if markdown else _plain_title(text)) or path.stem
        sections = list(_sections(_blocks(io.StringIO(text)), markdown))
    if not sections:
        raise DocumentError("no text content")
    return LoadedDocument(source, title, sections, encoding, digest, size)


def _check_size(suffix: str, size: int) -> None:
    """Refuse a file over its kind's byte bound (stores.knowledge.load_limits) before reading it."""
    kind, limit = {
        ".pdf": ("PDF", MAX_PDF_BYTES),
        ".docx": (".docx", MAX_DOCX_BYTES),
        ".html": ("HTML", MAX_HTML_BYTES),
        ".htm": ("HTML", MAX_HTML_BYTES),
    }.get(suffix, ("text file", MAX_TEXT_BYTES))
    try:
        check_size(kind, size, limit)
    except LimitExceeded as exc:
        raise DocumentError(str(exc)) from exc


def _check_text(head: bytes) -> None:
    """Reject binaries early: text has no NULs and almost no control bytes (UTF-16/32 carry a BOM)."""
    if not _bom(head) and (b"\x00" in head or len(head.translate(None, _NOT_CONTROL)) > 0.1 * len(head)):
        raise DocumentError("looks like a binary file, not text")


def _bom(head: bytes) -> str | None:
    return next((encoding for bom, encoding in _BOMS if head.startswith(bom)), None)


def _decode(raw: bytes, declared: str | None = None) -> tuple[str, str]:
    """BOM, then strict UTF-8, a declared charset, GB18030 (covers GBK), then charset-normalizer's guess."""
    bom = _bom(raw[:4])
    for encoding in [bom] if bom else ["utf-8", *([declared] if declared else []), "gb18030"]:
        try:
            return raw.decode(encoding), encoding
        except (UnicodeDecodeError, LookupError):
            continue
    guess = _guess(raw[:BLOCK])
    return raw.decode(guess, errors="replace"), guess


def _guess(sample: bytes) -> str:
    from charset_normalizer import from_bytes

    best = from_bytes(sample).best()
    if best is None:
        raise DocumentError("cannot detect the text encoding")
    return best.encoding


def _load_streamed(path: Path, source: str, size: int, *, markdown: bool) -> LoadedDocument:
    """A huge .txt/.md: hash and encoding in bounded passes, sections read lazily in blocks."""
    with path.open("rb") as fh:
        head = fh.read(BLOCK)
    _check_text(head[:_SAMPLE])
    bom = _bom(head)
    digest, valid = _scan(path, bom or "utf-8")
    encoding = bom or "utf-8"
    if not valid and not bom:
        encoding = "gb18030" if _scan(path, "gb18030")[1] else _guess(head)
    with path.open(encoding=encoding, errors="replace") as fh:
        text_head = fh.read(BLOCK)
    title = (_markdown_title(text_head) if markdown else _plain_title(text_head)) or path.stem
    return LoadedDocument(source, title, _stream_sections(path, encoding, markdown), encoding, digest, size)


def _scan(path: Path, encoding: str) -> tuple[str, bool]:
    """The file's sha256 and whether it strictly decodes as ``encoding``, one block at a time."""
    digest, decoder, valid = hashlib.sha256(), codecs.getincrementaldecoder(encoding)(), True
    with path.open("rb") as fh:
        while block := fh.read(BLOCK):
            digest.update(block)
            valid = valid and _decodes(decoder, block)
    return digest.hexdigest(), valid and _decodes(decoder, b"", final=True)


def _decodes(decoder: codecs.IncrementalDecoder, data: bytes, final: bool = False) -> bool:
    try:
        decoder.decode(data, final)
    except UnicodeDecodeError:
        return False
    return True


def _stream_sections(path: Path, encoding: str, markdown: bool) -> Iterator[Section]:
    # TextIOWrapper decodes incrementally (a codecs incremental decoder) and folds \r\n even across reads.
    try:
        with path.open(encoding=encoding, errors="replace", newline=None) as fh:
            yield from _sections(_blocks(fh), markdown)
    except OSError as exc:
        raise DocumentError(f"cannot read file: {exc.strerror or exc}") from exc


def _blocks(fh: IO[str]) -> Iterator[str]:
    """About BLOCK characters at a time, each ending at a line end (a longer line is cut)."""
    carry = ""
    while data := fh.read(BLOCK):
        data = carry + data
        cut = data.rfind("\n") + 1 or len(data)
        carry = data[cut:]
        yield data[:cut]
    if carry:
        yield carry


def _events(blocks: Iterable[str], markdown: bool) -> Iterator[tuple[int, str]]:
    """(level, heading) at #..### headings outside code fences, (0, text) for the text in between."""
    fence, first = "", True
    for block in blocks:
        if first and markdown and (front := _FRONT_MATTER.match(block)):
            block = block[front.end() :]
        first, start = False, 0
        for mark in _MARK.finditer(block) if markdown else ():
            line = mark.group(0).strip()
            if fence:
                fence = "" if line.startswith(fence) and not line.strip(fence[0]) else fence
            elif opener := _FENCE.match(mark.group(0)):
                fence = opener.group(1)
            elif heading := _ATX.fullmatch(mark.group(0)):
                yield 0, block[start : mark.start()]
                yield len(heading.group(1)), (heading.group(2) or "").strip()
                start = mark.end() + 1
        yield 0, block[start:]


def _sections(blocks: Iterable[str], markdown: bool) -> Iterator[Section]:
    """Sections cut at headings, and at a blank line every SECTION_CHARS characters (bounded memory)."""
    stack: list[tuple[int, str]] = []
    pending = ""
    for level, text in _events(blocks, markdown):
        if level:
            if body := _tidy(pending):
                yield Section(_heading_path(stack), body)
            pending = ""
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, text))
            continue
        pending += text
        while len(pending) >= SECTION_CHARS:  # cut at the last paragraph (else line) break before the limit
            limit = SECTION_CHARS
            cut = pending.rfind("\n\n", 0, limit) + 1 or pending.rfind("\n", 0, limit) + 1 or limit
            if body := _tidy(pending[:cut]):
                yield Section(_heading_path(stack), body)
            pending = pending[cut:]
    if body := _tidy(pending):
        yield Section(_heading_path(stack), body)


def _plain_title(text: str) -> str | None:
    """A plain-text file's title: its first paragraph when that is one short line and text follows it,
    the layout of papers, articles and notes saved as text (the file name is the fallback). A line that
    ends like a Chinese sentence or a clause ("。", "：", ",") is the text's first sentence, not its title."""
    head, blank, rest = text.lstrip("\ufeff \t\n").partition("\n\n")
    head = head.strip()
    if not blank or not rest.strip() or "\n" in head or len(head) > PLAIN_TITLE_CHARS:
        return None
    return None if head.endswith(SENTENCE_ENDS) else head


def _markdown_title(text: str) -> str | None:
    events = _events([text], markdown=True)
    return next((name for level, name in events if level == 1 and name), None)


def _tidy(text: str) -> str:
    """No trailing blanks, at most one empty line in a row (the regexes only run when needed: 3x faster)."""
    if " \n" in text or "\t\n" in text:
        text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip() if "\n\n\n" in text else text.strip()


def _heading_path(stack: list[tuple[int, str]]) -> str:
    return " > ".join(name for _, name in stack if name)


def _load_docx(path: Path, raw: bytes) -> tuple[str, list[Section]]:
    from stores.knowledge.docx_loader import docx_sections

    try:
        title, found = docx_sections(raw, path.stem)
    except ValueError as exc:
        raise DocumentError(" ".join(str(exc).split())) from exc
    sections = [Section(heading, _tidy(text)) for heading, text in found if text.strip()]
    if not sections:
        raise DocumentError(".docx has no text")
    return title, sections


def _load_pdf(path: Path, raw: bytes) -> tuple[str, list[Section]]:
    """(title, one section per page headed "p.N"); pages without text are dropped."""
    from stores.knowledge.pdf_loader import pdf_pages

    try:
        title, pages = pdf_pages(raw)
    except ValueError as exc:
        raise DocumentError(" ".join(str(exc).split())) from exc
    sections = [Section(heading, text) for heading, page in pages if (text := _tidy(page))]
    if not sections:
        raise DocumentError("PDF has no extractable text (scanned?)")
    return title or path.stem, sections
