"""Memory extraction: who proposes operations from a turn, and how it stays off the answer path.

``ModelExtractor`` asks the configured chat model (the extraction rules as the system prompt, the recent
user messages and at most 100 memories as data). ``OfflineExtractor`` handles explicit statements by rule,
deterministically: "记住…/remember…", "忘掉…/forget…", "我喜欢…/I prefer…". Either only *proposes*; the
seven rules in ``nodes.memory_rules`` decide. ``BackgroundMemoryUpdater`` runs extraction on one worker
thread, so a slow, failing or hanging extraction never delays, loses or changes the saved answer.
"""

from __future__ import annotations

import atexit
import logging
import math
import queue
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from graph.settings import Settings
from nodes.memory_rules import (
    EXTRACTION_PROMPT,
    ExtractionRequest,
    Extractor,
    has_forget_intent,
)
from stores.base import MemoryRecord, MemoryStore
from stores.memory import ChromaMemoryStore
from stores.text import tokenize

log = logging.getLogger("kb_agent.memory")

EXPLICIT_CONFIDENCE = 0.95  # "记住…" / "remember…": the user asked in so many words
PREFERENCE_CONFIDENCE = 0.9  # "我喜欢…" / "I prefer…": a stated preference

_SENTENCE_END = re.compile(r"[。！!？?\n]|\.(?:\s|$)")
_ZH_REMEMBER = re.compile(
    r"^(?:请|麻烦|帮我|你|要|帮忙)*(?:记住|记下|记一下|记着)(?:一下)?[:：,，\s]*(?P<body>.+)$"
)
_EN_REMEMBER = re.compile(
    r"^(?:please\s+)?(?:remember|note|keep\s+in\s+mind)(?:\s+that)?\s*[:,]?\s+(?P<body>.+)$", re.I
)
_ZH_PREFER = re.compile(
    r"^(?:其实|另外|还有|顺便说一下)?[，,]?(?P<body>我(?:更|比较|很|最|非常|一直|特别)?"
    r"(?:喜欢|偏好|偏爱|倾向于|习惯|不喜欢|讨厌).+)$"
)
_EN_PREFER = re.compile(
    r"^(?:also,?\s+|actually,?\s+)?(?P<body>i\s+(?:really\s+|much\s+|usually\s+|generally\s+)?"
    r"(?:prefer|like|love|dislike|hate|don't\s+like|do\s+not\s+like)\b.+)$",
    re.I,
)
_ZH_RULE = re.compile(r"^(?:以后|今后|每次|回答|总是|不要|别|请|务必)")
_EN_RULE = re.compile(r"^(?:always|never|please|answer|reply|respond|use|don't|do not|from now on)\b", re.I)
_ALL = re.compile(r"所有|全部|一切|everything|all\s+(?:of\s+)?(?:my\s+|your\s+|the\s+)?memor", re.I)
_FORGET_PHRASES = (
    "忘掉 忘记 忘了 忘却 删除 删掉 清除 清空 移除 抹掉 去掉 记忆 关于 有关 这条 那条 这个 那个 不要 再 记住 "
    "记得 记着 以前 之前 所有 全部 一切 帮 帮我 把 用户 forget delete remove erase memory memories about "
    "everything all don't remember anymore stop storing keeping"
)


def _drop_terms() -> frozenset[str]:
    return frozenset(tokenize(_FORGET_PHRASES))


def _first_sentence(text: str) -> tuple[str, bool]:
    """The first sentence of ``text`` and whether it is a question."""
    text = text.strip()
    match = _SENTENCE_END.search(text)
    sentence = text[: match.start()] if match else text
    question = bool(match and match.group().strip() in {"?", "？"}) or bool(re.search(r"[吗呢]$", sentence))
    return sentence.strip(" ，,:：;；"), question


def _third_person_zh(body: str) -> tuple[str, str]:
    body = re.sub(r"我(?!们)", "用户", body)
    if body.startswith("用户"):
        return "semantic", body
    if _ZH_RULE.match(body):
        return "procedural", f"用户要求：{body}"
    return "semantic", f"用户提到：{body}"


def _verb_s(verb: str) -> str:
    verb = verb.lower()
    if verb == "have":
        return "has"
    return verb + ("es" if verb.endswith(("s", "sh", "ch", "x", "o")) else "s")


