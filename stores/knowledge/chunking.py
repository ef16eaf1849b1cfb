"""Split loaded documents into retrieval chunks with ids that stay put across re-ingests."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_text_splitters import RecursiveCharacterTextSplitter

from stores.knowledge.documents import LoadedDocument
from stores.text_analysis import _CJK, estimate_tokens

# Coarse to fine, as regexes so that marks of one rank share a level: paragraphs, lines, sentence ends
# (Chinese 。！？ and English ". ", "! ", "? "), clause marks, commas, words, characters. With
# separate levels a piece holding "！" but no "。" is split apart from its neighbours and chunks come
# out a fraction of max_tokens.
SEPARATORS = ["\n\n", "\n", "[。！？]|[.!?] ", "；|; ", "，|, ", " ", ""]


_CHUNK_ID = re.compile(r"(.*)#\d+", re.DOTALL)


def chunk_id(source: str, position: int) -> str:
    """A chunk's stable id, ``source#n``; the source may itself hold '#' (``a#1.txt#0``)."""
    return f"{source}#{position}"


def source_of_chunk(chunk: str) -> str:
    """The source of ``source#n`` (split at the last '#' followed only by digits); other text unchanged."""
    match = _CHUNK_ID.fullmatch(chunk)
    return match.group(1) if match else chunk


@dataclass(frozen=True)
class Chunk:
    """One passage to embed; ``id`` is "<source>#<n>", ``hash`` tells whether its text changed."""

    id: str
    text: str
    hash: str
    metadata: dict[str, Any]

    @property
    def passage(self) -> str:
        """What the vector side embeds: the chunk under its document's title and section heading."""
        return passage_text(self.text, self.metadata)


def context_heads(text: str, metadata: Any) -> list[str]:
    """The title and section heading a chunk sits under, each once, without one its text begins with.

    A split document's later chunks never name their subject (a paper's results, the steps under
    "Installing"); carried with them, the heads keep those chunks near a question that names it.
    """
    title = str(metadata.get("title") or "").strip()
    section = str(metadata.get("section") or "").strip()
    heads = [title] if title and not section.startswith(title) else []
    heads += [section] if section else []
    return [h for h in heads if not text.startswith(h)]


def passage_text(text: str, metadata: Any) -> str:
    """A chunk's text under its context heads (see ``context_heads``): what is embedded and hashed."""
    heads = context_heads(text, metadata)
    return "\n".join([*heads, text]) if heads else text


def chunk_document(
    doc: LoadedDocument, groups: Sequence[str], *, max_tokens: int = 320, overlap_tokens: int = 40
) -> Iterator[Chunk]:
    """Chunks of at most ``max_tokens`` (estimate_tokens) per section, numbered in document order.

    Sections are split independently so a chunk never mixes two headings or pages, and an edit only
    moves the chunks from the edited one on. The title and heading every chunk is embedded under count
    against ``max_tokens`` (the embedder's window). A piece that is only the heads (a title line split off
    its text) is not a chunk of its own when the section has others: each of them carries it. Lazy: on a
    streamed document memory stays at one section.
    """
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(f"need 0 <= overlap_tokens < max_tokens, got {overlap_tokens} and {max_tokens}")
    # The splitter measures every piece twice and estimate_tokens' LRU is too small for a whole section.
    measure = functools.lru_cache(maxsize=None)(_measure)
    group_list = ",".join(dict.fromkeys(name.strip() for name in groups if name.strip()))
    position = 0
    for section in doc.sections:
        measure.cache_clear()  # one section's pieces at a time
        metadata = {"source": doc.source, "title": doc.title, "section": section.heading}
        heads = context_heads("", metadata)
        budget = max(max_tokens - measure("\n".join(heads)), max_tokens // 2, overlap_tokens + 1)
        splitter = RecursiveCharacterTextSplitter(
            separators=SEPARATORS,
            is_separator_regex=True,
            keep_separator="end",  # punctuation stays with the sentence it ends; chunks start on a fresh one
            chunk_size=budget,
            chunk_overlap=overlap_tokens,
            length_function=measure,
            strip_whitespace=True,
        )
        pieces = [text for piece in splitter.split_text(section.text) if (text := piece.strip())]
        if len(pieces) > 1:
            pieces = [text for text in pieces if text not in heads] or pieces
        for text in pieces:
            chunk_meta = {**metadata, "position": position, "groups": group_list}
            yield Chunk(
                id=chunk_id(doc.source, position),
                text=text,
                hash=hashlib.sha256(passage_text(text, chunk_meta).encode("utf-8")).hexdigest()[:16],
                metadata=chunk_meta,
            )
            position += 1


class _Kinds(dict[int, str]):
    """str.translate table folding each non-CJK character to its estimate_tokens class, filled lazily."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        kind = next((kind for kind, pattern in _CLASSES if pattern.match(char)), ".")
        self[code] = kind
        return kind


# In estimate_tokens' order: ASCII letter run (ceil(n/4) tokens), digit run (ceil(n/3)), space (0), other (1).
_CLASSES = tuple(
    (kind, re.compile(pattern)) for kind, pattern in (("a", "[A-Za-z]"), ("0", r"\d"), (" ", r"\s"))
)
_KINDS = _Kinds()
_CJK_RUN = re.compile(f"{_CJK.pattern}+")


def _count_tokens(text: str) -> int:
    """estimate_tokens computed with C-speed string operations: 3-10x faster, which a 50 MB file needs.

    CJK characters are 1 token each and, as in estimate_tokens, separate what surrounds them. A run of
    n letters costs ceil(n/4): replace each full block of 4 by "b", then each 1-3 letter rest by one
    "a", and count both (digits likewise in blocks of 3). Any other non-space character is 1 token.
    """
    cjk = 0
    if not text.isascii():  # O(1) check; whole CJK runs become one space: few allocations
        spaced, runs = _CJK_RUN.subn(" ", text)
        text, cjk = spaced, len(text) - len(spaced) + runs
    kinds = text.translate(_KINDS)
    tokens = cjk + kinds.count(".")
    if "a" in kinds:
        letters = kinds.replace("aaaa", "b")
        tokens += letters.count("b") + letters.replace("aaa", "a").replace("aa", "a").count("a")
    if "0" in kinds:
        digits = kinds.replace("000", "d")
        tokens += digits.count("d") + digits.replace("00", "0").count("0")
    return tokens


_PROBES = (
    "",
    "Hello, world! 12345 abcdefghi",
    "第1章 安装。１２３　ok",
    "x=42; é\u0301² ٣٣٣٣ 가나 ﹐",
    "aaaa 0000 a0a0",
)
# Use the fast count only while it agrees with estimate_tokens, which its owner may refine later.
_measure: Callable[[str], int] = (
    _count_tokens if all(_count_tokens(p) == estimate_tokens(p) for p in _PROBES) else estimate_tokens
)
