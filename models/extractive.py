"""What the offline model says about passages: quotes with citations, never invented text.

Used for knowledge answers and for ``generate_summary`` when no endpoint is configured; every sentence it
writes is copied from a passage and carries that passage's ``[id]``.

How a quote is framed is decided in one place, :func:`answer_from_passages`: passages that came back are
always quoted, never hidden behind "nothing found" (the retriever may have found the answer in words the
question does not use, or in the other language). Only a passage in the question's language that holds
most of the question's subject words is quoted as *the* answer ("根据知识库…"); any other is quoted as the
closest passage found, which may not answer the question, and one in the other language says so.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from stores.text_analysis import ZH_STOP_WORDS, estimate_tokens, has_cjk, script_of, term_set, tokenize

QUOTE_TOKENS = 250  # the most quoted from one passage (estimated tokens: fair to Chinese and English alike)
QUOTE_SENTENCES = 4  # the most sentences quoted from one passage
SENTENCE_TOKENS = 120  # a longer sentence is quoted around its matching clauses
MIN_QUOTE_TOKENS = 24  # no sentence is squeezed into less room than this
# A sentence matching less than this share of the best one's match adds words, not the answer.
MATCH_SHARE = 0.2
CLOSEST_PASSAGES = 2  # passages quoted when none is shown to answer the question
SUMMARY_TOKENS = 80  # what a summary quotes from each passage
_BRIEF = {"limit": 2, "budget": SENTENCE_TOKENS}  # a passage quoted beside the best one
# A passage answers the question, as far as words can show, when it holds this share of its subject words.
SUPPORT_SHARE = 2 / 3
# The words that frame a question rather than name its subject ("what does X mean", "X 是什么意思").
_FRAME_WORDS = (
    "know want need like thing things stuff something anything everything question ask help explain describe "
    "show give list tell mean meaning name called work works use used way ways kind sort lot many much "
    "ok okay yes yeah sure fine great cool good nice thank please sorry "
    "now next then go going keep continue more again else further later "
    "think believe feel opinion reckon suppose guess consider suggest recommend "
    "怎么办 应该 应当 需要 做 干 办 知道 了解 想 问 问题 东西 事 事情 情况 一下 帮 帮忙 告诉 说 讲 介绍 解释 说明 "
    "谁 叫 名字 意思 哪儿 多 大概 一般 通常 具体 好 好的 行 对 是的 嗯嗯 哈哈 收到 明白 谢谢 不用 "
    "现在 接下来 然后 之后 下一步 继续 再 还有 别的 其他 干嘛 干什么 觉得 认为 看法 意见 "
)
# A full stop ends a sentence, except after an initial ("John C. Messenger"), a list number ("1.") or a
# common abbreviation; a semicolon does not (it joins clauses of one sentence).
_SENTENCE_END = re.compile(
    r"(?<=[。！？!?])|(?<=[.])(?<!\s[A-Z]\.)(?<![A-Z]\.[A-Z]\.)(?<!^\d\.)(?<!^\d\d\.)(?<!e\.g\.)(?<!i\.e\.)(?<!\bvs\.)(?<!\bMr\.)"
    r"(?<!\bDr\.)(?<!\bSt\.)(?<!\bNo\.)(?<!\bMs\.)(?<!\bMrs\.)(?<!\bJr\.)\s+|\n+",
    re.M,
)
# A line break inside a paragraph is wrapping, not a sentence end: the next line continues the sentence
# unless it starts a list item, a heading, a table row or a code fence.
_WRAPPED = re.compile(r"(?<=\S)[ \t]*\n(?![ \t]*(?:[-*+>#|]|\d+[.)]\s|```|\n))[ \t]*")
_CLAUSE_END = re.compile(r"(?<=[，,、；;：:])")


def topic_terms(text: str) -> list[str]:
    """The words of ``text`` that name its subject (keyword terms without question and framing words),
    distinct, in order."""
    frame = term_set(_FRAME_WORDS)
    return list(dict.fromkeys(t for t in tokenize(text) if t not in frame and not _function_chars(t, frame)))


def _function_chars(term: str, frame: frozenset[str]) -> bool:
    """A Chinese word the segmenter glued from function characters ("我该" of "我该怎么办")."""
    return has_cjk(term) and all(ch in ZH_STOP_WORDS or ch in frame for ch in term)


def heading_terms(passage: Mapping[str, Any]) -> set[str]:
    """The terms of a passage's heading: document title, section and file name."""
    source = str(passage.get("source") or str(passage.get("id") or "").rsplit("#", 1)[0])
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0].replace("-", " ").replace("_", " ")
    heads = [str(passage.get(key) or "") for key in ("heading", "title", "section")]
    return set(tokenize(" ".join([*heads, stem])))