def _third_person_en(body: str) -> tuple[str, str]:
    b = body.strip()
    first = [
        (r"^i\s+am\b|^i'm\b", lambda m: "the user is"),
        (r"^i\s+(?:don't|do\s+not)\s+", lambda m: "the user doesn't "),
        (r"^i\s+(?:(really|much|usually|generally)\s+)?([a-z]+)\b", None),
        (r"^my\b", lambda m: "the user's"),
    ]
    for pattern, replace in first:
        match = re.match(pattern, b, flags=re.I)
        if not match:
            continue
        if replace is None:
            adverb = f"{match.group(1).lower()} " if match.group(1) else ""
            head = f"the user {adverb}{_verb_s(match.group(2))}"
        else:
            head = replace(match)
        b = head + b[match.end() :]
        break
    else:
        if _EN_RULE.match(b):
            return "procedural", f"The user asks: {b}"
        return "semantic", f"The user mentioned: {b}"
    for pattern, word in (
        (r"\bmyself\b", "themselves"),
        (r"\bmy\b", "their"),
        (r"\bme\b", "them"),
        (r"\bi\b", "they"),
    ):
        b = re.sub(pattern, word, b, flags=re.I)
    return "semantic", b[0].upper() + b[1:]


def _add(memory_type: str, content: str, confidence: float) -> dict[str, Any]:
    return {
        "action": "ADD",
        "type": memory_type,
        "content": content,
        "target_id": None,
        "confidence": confidence,
    }


