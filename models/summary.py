"""The offline running summary: deterministic and extractive, with the same rules as the model prompt.

Why extractive: with no model there is nobody to paraphrase, and copying is what keeps the rules
checkable. Every line is cut from a message (or an older summary line), sorted into 已讨论 / 已决定 /
已完成 (discussed / decided / done); numbers, paths, ids and error codes are copied verbatim (a clipped
sentence gets its cut-off ones appended); a later value for the same key either replaces the old one
(the user said it changed) or marks both "待确认 / to confirm". When the summary outgrows its limit the
least useful lines go first: plain discussion, then tool results, then decisions and facts, conflicts last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from models.tokens import estimate_tokens, has_cjk

SECTIONS = ("discussed", "decided", "done")
HEADINGS = {
    "zh": {"discussed": "已讨论", "decided": "已决定", "done": "已完成"},
    "en": {"discussed": "Discussed", "decided": "Decided", "done": "Done"},
}
_HEADING = re.compile(
    r"^[#*\s]*(已讨论|已决定|已完成|讨论过|discussed|decided|done)[*\s]*[:：]?[*\s]*$", re.IGNORECASE
)
_HEADING_SECTION = {
    "已讨论": 0,
    "讨论过": 0,
    "discussed": 0,
    "已决定": 1,
    "decided": 1,
    "已完成": 2,
    "done": 2,
}
NONE_ITEM = {"zh": "（无）", "en": "(none)"}
ITEM_CHARS = 100
RESULT_CHARS = 120
MAX_APPENDED = 8
MAX_CONFLICT_VALUES = 4
PROTECTED_PER_SECTION = 2

# Numbers (with units/decimals/thousands), paths, URLs, ids, versions and error codes: kept verbatim.
VERBATIM = re.compile(
    r"https?://[^\s，。；、）)\]]+"
    r"|(?:[A-Za-z]:\\|~/|\.{1,2}/|/)[\w.\-/\\]+"
    r"|\b[\w\-]+(?:/[\w.\-]+)+"
    r"|\b[\w\-]+\.(?:py|js|ts|java|go|rs|md|txt|json|ya?ml|toml|ini|conf|cfg|log|csv|sql|sh|html?|pdf|docx?)\b"
    r"|\b0x[0-9A-Fa-f]+\b"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?:-[0-9a-f]{4,})*\b"
    r"|\bv?\d+(?:[.,:\-]\d+)*%?"
    r"|\b[A-Za-z]\w*?[-_]?\d[\w\-]*\b"
    r"|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b"
)
_SENTENCE = re.compile(r"(?<=[。！？!?；;])|(?<=\.)\s+|\n+")
_DECIDED = re.compile(
    r"决定|决策|确定(?:了|用|采用|为)|定下|敲定|拍板|就用|采用|选定|选用|最终方案|同意"
    r"|\bdecided?\b|\bdecision\b|\bagreed\b|\bsettled on\b|\bwe(?:'ll| will) (?:use|go with)\b|\blet'?s (?:use|go with)\b",
    re.IGNORECASE,
)
_DONE = re.compile(
    r"已完成|完成了|做完|搞定|已修复|修复了|已上线|上线了|已部署|部署了|已提交|已合并|合并了"
    r"|\b(?:done|finished|completed|fixed|deployed|merged|shipped|resolved)\b",
    re.IGNORECASE,
)
_UPDATE = re.compile(
    r"改为|改成|改到|换成|更新为|调整为|更正|纠正|不是.{0,20}而是|以此为准|现在是"
    r"|\bchanged? to\b|\bupdated?\b|\bnow\b|\bactually\b|\binstead\b|\bcorrection\b|\bno longer\b",
    re.IGNORECASE,
)
_ZH_FACT = re.compile(
    r"(?P<key>[A-Za-z0-9_\u4e00-\u9fff]{2,20}?)\s*(?:改为|改成|换成|更新为|调整为|设置为|设为|定为|是|为|=|：|:)\s*"
    r"(?P<value>[^\s，,。；;！!？?、）)]+)"
)
_EN_FACT = re.compile(
    r"\b(?P<key>[A-Za-z][A-Za-z0-9_\- ]{1,40}?)(?:\s*[:=]\s*|\s+(?:is now|is|are|was|set to|changed to|should be)\s+)"
    r"(?P<value>[^\s,;!?]+)",
    re.IGNORECASE,
)
_KEY_FILLER = re.compile(
    r"^(?:我们的|我的|你的|我们|咱们|我|你|请|把|将|决定|确定|现在|那么|另外|还有|用户说|其实|实际上|更正|这个|那个|"
    r"the|my|our|your|actually|now|so|and|also|we|i|decided|that|correction)\s*",
    re.IGNORECASE,
)
_FACT_LINE = re.compile(r"^(事实|Fact|待确认|To confirm)\s*[:：]\s*(.+?) = (.+)$", re.IGNORECASE)
_PREVIOUS = re.compile(r"\s*(?:（原为 (.+?)，用户已更新）|\(was (.+?), updated by the user\))$")
_CONFLICT_NOTE = re.compile(r"\s*(?:（前后说法不一致）|\(conflicting statements\))$")


def verbatim_tokens(text: str) -> list[str]:
    """The tokens a summary must copy exactly (numbers, paths, ids, codes), in order, without repeats."""
    return list(dict.fromkeys(m.group(0).rstrip(".,") for m in VERBATIM.finditer(text)))


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    """Collapse whitespace and shorten, appending any verbatim token the cut removed."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit] + "…"
    missing = [t for t in verbatim_tokens(text) if t not in cut][:MAX_APPENDED]
    return cut + (f" [{', '.join(missing)}]" if missing else "")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _has_verbatim(value: str) -> bool:
    return any(ch.isdigit() for ch in value) or "/" in value or "\\" in value


