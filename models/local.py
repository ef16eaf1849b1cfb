"""The shared base of the in-process models (offline and scripted): tool binding and generation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool


def openai_tools(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Tools in the OpenAI ``tools`` format, whatever form they were given in."""
    return [t if isinstance(t, dict) and "function" in t else convert_to_openai_tool(t) for t in tools]


class LocalChatModel(BaseChatModel):
    """A model that answers in-process: subclasses implement :meth:`reply`."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        return self.bind(tools=openai_tools(tools), **kwargs)

    def reply(self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
        """The next assistant message for ``messages`` given the bound ``tools``."""
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(
            generations=[ChatGeneration(message=self.reply(messages, kwargs.get("tools") or []))]
        )
