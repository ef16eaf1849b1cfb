"""Chat models: any OpenAI-compatible endpoint, the offline model, and the scripted test double."""

from __future__ import annotations

import threading
from functools import lru_cache

from langchain_core.language_models import BaseChatModel

from models.errors import EndpointSettings, ModelConfigError
from models.offline import OfflineChatModel
from models.scripted import ScriptedChatModel, tool_call

__all__ = ["OfflineChatModel", "ScriptedChatModel", "follows_instructions", "get_chat_model", "tool_call"]


def follows_instructions(model: BaseChatModel | None) -> bool:
    """Whether ``model`` can do work asked for in words — rewrite a query, write a summary, judge an answer.

    A model says it cannot with a false ``follows_instructions`` attribute (the offline rule model does);
    callers then take their non-model path (no rewrite, an extractive summary, no judge).
    """
    return model is not None and bool(getattr(model, "follows_instructions", True))


# One client per endpoint, even when the first rounds of many runs start together.
_BUILDING = threading.Lock()


@lru_cache(maxsize=16)
def _openai_model(
    model: str, base_url: str, api_key: str, temperature: float, timeout: float, retries: int, passthrough: bool
) -> BaseChatModel:
    if passthrough:  # an operator's opt-in: it leans on langchain-openai internals, checked against the pin
        from models.openai_chat import PassThroughChatOpenAI, check_passthrough_versions

        check_passthrough_versions()
        cls: type[BaseChatModel] = PassThroughChatOpenAI
    else:
        from langchain_openai import ChatOpenAI  # imported on first use

        cls = ChatOpenAI
    return cls(
        model=model,
        base_url=base_url or None,
        api_key=api_key,
        temperature=temperature,
        timeout=timeout,
        max_retries=retries,
        stream_usage=True,
    )


def get_chat_model(context: EndpointSettings) -> BaseChatModel:
    """The model this run asked for: the offline model, or the configured OpenAI-compatible endpoint."""
    if context.uses_offline_model:
        return OfflineChatModel()
    key = context.api_key
    if not key:
        if not context.base_url:
            raise ModelConfigError(
                f"no API key for model {context.model_name!r}: set {context.api_key_env} (or OPENAI_API_KEY), "
                "or set KB_AGENT_BASE_URL to a local endpoint, or unset KB_AGENT_MODEL to use the offline model"
            )
        key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
    # lru_cache does not hold back concurrent misses: without the lock, the first round of 50 runs at once
    # built one ChatOpenAI (with two SSL contexts) per thread of the node pool (bench/README.md, "where the
    # CPU goes"). Held for a dictionary look-up once the client exists.
    with _BUILDING:
        return _openai_model(
            context.model_name,
            context.base_url,
            key,
            context.temperature,
            context.model_timeout,
            context.model_max_retries,
            context.openai_passthrough,
        )
