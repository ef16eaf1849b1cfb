"""``ChatOpenAI`` whose request bulk skips the OpenAI SDK's client-side transform — an operator's opt-in
(``KB_AGENT_OPENAI_PASSTHROUGH``), off by default.

``chat.completions.create`` walks its whole request body against the ``CompletionCreateParams`` types (typing
introspection per value, with the GIL held) before a byte is sent. For chat messages and tool definitions
the walk changes nothing: langchain-openai has already built them as the wire's plain dicts, and these
types carry no aliases or formats. With 50 runs at once it was about a fifth of a server process's CPU
(bench/README.md, ``graph_concurrency.py``). The SDK merges ``extra_body`` into the JSON body after the
walk, so the messages and tools travel there; the placeholders keep every key where it was, and the bytes
on the wire are the same (``tests/unit/models/test_openai_chat.py`` pins that, and that the walk is a
no-op for them, against the installed SDK).

The price: it overrides langchain-openai's private ``_get_request_payload`` and calls its
``_use_responses_api``, and whatever instruments the OpenAI client (OpenTelemetry, Langfuse, LangSmith's
``wrap_openai``) sees ``messages: []``. So it is used only when asked for, and only with the versions it was
tested with: any other refuses to start rather than risk sending empty messages after an upgrade.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_openai import ChatOpenAI

from models.errors import ModelConfigError

BULK = ("messages", "tools")  # already in wire format; the rest (model, tool_choice, ...) still goes through
# The releases the overrides below are tested against: (package, first tested, first not tested).
TESTED = (("langchain-openai", (1, 8), (1, 9)), ("openai", (3, 0), (4, 0)))


def _release(text: str) -> tuple[int, int]:
    parts = [int(p) if p.isdigit() else 0 for p in text.split(".")[:2]]
    major, minor = [*parts, 0, 0][:2]
    return major, minor


def check_passthrough_versions() -> None:
    """:class:`ModelConfigError` naming the setting when an installed release is outside the tested range."""
    for package, low, high in TESTED:
        installed = version(package)
        if not low <= _release(installed) < high:
            raise ModelConfigError(
                f"KB_AGENT_OPENAI_PASSTHROUGH is on, but {package} {installed} is outside the releases the fast "
                f"path is tested with ({'.'.join(map(str, low))} to before {'.'.join(map(str, high))}): "
                "switch it off, or install a tested release"
            )


class PassThroughChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` sending its messages and tools without the SDK's per-request type walk."""

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "response_format" in payload or self._use_responses_api(payload):
            return payload  # structured output (``parse``) and the Responses API keep the SDK's own path
        bulk = {key: payload[key] for key in BULK if key in payload}
        if not bulk:
            return payload
        moved = {**payload, **{key: [] for key in bulk}}  # same keys, same order: merged back over them
        moved["extra_body"] = {**bulk, **(payload.get("extra_body") or {})}
        # the route is chosen again from the payload later: it must not change (a "gpt-6" with tools)
        return payload if self._use_responses_api(moved) else moved