def passage_words(passage: Mapping[str, Any]) -> str:
    """What a passage says for judging support: its heading (document title, section) and its text, as
    the keyword index reads it; the quote is taken from the text alone."""
    heads = [str(passage.get(key) or "") for key in ("heading", "title", "section")]
    return " ".join([*filter(None, heads), str(passage.get("text", ""))])


def sentences(text: str) -> list[str]:
    """Sentences of a passage, Chinese or English punctuation."""
    joined = _WRAPPED.sub(_join_lines, text)
    return [p.strip() for p in _SENTENCE_END.split(joined) if p and p.strip()]


def _join_lines(match: re.Match[str]) -> str:
    """Wrapped lines joined: Chinese runs on without a space, other text with one."""
    text, start, end = match.string, match.start(), match.end()
    cjk = start > 0 and end < len(text) and has_cjk(text[start - 1]) and has_cjk(text[end])
    return "" if cjk else " "


def _weights(wanted: list[str], found: list[dict[str, float]]) -> dict[str, float]:
    """A question term's weight: rarer among the passage's sentences, more telling (a word in every
    sentence picks none of them)."""
    n = len(found)
    return {t: math.log(1 + n / (1 + sum(t in f for f in found))) for t in wanted}


def _found(wanted: list[str], part: str, bag: set[str]) -> dict[str, float]:
    """How much of each question term a sentence has: 1 for the term itself; for a Chinese word the
    segmenter cut differently ("翻译者" against "翻译", "英语中"), the share of its character pairs the
    sentence holds, when that is at least half."""
    found = {}
    for term in wanted:
        if term in bag:
            found[term] = 1.0
        elif len(term) >= 2 and has_cjk(term):
            pairs = {term[i : i + 2] for i in range(len(term) - 1)}
            share = sum(pair in part for pair in pairs) / len(pairs)
            if share >= 0.5:
                found[term] = share
    return found


# What kind of thing a question asks for, and how a sentence that states one looks: a question for a
# number is answered by a sentence with a number in it, one for a time by a sentence with a date.
_ASKS_NUMBER = re.compile(r"how (?:many|much|long|old|far|big|large)|多少|几|多大|多长|多久|多远|多高", re.I)
_ASKS_TIME = re.compile(
    r"\bwhen\b|what (?:year|date|day|month|time|century)|什么时候|何时|哪一?年|哪天|几月|几号", re.I
)
_ASKS_NAME = re.compile(
    r"\bwho(?:m|se)?\b|\bwhich (?:person|man|woman|player|team|company|city|country)\b|谁", re.I
)
_NUMBER = re.compile(
    r"\d|[一二三四五六七八九十百千万亿两]+(?:个|次|年|天|人|种|位|名|所|家|座|条|项|件|只|倍|成|岁|本|部|届|%)|"
    r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|half|dozen)\b",
    re.I,
)
_TIME = re.compile(
    r"\b1\d{3}\b|\b20\d{2}\b|\d+\s*(?:年|月|日|世纪)|\b(?:january|february|march|april|may|june|july|august|"
    r"september|october|november|december|century|centuries|\d+s)\b",
    re.I,
)
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+")
ANSWER_KIND_BONUS = 1.0


def _answer_kind(question: str) -> re.Pattern[str] | None:
    """How a sentence holding the kind of answer the question asks for looks, when the question says."""
    if _ASKS_TIME.search(question):
        return _TIME
    if _ASKS_NUMBER.search(question):
        return _NUMBER
    if _ASKS_NAME.search(question) and not has_cjk(question):
        return _NAME
    return None


def _scores(question: str, parts: list[str]) -> list[float]:
    """How well each sentence matches the question: its question terms by weight, pairs of question terms
    it has side by side ("hybrid search", "线程 存在") once more, and a bonus when it holds the kind of
    thing the question asks for (a number, a date, a name) beyond what the question itself says."""
    wanted = topic_terms(question) or list(dict.fromkeys(tokenize(question)))
    tokens = [tokenize(part) for part in parts]
    found = [_found(wanted, part, set(toks)) for part, toks in zip(parts, tokens, strict=True)]
    weight = _weights(wanted, found)
    pairs = set(itertools.pairwise(wanted))
    kind = _answer_kind(question)
    given = set(kind.findall(question)) if kind is not None else set()
    scores = []
    for part, toks, has in zip(parts, tokens, found, strict=True):
        score = sum(weight[t] * share for t, share in has.items())
        score += 0.5 * sum(1 for pair in itertools.pairwise(toks) if pair in pairs)
        if kind is not None and score > 0 and set(kind.findall(part)) - given:
            score += ANSWER_KIND_BONUS
        scores.append(score)
    return _carried(parts, scores)


