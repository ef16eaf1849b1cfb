"""Text measures shared by chunking, BM25 and token budgets (no model, no download)."""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
_PIECES = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def has_cjk(text: str) -> bool:
    return bool(_CJK.search(text))


_LATIN_WORD = re.compile(r"[A-Za-z]+")


def script_of(text: str) -> str:
    """"cjk" or "latin": the script most of ``text`` is written in (a CJK character against a Latin word,
    one each: "kb-agent ingest 的用法" is Chinese, a paragraph quoting one Chinese term is not)."""
    sample = text[:2000]
    return "cjk" if len(_CJK.findall(sample)) >= max(1, len(_LATIN_WORD.findall(sample))) else "latin"


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


# -- keyword analysis (BM25) ---------------------------------------------------------------------
# Queries and documents must go through the same analysis, so BM25 stores record ANALYZER_VERSION:
# bump it whenever the rules below change, and re-index (stored tokens would no longer meet queries).
ANALYZER_VERSION = "2"  # 2: a chunk's title, heading and file name are indexed with its text

_HAN_RUN = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)")  # what jieba segments
_WORD = re.compile(r"\d+(?:\.\d+)+|[^\W_]+")  # decimals ("2.5") stay whole; letters/digits otherwise
_CONTRACTION = re.compile(r"['’](?:s|t|d|ll|re|ve|m)\b")
_VOWEL = re.compile(r"[aeiouy]")


def _words(spaced: str) -> frozenset[str]:
    return frozenset(spaced.split())


ZH_STOP_WORDS = _words(
    "的 地 得 了 是 在 和 与 及 以及 或 或者 也 就 就是 都 而 而且 并且 着 过 吗 么 嘛 呢 吧 啊 呀 哦 嗯 "
    "我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个 这些 那些 这里 那里 哪里 哪个 "
    "哪些 一个 一些 一下 什么 怎么 怎样 怎么样 如何 为什么 为何 有 没有 请 请问 可以 能 能够 会 要 想 "
    "给 把 被 让 从 对 向 于 以 中 上 下 里 内 等 之 其 所 该 还 又 很 非常 比较 但 但是 如果 因为 所以 "
    "你好 您好 谢谢 感谢 麻烦"
)
EN_STOP_WORDS = _words(
    "the a an of to in on for and or not no nor is are was were be been being am it its this that these "
    "those with as at by from into about than then there here so if but all any some just also only "
    "what how which who whom whose why when where do does did doing done can could would should will "
    "shall may might must i you he she we they me my mine your yours his him her hers our ours us their "
    "them has have had having let please hello hi hey thanks thank tell don doesn didn isn aren wasn "
    "weren won couldn shouldn wouldn"
)
_STEM_KEEP = frozenset({"embed", "news", "series", "species"})

_jieba_lock = threading.Lock()
_jieba_cut: Callable[[str], list[str]] | None = None


def _segmenter() -> Callable[[str], list[str]]:
    """jieba's precise-mode cutter, initialised once and quietly (it loads a ~1 s dictionary)."""
    global _jieba_cut
    if _jieba_cut is None:
        with _jieba_lock:
            if _jieba_cut is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()  # offline: the dictionary ships with the package, cache goes to $TMPDIR
                _jieba_cut = functools.partial(jieba.lcut, cut_all=False, HMM=True)
    return _jieba_cut


