"""Endpoint failures as one clear sentence: which endpoint, what went wrong, what to change."""

from __future__ import annotations

from typing import Protocol


class EndpointSettings(Protocol):
    """What choosing and calling a chat endpoint needs (``nodes.settings.Settings`` has it all)."""

    @property
    def model_name(self) -> str: ...
    @property
    def uses_offline_model(self) -> bool: ...
    @property
    def api_key(self) -> str: ...

    base_url: str
    api_key_env: str
    temperature: float
    model_timeout: float
    model_max_retries: int
    openai_passthrough: bool


class ModelError(RuntimeError):
    """The model endpoint could not answer; the message says why and what to do."""


class ModelConfigError(ValueError):
    """No usable endpoint configuration (no key for a remote endpoint…); the message says what to set."""


def describe_model_error(exc: Exception, ctx: EndpointSettings) -> ModelError | None:
    """Translate an ``openai`` client error into a ModelError; None for errors that are not the endpoint's."""
    try:
        import openai
    except ImportError:  # pragma: no cover - openai comes with langchain-openai
        return None
    where = ctx.base_url or "https://api.openai.com/v1"
    if isinstance(exc, openai.APITimeoutError):
        return ModelError(f"the model endpoint {where} did not answer within {ctx.model_timeout:g} s")
    if isinstance(exc, openai.APIConnectionError) and _dropped(exc):
        return ModelError(
            f"the model endpoint {where} dropped the connection before its answer was complete; try again"
        )
    if isinstance(exc, openai.APIConnectionError):
        return ModelError(f"cannot reach the model endpoint {where}: check KB_AGENT_BASE_URL and the network")
    if isinstance(exc, openai.AuthenticationError):
        return ModelError(
            f"the model endpoint {where} rejected the API key: check {ctx.api_key_env} / OPENAI_API_KEY"
        )
    if isinstance(exc, openai.PermissionDeniedError):
        return ModelError(f"the API key may not use model {ctx.model_name!r} at {where}")
    if isinstance(exc, openai.NotFoundError):
        return ModelError(f"model {ctx.model_name!r} was not found at {where}: check KB_AGENT_MODEL")
    if isinstance(exc, openai.RateLimitError):
        return ModelError(f"the model endpoint {where} is rate-limiting requests; try again later")
    if isinstance(exc, openai.APIStatusError):
        return ModelError(f"the model endpoint {where} failed with HTTP {exc.status_code}: {exc.message}")
    return None


def _dropped(exc: BaseException) -> bool:
    """Whether a connection error broke an answer under way (reset, cut body) rather than the connect."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain: langchain -> openai -> httpx -> httpcore -> anyio -> OSError
        if seen is None:
            return False
        if isinstance(seen, ConnectionResetError) or type(seen).__name__ in {"ReadError", "RemoteProtocolError"}:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