# A sentence that opens by pointing back ("These devices…", "As such, it…", "他…", "该…") or by going on from the
# one before ("First the crew…", "For instance P ⊆ NP…", "首先…", "例如…"), or that names "these devices",
# continues it: the two share a subject, so each gets part of the other's match.
_POINTS_BACK = re.compile(
    r"^\W*(?:(?:as such|in (?:this|that) way|thus|therefore|however|also|then|during (?:this|that)|because of this)"
    r"\W+)?(?:this|these|that|those|it|its|they|their|them|he|his|she|her|such|the latter|the former|both)\b|"
    r"^\W*(?:first|firstly|second|secondly|then|next|finally|afterwards|later|for (?:instance|example)|e\.g\.|"
    r"specifically|in particular|namely|as a result)\b|"
    r"^\W*(?:这|那|该|其|此|他|她|它|后者|前者|因此|所以|同时|此外|首先|其次|然后|接着|随后|最后|例如|比如|譬如|具体|即|也就是)|"
    r"\b(?:these|those|such) \w+|这些|那些|这种|此类",  # "…are treated using these devices"
    re.I,
)
CARRIED_SHARE = 0.5


def _carried(parts: list[str], scores: list[float]) -> list[float]:
    """Scores with a share of a neighbour's added where a sentence points back at the one before it."""
    carried = list(scores)
    for i in range(1, len(parts)):
        if _POINTS_BACK.search(parts[i]):
            carried[i] += CARRIED_SHARE * scores[i - 1]
            carried[i - 1] += CARRIED_SHARE * scores[i]
    return carried


def _cut(text: str, tokens: int) -> str:
    """The longest start of ``text`` within ``tokens``, ending at a word boundary where there is one."""
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix that fits, by bisection (token estimates grow with length)
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if estimate_tokens(text[:mid]) <= tokens else (lo, mid - 1)
    cut = text[:lo]
    space = cut.rfind(" ")
    return cut[:space] if space > len(cut) // 2 and lo < len(text) and not has_cjk(text[lo - 1 : lo + 1]) else cut


def _shortened(question: str, sentence: str, limit: int) -> str:
    """A sentence longer than ``limit`` tokens: its clauses around the one that matches the question best,
    whole clauses only, marked with "…" where it was cut."""
    clauses = [c for c in _CLAUSE_END.split(sentence) if c]
    if len(clauses) < 2:
        return _cut(sentence, limit) + "…"
    scores = _scores(question, clauses)
    best = max(range(len(clauses)), key=lambda i: (scores[i], -i))
    lo = hi = best
    size = estimate_tokens(clauses[best])
    while True:  # grow towards the side whose next clause matches better, while it fits
        options = [
            i
            for i in (lo - 1, hi + 1)
            if 0 <= i < len(clauses) and size + estimate_tokens(clauses[i]) <= limit
        ]
        if not options:
            break
        pick = max(options, key=lambda i: (scores[i], -abs(i - best), i < best))
        size += estimate_tokens(clauses[pick])
        lo, hi = min(lo, pick), max(hi, pick)
    text = "".join(clauses[lo : hi + 1]).strip()
    whole = estimate_tokens(text) <= limit
    text = text if whole else _cut(text, limit)
    return ("…" if lo > 0 else "") + text + ("…" if hi < len(clauses) - 1 or not whole else "")


def best_sentences(
    question: str, text: str, limit: int = QUOTE_SENTENCES, budget: int = QUOTE_TOKENS
) -> list[str]:
    """The sentences that match the question best, in their original order: the best one always (a long
    one around its matching clauses), then the next best while they match at least ``MATCH_SHARE`` as well
    and fit ``budget`` tokens, at most ``limit`` in all. The answer is often a sentence or two away from
    the words of the question, so a quote is several sentences, not one. With nothing matching (another
    language), the passage's opening sentences."""
    parts = sentences(text)
    if not parts:
        return []
    scores = _scores(question, parts)
    order = sorted(range(len(parts)), key=lambda i: (-scores[i], i))
    top = scores[order[0]]
    if top <= 0:
        order = list(range(len(parts)))  # no word in common: the passage's own opening
    first = order[0]
    cap = min(budget, SENTENCE_TOKENS)
    chosen = {first: parts[first] if estimate_tokens(parts[first]) <= cap else _shortened(question, parts[first], cap)}
    used = estimate_tokens(chosen[first])
    for i in order[1:]:
        if len(chosen) >= limit or scores[i] < MATCH_SHARE * top:
            break
        room = min(budget - used, SENTENCE_TOKENS)
        quote = parts[i] if estimate_tokens(parts[i]) <= room else _shortened(question, parts[i], room)
        if room >= MIN_QUOTE_TOKENS:
            chosen[i] = quote
            used += estimate_tokens(quote)
    return [chosen[i] for i in sorted(chosen)]