def _has_vowel(base: str, min_len: int) -> bool:
    return len(base) >= min_len and bool(_VOWEL.search(base))


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Light Porter-style suffix stripping for lower-case ASCII words, so inflections meet in BM25.

    Guaranteed to conflate plurals, -ed/-ing (with e-drop and doubled consonants), -ies/-ied/-y,
    -ation/-ate and -val/-sal/-wal: index/indexes/indexed, retrieve/retrieval, query/queries,
    configure/configuration, validate/validation, run/running. Not a linguist's stemmer: stems may
    not be words, and a few unrelated words collide — acceptable for keyword recall.
    """
    if len(word) < 3 or not (word.isascii() and word.isalpha()) or word in _STEM_KEEP:
        return word
    w = word
    if w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif w.endswith("ies") and len(w) > 3:
        w = w[:-3] + "i"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w in _STEM_KEEP:
        return w
    if w.endswith("ied") and len(w) > 3:
        w = w[:-3] + "i"
    elif w.endswith(("ing", "ed")) and not w.endswith("eed"):
        base = w[:-3] if w.endswith("ing") else w[:-2]
        if _has_vowel(base, 2):
            w = base
            if w.endswith(("at", "iz", "bl")):
                w += "e"  # validat(ing) -> validate, so the -ate rule below still applies
            elif len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # running -> run, embedded -> embed
    elif w.endswith("ly") and _has_vowel(w[:-2], 5):
        w = w[:-2]
    for suffix in ("ation", "ate"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)], 4):
            w = w[: -len(suffix)]
            break
    else:
        if w.endswith(("val", "sal", "wal")) and _has_vowel(w[:-2], 4):
            w = w[:-2]  # retrieval -> retriev(e), proposal -> propos(e)
    if w.endswith("e") and len(w) >= 3:
        w = w[:-1]
    if len(w) > 2 and w.endswith("y") and w[-2] not in "aeiou":
        w = w[:-1] + "i"  # query/queries/queried all end in "queri"
    return w


REREAD_CHARS = 2_000  # a text at least this long is analysed once while it is among the last few


def tokenize(text: str) -> list[str]:
    """BM25 terms of ``text``: jieba words (precise mode, so no overlapping tokens inflate scores) for
    Chinese, lower-cased stemmed words and numbers for the rest, without stop words or punctuation.

    A turn reads its question in several places (keyword search, memory recall, the offline model's
    rules): a long one is segmented once and its terms reused, so pasting a page costs one pass."""
    if len(text) >= REREAD_CHARS:
        return list(_tokenize_long(text))
    return _tokenize(text)


@functools.lru_cache(maxsize=16)
def _tokenize_long(text: str) -> tuple[str, ...]:
    return tuple(_tokenize(text))


def _tokenize(text: str) -> list[str]:
    if not text or text.isspace():
        return []
    text = _CONTRACTION.sub("", unicodedata.normalize("NFKC", text).lower())  # full-width -> ASCII
    tokens: list[str] = []
    for i, piece in enumerate(_HAN_RUN.split(text)):
        if i % 2:  # odd pieces are the captured Han runs
            tokens.extend(word for word in _segmenter()(piece) if word not in ZH_STOP_WORDS)
        else:
            tokens.extend(stem(word) for word in _WORD.findall(piece) if word not in EN_STOP_WORDS)
    return tokens


def indexed_text(text: str, metadata: Mapping[str, Any]) -> str:
    """What BM25 indexes for a chunk: its document's title, its section heading and its file name, then its
    text. Headings are kept out of the chunk text (they are metadata), so without this a one-word query
    naming a document ("onboarding" for notes/onboarding.md, "# Onboarding") would find nothing."""
    source = str(metadata.get("source") or "")
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0] if source else ""
    heads = dict.fromkeys(str(h).strip() for h in (metadata.get("title"), metadata.get("section"), stem) if h)
    heads.pop("", None)
    return "\n".join([*heads, text]) if heads else text


@functools.cache
def term_set(words: str) -> frozenset[str]:
    """The terms of a fixed word list (stop words of one kind or another), tokenised once, on first use:
    the segmenter's dictionary takes ~0.8 s to load, which no import should pay."""
    return frozenset(tokenize(words))


def tokenize_many(texts: Iterable[str]) -> list[list[str]]:
    return [tokenize(text) for text in texts]


# -- what a search looks for ------------------------------------------------------------------------
QUERY_TOKENS = 96  # a question of several sentences fits; a pasted page does not
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;])|(?<=[.:：])\s+|\n+")
_CLOSERS = "\"'”’」』)）]】 \t"


def _asks(sentence: str) -> bool:
    return sentence.rstrip(_CLOSERS).endswith(("?", "？"))


def query_focus(text: str, budget: int = QUERY_TOKENS) -> str:
    """What a search looks for in ``text``: the text itself when it is the length of a question, else
    the sentences that ask (ending in "?"/"？"), the last first, within ``budget`` estimated tokens.

    A message longer than a question is mostly material the user pasted, with the question before or
    after it. Searching with all of it costs a full embedder window and a segmentation of the whole page
    per store, and the vector of a page is the page's topic rather than the question. Without a sentence
    that asks, the first sentence (an instruction before a paste) and the last ones are searched.
    """
    if len(text) <= 8 * budget and estimate_tokens(text) <= budget:  # a token is at most a few characters
        return text
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
    asking = [s for s in sentences if _asks(s)]
    chosen: list[str] = []
    left = budget
    if not asking and sentences and estimate_tokens(sentences[0]) <= budget // 2:
        chosen.append(sentences[0])
        left -= estimate_tokens(sentences[0])
        sentences = sentences[1:]
    tail: list[str] = []
    for sentence in reversed(asking or sentences):
        cost = estimate_tokens(sentence)
        if cost > left:
            if not tail and not chosen:  # one sentence longer than the budget: its end, where it asks
                tail.append(_last_tokens(sentence, left))
            break
        tail.append(sentence)
        left -= cost
    return " ".join([*chosen, *reversed(tail)]) or _last_tokens(text, budget)


def _last_tokens(text: str, budget: int) -> str:
    """The longest end of ``text`` within ``budget`` estimated tokens."""
    end = text[-4 * budget :]
    while end and estimate_tokens(end) > budget:
        end = end[max(1, len(end) // 8) :]
    return end.strip()