def _norm_key(key: str) -> str:
    key = key.strip()
    while True:
        stripped = _KEY_FILLER.sub("", key, count=1)
        if stripped == key:
            break
        key = stripped
    return key.replace("的", "").strip().lower()


def facts_in(sentence: str) -> list[tuple[str, str]]:
    """``(key, value)`` statements whose value is verbatim material: "端口是 5432", "path: /etc/app.conf"."""
    found = []
    for pattern in (_ZH_FACT, _EN_FACT):
        for match in pattern.finditer(sentence):
            key, value = _norm_key(match.group("key")), match.group("value").rstrip(".")
            if len(key) >= 2 and _has_verbatim(value):
                found.append((key, value))
    return found


@dataclass
class Fact:
    key: str
    values: list[str]
    seq: int
    conflict: bool = False
    previous: list[str] = field(default_factory=list)


@dataclass
class Item:
    section: int
    text: str
    seq: int


class RunningSummary:
    """A summary as items and facts, so a new fold merges into it instead of rewriting it."""

    def __init__(self, lang: str) -> None:
        self.lang = lang
        self.items: list[Item] = []
        self.facts: list[Fact] = []
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def add(self, section: int, text: str) -> None:
        text = text.strip()
        if not text or text in NONE_ITEM.values():
            return
        # A repeat moves to the end; a decision differing only in its numbers/paths replaces the older
        # one (已被新决定替代的内容可省略).
        shape = _shape(text) if section == 1 else None
        self.items = [
            i
            for i in self.items
            if not (i.section == section and (i.text == text or (shape and _shape(i.text) == shape)))
        ]
        self.items.append(Item(section, text, self._next()))

    def state(self, key: str, value: str, *, update: bool) -> None:
        """Record ``key = value``: the same key again is an update (explicit) or a conflict (待确认)."""
        fact = next((f for f in self.facts if f.key == key or _suffix_match(f.key, key)), None)
        if fact is None:
            self.facts.append(Fact(key, [value], self._next()))
            return
        fact.seq = self._next()
        if value in fact.values and not fact.conflict:
            return
        if update:
            fact.previous = list(dict.fromkeys([*fact.previous, *(v for v in fact.values if v != value)]))
            fact.values, fact.conflict = [value], False
        elif value not in fact.values:
            # The first and the latest values stay: enough to ask which one holds, bounded in size.
            fact.values = [*fact.values[:1], *fact.values[1:][-(MAX_CONFLICT_VALUES - 2) :], value]
            fact.conflict = True

    def parse(self, text: str) -> None:
        """Read an older summary back (ours or a model's); unknown lines are kept as discussion."""
        section = 0
        for raw in text.splitlines():
            line = raw.strip()
            if not line:
                continue
            heading = _HEADING.match(line)
            if heading:
                section = _HEADING_SECTION[heading.group(1).lower()]
                continue
            line = re.sub(r"^[-*•]\s+", "", line)
            fact = _FACT_LINE.match(line)
            if fact:
                self._parse_fact(fact.group(1), fact.group(2), fact.group(3))
            else:
                self.add(section, line)

    def _parse_fact(self, kind: str, key: str, rest: str) -> None:
        previous: list[str] = []
        match = _PREVIOUS.search(rest)
        if match:
            previous = [p.strip() for p in (match.group(1) or match.group(2)).split(",")]
            rest = rest[: match.start()]
        rest = _CONFLICT_NOTE.sub("", rest)
        conflict = kind.lower() in {"待确认", "to confirm"}
        values = [v.strip() for v in rest.split(" / ")] if conflict else [rest.strip()]
        self.facts.append(Fact(key.strip(), values, self._next(), conflict, previous))

    def lines(self) -> list[str]:
        zh = self.lang == "zh"
        out = []
        for index, name in enumerate(SECTIONS):
            out.append(HEADINGS[self.lang][name] + ("：" if zh else ":"))
            entries = [(i.seq, i.text) for i in self.items if i.section == index]
            if index == 0:
                entries += [(f.seq, self._fact_text(f)) for f in self.facts]
            entries.sort()
            out += [f"- {text}" for _, text in entries] or [f"- {NONE_ITEM[self.lang]}"]
        return out

    def _fact_text(self, fact: Fact) -> str:
        zh = self.lang == "zh"
        if fact.conflict:
            values = " / ".join(fact.values)
            return (
                f"待确认：{fact.key} = {values}（前后说法不一致）"
                if zh
                else (f"To confirm: {fact.key} = {values} (conflicting statements)")
            )
        text = f"事实：{fact.key} = {fact.values[0]}" if zh else f"Fact: {fact.key} = {fact.values[0]}"
        if fact.previous:
            was = ", ".join(fact.previous)
            text += f"（原为 {was}，用户已更新）" if zh else f" (was {was}, updated by the user)"
        return text

    def render(self, max_tokens: int) -> str:
        """The summary text, least useful lines dropped (oldest first) until it fits ``max_tokens``."""
        text = "\n".join(self.lines())
        while estimate_tokens(text) > max_tokens:
            victims = self._victims(protect=PROTECTED_PER_SECTION) or self._victims(protect=0)
            if not victims:
                break
            _, _, victim = min(victims, key=lambda v: (v[0], v[1]))
            if isinstance(victim, Item):
                self.items.remove(victim)
            else:
                self.facts.remove(victim)
            text = "\n".join(self.lines())
        return text

    def _victims(self, protect: int) -> list[tuple[int, int, Item | Fact]]:
        """Droppable lines with their rank (discussion < results < decisions, facts < conflicts); the
        ``protect`` newest of each section are spared so no section empties while others are full."""
        spared: set[int] = set()
        for index in range(len(SECTIONS)):
            seqs = sorted((i.seq for i in self.items if i.section == index), reverse=True)
            spared.update(seqs[:protect])
        spared.update(sorted((f.seq for f in self.facts), reverse=True)[:protect])
        rank = {0: 0, 2: 1, 1: 2}
        victims: list[tuple[int, int, Item | Fact]] = [
            (rank[i.section], i.seq, i) for i in self.items if i.seq not in spared
        ]
        victims += [(3 if f.conflict else 2, f.seq, f) for f in self.facts if f.seq not in spared]
        return victims