def relevance(question: str, text: str) -> float:
    """The share of the question's subject words the text contains (0 when the question has none)."""
    wanted = set(topic_terms(question))
    return len(wanted & set(tokenize(text))) / len(wanted) if wanted else 0.0


def answers_it(question: str, passage: Mapping[str, Any]) -> bool:
    """Whether ``passage`` can be quoted as the answer: it holds most of the question's subject words, or
    all of them when it is in the other language (where only names and terms both scripts share can
    match: a word left unchecked is no support). Anything else the retriever ranked is only the closest
    passage found."""
    same_language = script_of(str(passage.get("text", ""))) == script_of(question)
    share = relevance(question, passage_words(passage))
    return share >= (SUPPORT_SHARE if same_language else 1.0)


def _quote(question: str, passage: Mapping[str, Any], **limits: int) -> str:
    return " ".join(best_sentences(question, str(passage.get("text", "")), **limits))


def _language_note(question: str, passage: Mapping[str, Any], zh: bool) -> str:
    """"（英文资料）" before a quote in the other language than the question's, quoted as it is."""
    theirs = script_of(str(passage.get("text", "")))
    if theirs == script_of(question):
        return ""
    if zh:
        return "（英文资料）" if theirs == "latin" else "（中文资料）"
    return "(in Chinese) " if theirs == "cjk" else "(in English) "


def answer_from_passages(question: str, passages: Sequence[Mapping[str, Any]]) -> str:
    """The answer from retrieved ``passages`` (best first), each quote with its citation.

    The best passage is quoted as the answer when :func:`answers_it`, with a second one if it adds
    something; otherwise the closest passages are quoted and said to be the closest, which may not answer
    the question. "Nothing found" is said only when no passage came back.
    """
    zh = has_cjk(question)
    if not passages:
        return nothing_found(zh)
    best = passages[0]
    if answers_it(question, best):
        quote = _language_note(question, best, zh) + _quote(question, best)
        lines = [f"根据知识库：{quote} [{best.get('id')}]" if zh else f"From the knowledge base: {quote} [{best.get('id')}]"]
        if len(passages) > 1 and answers_it(question, passages[1]):  # "see also" is part of the answer too
            extra = passages[1]
            more = _quote(question, extra, limit=1)
            if more and more not in quote:
                more = _language_note(question, extra, zh) + more
                lines.append(f"另见：{more} [{extra.get('id')}]" if zh else f"See also: {more} [{extra.get('id')}]")
        return "\n".join(lines)
    head = (
        "知识库中找到的最接近的资料如下，不一定回答了这个问题："
        if zh
        else "The closest passages found in the knowledge base (they may not answer the question):"
    )
    items = [  # the best passage quoted as fully as an answer would be, the next ones briefly
        f"- {_language_note(question, p, zh)}{_quote(question, p, **({} if n == 0 else _BRIEF))} [{p.get('id')}]"
        for n, p in enumerate(passages[:CLOSEST_PASSAGES])
    ]
    return "\n".join([head, *items])


def nothing_found(zh: bool) -> str:
    """What a search that returned no passage found: nothing (said only after such a search)."""
    if zh:
        return "知识库中没有找到与这个问题相关的资料（检索没有返回任何片段）。"
    return "The knowledge base has nothing on this: the search returned no passages."


def summary_head(topic: str, count: int, zh: bool, *, about: bool = True) -> str:
    """The first line of an extractive summary, in the reader's language; ``about`` False when no passage
    holds the topic's words (they are the closest found, not passages about it)."""
    if not about:
        if zh:
            return f"知识库中与「{topic}」最接近的 {count} 段资料（不一定与它有关）要点："
        return f"The {count} passage{'s' if count != 1 else ''} closest to '{topic}' (they may not be about it):"
    if zh:
        return f"关于「{topic}」，知识库中的 {count} 段资料要点："
    return f"What {count} passage{'s say' if count != 1 else ' says'} about '{topic}':"


def extractive_summary(topic: str, passages: Sequence[Mapping[str, Any]]) -> str:
    """A bullet summary of ``passages`` about ``topic``: one or two quoted sentences each, cited."""
    zh = has_cjk(topic) or any(has_cjk(str(p.get("text", ""))) for p in passages[:1])
    head = summary_head(topic, len(passages), zh, about=any(answers_it(topic, p) for p in passages))
    bullets = [
        f"- {' '.join(best_sentences(topic, str(p.get('text', '')), limit=2, budget=SUMMARY_TOKENS))} [{p.get('id')}]"
        for p in passages
    ]
    return "\n".join([head, *bullets])
