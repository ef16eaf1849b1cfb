"""Text measures shared by chunking, BM25 and token budgets (no model, no download)."""

from __future__ import annotations

import functools
import math
import re

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


@functools.lru_cache(maxsize=4096)
def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` for a BPE tokenizer of the GPT/Qwen kind (cached: history repeats)."""
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    rest = _CJK.sub(" ", text)
    tokens = cjk
    for piece in _PIECES.findall(rest):
        if piece[0].isalpha():
            tokens += max(1, math.ceil(len(piece) / 4))
        elif piece[0].isdigit():
            tokens += math.ceil(len(piece) / 3)
        else:
            tokens += 1
    return tokens
