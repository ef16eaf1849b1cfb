"""Chat models: any OpenAI-compatible endpoint, the offline model, and the scripted test double.

The models load on first use: importing this package (for its errors, or the factory's type) costs
nothing, and a process that never calls the offline model never reads its rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from models.errors import EndpointSettings, ModelConfigError

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_openai import ChatOpenAI

    from models.offline import OfflineChatModel
    from models.scripted import ScriptedChatModel, tool_call



def __getattr__(name: str) -> Any:
    if name == "OfflineChatModel":
        from models.offline import OfflineChatModel

        return OfflineChatModel
    if name in ("ScriptedChatModel", "tool_call"):
        from models import scripted

        return getattr(scripted, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ChatModelFactory",
    "ChatModels",
    "OfflineChatModel",
    "ScriptedChatModel",
    "follows_instructions",
    "get_chat_model",
    "tool_call",
]


ChatModelFactory = Callable[[EndpointSettings], "BaseChatModel"]
"""Gives the chat model a run asks for: :class:`ChatModels` (shared clients) or :func:`get_chat_model`."""


def follows_instructions(model: BaseChatModel | None) -> TypeGuard[BaseChatModel]:
    """Whether ``model`` can do work asked for in words — rewrite a query, write a summary, judge an answer.

    A model says it cannot with a false ``follows_instructions`` attribute (the offline rule model does);
    callers then take their non-model path (no rewrite, an extractive summary, no judge).
    """
    return model is not None and bool(getattr(model, "follows_instructions", True))


def _build_openai(
    model: str,
    base_url: str,
    api_key: str,
    temperature: float,
    timeout: float,
    retries: int,
    passthrough: bool,
) -> BaseChatModel:
    if passthrough:  # an operator's opt-in: it leans on langchain-openai internals, checked against the pin
        from models.openai_chat import PassThroughChatOpenAI, check_passthrough_versions

        check_passthrough_versions()
        cls: type[ChatOpenAI] = PassThroughChatOpenAI
    else:
        from langchain_openai import ChatOpenAI  # imported on first use

        cls = ChatOpenAI
    from pydantic import SecretStr

    from models.http_clients import LoopLocalAsyncClient

    return cls(
        model=model,
        base_url=base_url or None,
        api_key=SecretStr(api_key),  # what pydantic would make of the plain string
        temperature=temperature,
        timeout=timeout,
        max_retries=retries,
        stream_usage=True,
        http_async_client=LoopLocalAsyncClient(timeout=timeout),  # one pool per event loop
    )


def _endpoint(context: EndpointSettings) -> tuple[str, str, str, float, float, int, bool]:
    """What the client of ``context``'s endpoint is built from; ``ModelConfigError`` when it cannot be."""
    key = context.api_key
    if not key:
        if not context.base_url:
            raise ModelConfigError(
                f"no API key for model {context.model_name!r}: set {context.api_key_env} (or OPENAI_API_KEY), "
                "or set KB_AGENT_BASE_URL to a local endpoint, or unset KB_AGENT_MODEL to use the offline model"
            )
        key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
    return (
        context.model_name,
        context.base_url,
        key,
        context.temperature,
        context.model_timeout,
        context.model_max_retries,
        context.openai_passthrough,
    )


def get_chat_model(context: EndpointSettings) -> BaseChatModel:
    """A new client for the model ``context`` asks for (the offline model, or its OpenAI-compatible
    endpoint). For one-off callers; a process that runs turns asks its :class:`ChatModels`."""
    if context.uses_offline_model:
        from models.offline import OfflineChatModel

        return OfflineChatModel()
    return _build_openai(*_endpoint(context))


class ChatModels:
    """The chat-model clients of one process, one per endpoint (model, URL, key, call settings), owned by
    the composition root that opened it. A run may pick its model, so the client is chosen per call.

    Built under a lock: the first round of many runs at once would otherwise build one client (with two
    SSL contexts) per thread of the node pool. The lock is held for a dictionary look-up once it exists.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[Any, ...], BaseChatModel] = {}

    def __call__(self, context: EndpointSettings) -> BaseChatModel:
        if context.uses_offline_model:
            return get_chat_model(context)
        endpoint = _endpoint(context)
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._clients[endpoint] = _build_openai(*endpoint)
            return client

    def __len__(self) -> int:
        return len(self._clients)

    def clear(self) -> None:
        """Forget every client (a rotated key or a closed root gets new ones)."""
        with self._lock:
            self._clients.clear()