class OfflineExtractor:
    """Deterministic extraction for explicit statements in the latest user message; nothing else is kept."""

    def __call__(self, request: ExtractionRequest) -> dict[str, Any]:
        text = request.latest_user_message.strip()
        if not text:
            return {"operations": []}
        if has_forget_intent(text):
            return {"operations": self.forget(text, request.existing_memories)}
        sentence, question = _first_sentence(text)
        zh = _ZH_REMEMBER.match(sentence)
        en = _EN_REMEMBER.match(sentence)
        if (zh or en) and not question:
            body = (zh or en).group("body").strip()  # type: ignore[union-attr]
            memory_type, content = _third_person_zh(body) if zh else _third_person_en(body)
            return {"operations": [_add(memory_type, content, EXPLICIT_CONFIDENCE)]}
        zh, en = _ZH_PREFER.match(sentence), _EN_PREFER.match(sentence)
        if (zh or en) and not question:
            body = (zh or en).group("body").strip()  # type: ignore[union-attr]
            memory_type, content = _third_person_zh(body) if zh else _third_person_en(body)
            return {"operations": [_add(memory_type, content, PREFERENCE_CONFIDENCE)]}
        return {"operations": []}

    @staticmethod
    def forget(text: str, memories: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
        """DELETE the memories the request names: best keyword overlap, at least half its words."""
        target = [t for t in tokenize(text) if t not in _drop_terms()]
        if not target and _ALL.search(text):
            chosen = [m for m in memories]
        elif not target:
            note = "a request to forget without a recognisable target"
            return [{"action": "IGNORE", "type": None, "content": note, "target_id": None, "confidence": 0.0}]
        else:
            wanted = set(target)
            overlap = {m.get("id"): len(wanted & set(tokenize(m.get("content", "")))) for m in memories}
            best = max(overlap.values(), default=0)
            chosen = [
                m
                for m in memories
                if best >= max(1, math.ceil(len(wanted) / 2)) and overlap[m.get("id")] == best
            ]
        return [
            {
                "action": "DELETE",
                "type": m.get("memory_type"),
                "content": None,
                "target_id": m.get("id"),
                "confidence": EXPLICIT_CONFIDENCE,
            }
            for m in chosen
        ]


class ModelExtractor:
    """The configured chat model as extractor; a reply slower than ``timeout`` seconds is abandoned."""

    def __init__(self, model: BaseChatModel, timeout: float = 60.0) -> None:
        self.model = model
        self.timeout = timeout

    def __call__(self, request: ExtractionRequest) -> str:
        from models.tokens import message_text

        messages = [SystemMessage(EXTRACTION_PROMPT), HumanMessage(request.payload())]
        box: dict[str, Any] = {}

        def call() -> None:  # a plain thread: no run context, so nothing streams into the user's answer
            try:
                box["reply"] = self.model.invoke(
                    messages, config={"run_name": "memory_extraction", "tags": ["kb-agent:memory-model"]}
                )
            except BaseException as exc:  # handed to the caller below
                box["error"] = exc

        worker = threading.Thread(target=call, name="kb-agent-memory-extraction", daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            raise TimeoutError(f"memory extraction took longer than {self.timeout:g} s and was abandoned")
        if "error" in box:
            raise box["error"]
        return message_text(box["reply"])


class BackgroundMemoryUpdater:
    """A :class:`MemoryStore` whose updates run on one worker thread, in submission order.

    ``recall`` passes through; ``update_from_turn`` queues the turn and returns 0 at once, so the graph's
    ``update_memory`` node finishes immediately. Failures are logged and counted, never raised.
    """

    def __init__(self, store: MemoryStore, *, name: str = "kb-agent-memory") -> None:
        self.store = store
        self.name = name
        self._queue: queue.Queue[tuple[str, str | None, list[BaseMessage]] | None] = queue.Queue()
        self._done = threading.Condition()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self.completed = self.failed = self.applied = 0
        self.last_error: str | None = None

    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        return self.store.recall(user_id, query, top_k)

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        self.submit(user_id, thread_id, messages)
        return 0

    def submit(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> None:
        """Queue one finished turn for extraction."""
        with self._done:
            self._pending += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
        self._queue.put((user_id, thread_id, list(messages)))

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued turn is processed; False if ``timeout`` seconds passed first."""
        with self._done:
            return self._done.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float | None = 10.0) -> bool:
        """Drain, then stop the worker; what is still queued after ``timeout`` is logged as lost."""
        drained = self.drain(timeout)
        if not drained:
            log.warning(
                "memory updates still pending after %s s: %d turn(s) not processed", timeout, self._pending
            )
        self._queue.put(None)
        return drained

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            user_id, thread_id, messages = job
            try:
                self.applied += self.store.update_from_turn(user_id, thread_id, messages)
                self.completed += 1
            except Exception as exc:
                self.failed += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception(
                    "memory update failed for user=%s thread=%s; the answer is kept", user_id, thread_id
                )
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()


_stores: dict[tuple[Any, ...], ChromaMemoryStore] = {}
_updaters: dict[tuple[Any, ...], BackgroundMemoryUpdater] = {}
_lock = threading.Lock()


def extractor_for(ctx: Settings) -> Extractor:
    """The configured model when there is one, else the offline rules."""
    if ctx.uses_offline_model:
        return OfflineExtractor()
    from models import get_chat_model

    return ModelExtractor(get_chat_model(ctx), timeout=ctx.model_timeout)


def memory_store(ctx: Settings) -> ChromaMemoryStore:
    """The long-term memory store of this context, opened once per process."""
    from stores.embeddings import embedder_for

    key = (
        str(Path(ctx.data_dir).resolve()),
        ctx.embedder,
        ctx.chroma_url,
        ctx.database_url,
        ctx.model_name,
        ctx.base_url,
    )
    with _lock:
        if key not in _stores:
            embedder = embedder_for(ctx)
            episodic_days = float(getattr(ctx, "memory_episodic_days", 0.0) or 0.0)
            _stores[key] = ChromaMemoryStore(
                ctx.data_dir,
                embedder=embedder,
                chroma_url=ctx.chroma_url,
                database_url=ctx.database_url,
                extractor=extractor_for(ctx),
                ttl_days={"episodic": episodic_days} if episodic_days > 0 else None,
            )
        return _stores[key]


def open_memory(ctx: Settings) -> BackgroundMemoryUpdater:
    """The store of this context behind a background updater (drained at exit, at most 10 s)."""
    store = memory_store(ctx)
    key = (id(store),)
    with _lock:
        if key not in _updaters:
            _updaters[key] = updater = BackgroundMemoryUpdater(store)
            atexit.register(updater.close, 10.0)
        return _updaters[key]


class RunMemory:
    """A :class:`MemoryStore` that opens the store of each run's context (for the server's ``graph``).

    A context with ``long_term_memory`` off (when that setting exists) recalls and learns nothing.
    ``deployment`` is the graph's settings (None: the environment's).
    """

    def __init__(self, deployment: Settings | None = None) -> None:
        self.deployment = deployment

    def _memory(self) -> BackgroundMemoryUpdater | None:
        from langgraph.runtime import get_runtime

        from graph.context import run_settings

        try:
            runtime = get_runtime()
        except (RuntimeError, KeyError):
            runtime = None
        ctx = run_settings(runtime, self.deployment)
        return open_memory(ctx) if getattr(ctx, "long_term_memory", True) else None

    def recall(self, user_id: str, query: str, top_k: int = 5) -> list[MemoryRecord]:
        memory = self._memory()
        return memory.recall(user_id, query, top_k) if memory is not None else []

    def update_from_turn(self, user_id: str, thread_id: str | None, messages: Sequence[BaseMessage]) -> int:
        memory = self._memory()
        return memory.update_from_turn(user_id, thread_id, messages) if memory is not None else 0