def _shape(text: str) -> str:
    return VERBATIM.sub("#", text)


def _suffix_match(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return len(short) >= 2 and long.endswith(short)


def _args_text(args: object) -> str:
    if isinstance(args, dict) and len(args) == 1:
        return clip(str(next(iter(args.values()))), 60)
    return clip(json.dumps(args, ensure_ascii=False, sort_keys=True), 60)


def _tool_line(name: str, args: object, result: ToolMessage | None, zh: bool) -> str:
    head = f"{name}({_args_text(args)})"
    if result is None:
        return head + (" → 未执行（本轮被中断）" if zh else " → not run (the turn was interrupted)")
    text = clip(result.text, RESULT_CHARS)
    failed = result.status == "error" or text.startswith("Error")
    return f"{head} → " + ((("失败：" if zh else "failed: ") + text) if failed else text)


def _add_human(summary: RunningSummary, text: str, answer: str) -> None:
    zh = summary.lang == "zh"
    plain = []
    for sentence in sentences(text):
        for key, value in facts_in(sentence):
            summary.state(key, value, update=bool(_UPDATE.search(sentence)))
        if _DECIDED.search(sentence):
            summary.add(1, clip(sentence, 160))
        elif _DONE.search(sentence):
            summary.add(2, clip(sentence, 160))
        else:
            plain.append(sentence)
    if plain:
        asked = clip(" ".join(plain)).rstrip("。；;")
        reply = clip(answer) if answer else ""
        if zh:
            summary.add(0, f"用户：{asked}" + (f"；助手答：{reply}" if reply else ""))
        else:
            summary.add(0, f"User: {asked}" + (f" — assistant: {reply}" if reply else ""))


def _rounds(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    rounds: list[list[BaseMessage]] = []
    for message in messages:
        if isinstance(message, HumanMessage) or not rounds:
            rounds.append([])
        rounds[-1].append(message)
    return rounds


def summary_language(old_summary: str, messages: Sequence[BaseMessage]) -> str:
    texts = [old_summary, *(m.text for m in messages if isinstance(m, HumanMessage))]
    return "zh" if any(has_cjk(t) for t in texts) else "en"


def extractive_summary(
    old_summary: str, messages: Sequence[BaseMessage], *, lang: str | None = None, max_tokens: int = 512
) -> str:
    """The old summary with ``messages`` folded in; deterministic, only copied text."""
    lang = lang or summary_language(old_summary, messages)
    summary = RunningSummary(lang)
    summary.parse(old_summary)
    zh = lang == "zh"
    for round_ in _rounds(messages):
        results = {m.tool_call_id: m for m in round_ if isinstance(m, ToolMessage)}
        answered: set[str] = set()
        answers = [m for m in round_ if isinstance(m, AIMessage) and m.text.strip()]
        answer = sentences(answers[-1].text)[0] if answers else ""
        for message in round_:
            if isinstance(message, HumanMessage):
                _add_human(summary, message.text, answer)
            elif isinstance(message, AIMessage):
                for call in message.tool_calls:
                    call_id = call["id"]  # None from a provider that sends no ids: then no result can match
                    if call_id is not None:
                        answered.add(call_id)
                    result = results.get(call_id) if call_id is not None else None
                    summary.add(2, _tool_line(call["name"], call["args"], result, zh))
            elif isinstance(message, ToolMessage) and message.tool_call_id not in answered:
                summary.add(2, _tool_line(message.name or "tool", {}, message, zh))
        if not any(isinstance(m, HumanMessage) for m in round_) and answer:
            summary.add(0, ("助手：" if zh else "Assistant: ") + clip(answer))
    return summary.render(max_tokens)


def has_sections(text: str) -> bool:
    """True when ``text`` carries the three headings (how a model's summary is checked)."""
    found = {_HEADING_SECTION[m.group(1).lower()] for m in map(_HEADING.match, text.splitlines()) if m}
    return found == {0, 1, 2}
