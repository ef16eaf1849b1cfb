"""Endpoint failures become one clear ModelError sentence (models/errors.py)."""

from __future__ import annotations

import httpx
import openai
import pytest

from models.errors import ModelError, describe_model_error
from nodes.settings import Settings

URL = "http://127.0.0.1:9/v1"


def _request() -> httpx.Request:
    return httpx.Request("POST", URL + "/chat/completions")


def _status(cls: type[openai.APIStatusError], code: int) -> openai.APIStatusError:
    response = httpx.Response(code, request=_request(), json={"error": {"message": "nope"}})
    return cls("nope", response=response, body={"error": {"message": "nope"}})


@pytest.fixture
def ctx() -> Settings:
    return Settings(model="qwen-plus", base_url=URL, model_timeout=7.5)


def test_timeout(ctx: Settings) -> None:
    err = describe_model_error(openai.APITimeoutError(request=_request()), ctx)
    assert isinstance(err, ModelError)
    assert str(err) == f"the model endpoint {URL} did not answer within 7.5 s"


def test_connection_error(ctx: Settings) -> None:
    err = describe_model_error(openai.APIConnectionError(request=_request()), ctx)
    assert err is not None and "cannot reach" in str(err) and "KB_AGENT_BASE_URL" in str(err)


def test_a_connection_dropped_mid_answer_says_so_not_cannot_reach(ctx: Settings) -> None:
    broken = openai.APIConnectionError(request=_request())
    broken.__cause__ = httpx.ReadError("[Errno 104] Connection reset by peer")
    err = describe_model_error(broken, ctx)
    assert err is not None and str(err) == (
        f"the model endpoint {URL} dropped the connection before its answer was complete; try again"
    )


def test_authentication_names_the_key_variable(ctx: Settings) -> None:
    err = describe_model_error(_status(openai.AuthenticationError, 401), ctx)
    assert err is not None and "rejected the API key" in str(err) and "KB_AGENT_API_KEY" in str(err)
    custom = Settings(model="qwen-plus", base_url=URL, api_key_env="DASHSCOPE_API_KEY")
    assert "DASHSCOPE_API_KEY" in str(describe_model_error(_status(openai.AuthenticationError, 401), custom))


@pytest.mark.parametrize(
    ("cls", "code", "needle"),
    [
        (openai.PermissionDeniedError, 403, "may not use model 'qwen-plus'"),
        (openai.NotFoundError, 404, "model 'qwen-plus' was not found"),
        (openai.RateLimitError, 429, "rate-limiting"),
        (openai.InternalServerError, 500, "failed with HTTP 500"),
    ],
)
def test_status_errors(ctx: Settings, cls: type[openai.APIStatusError], code: int, needle: str) -> None:
    err = describe_model_error(_status(cls, code), ctx)
    assert isinstance(err, ModelError)
    assert needle in str(err)
    assert URL in str(err)


def test_default_endpoint_is_named_when_no_base_url() -> None:
    err = describe_model_error(openai.APITimeoutError(request=_request()), Settings(model="offline"))
    assert err is not None and "https://api.openai.com/v1" in str(err)


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), RuntimeError("boom")])
def test_other_errors_are_not_translated(ctx: Settings, exc: Exception) -> None:
    assert describe_model_error(exc, ctx) is None


def test_model_error_is_a_runtime_error() -> None:
    assert issubclass(ModelError, RuntimeError)
