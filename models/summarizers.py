"""The summarisers that fold old rounds into the running summary: the offline (extractive) one and the
one over a chat model, with the transcript that model reads and the check on its reply.

Kept apart from :mod:`nodes.summarize`, which measures the budget and decides when to fold and with
which summariser; nothing here needs the graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from models.summary import extractive_summary, has_sections
from models.tokens import estimate_tokens

# (old summary, folded messages, language, max tokens) -> the new summary, or None when unusable
Summarizer = Callable[[str, Sequence[BaseMessage], str, int], str | None]

_ROLE = {
    "zh": {"human": "用户", "ai": "助手", "tool": "工具结果", "call": "助手调用工具"},
    "en": {"human": "User", "ai": "Assistant", "tool": "Tool result", "call": "Assistant called"},
}
TRANSCRIPT_CHARS = 2_000


def transcript(messages: Sequence[BaseMessage], lang: str) -> str:
    """The folded messages as plain lines for the summary model (long tool results shortened)."""
    role = _ROLE[lang]
    lines = []
    for message in messages:
        text = message.text[:TRANSCRIPT_CHARS]
        if isinstance(message, ToolMessage):
            lines.append(f"{role['tool']} ({message.name or 'tool'}): {text}")
        elif isinstance(message, AIMessage):
            lines += [f"{role['call']} {c['name']}({c['args']})" for c in message.tool_calls]
            if text.strip():
                lines.append(f"{role['ai']}: {text}")
        elif isinstance(message, HumanMessage):
            lines.append(f"{role['human']}: {text}")
    return "\n".join(lines)


def offline_summarizer(old: str, messages: Sequence[BaseMessage], lang: str, max_tokens: int) -> str:
    return extractive_summary(old, messages, lang=lang, max_tokens=max_tokens)


def checked_summary(text: str, max_tokens: int) -> str | None:
    """A model's summary if usable: the three sections present and within the limit; else None."""
    text = re.sub(r"^```\w*\n|\n```$", "", text.strip()).strip()
    if not text or not has_sections(text):
        return None
    if estimate_tokens(text) > max_tokens:
        return None
    return text


NONE = {"zh": "（无）", "en": "(none)"}


@dataclass(frozen=True)
class ModelSummarizer:
    """A summariser over a chat model: the rules prompt in the conversation's language, output checked;
    awaitable too, so under ``ainvoke`` the summary call holds no thread. ``prompt`` is the rules
    template by language (``nodes.prompts.RUNNING_SUMMARY``): passed in, as models/ imports no node code."""

    model: BaseChatModel
    prompt: dict[str, str]

    def _request(self, old: str, messages: Sequence[BaseMessage], lang: str, max_tokens: int) -> list[BaseMessage]:
        prompt = self.prompt[lang].format(
            target=int(max_tokens * 0.8), old=old or NONE[lang], transcript=transcript(messages, lang)
        )
        return [HumanMessage(prompt)]

    def __call__(self, old: str, messages: Sequence[BaseMessage], lang: str, max_tokens: int) -> str | None:
        reply = self.model.invoke(self._request(old, messages, lang, max_tokens), config=SUMMARY_RUN)
        return checked_summary(reply.text, max_tokens)

    async def asummarize(self, old: str, messages: Sequence[BaseMessage], lang: str, max_tokens: int) -> str | None:
        reply = await self.model.ainvoke(self._request(old, messages, lang, max_tokens), config=SUMMARY_RUN)
        return checked_summary(reply.text, max_tokens)


SUMMARY_RUN: RunnableConfig = {"run_name": "summarize_history", "tags": ["nostream", "kb-agent:summary"]}
