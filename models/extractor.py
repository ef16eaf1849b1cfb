"""The model-backed memory extractor: the configured chat model proposes memory operations from a turn
(the extraction rules as the system prompt, the recent user messages and at most 100 memories as data).
It only proposes; ``stores.memory.rules`` decides."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig

from models.deadline import invoke_with_timeout
from stores.memory.rules import EXTRACTION_PROMPT, ExtractionRequest

log = logging.getLogger("kb_agent.memory")


class ModelExtractor:
    """The configured chat model as extractor; a reply slower than ``timeout`` seconds is abandoned.

    It runs in the background, so a failed call (endpoint down, rate limit, timeout) is tried again up to
    ``attempts`` times with a doubling pause before the turn's extraction gives up (and is audited).
    """

    def __init__(
        self,
        model: BaseChatModel,
        timeout: float = 60.0,
        *,
        attempts: int = 3,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self._sleep = sleep

    def __call__(self, request: ExtractionRequest) -> str:
        messages = [SystemMessage(EXTRACTION_PROMPT), HumanMessage(request.payload())]
        config: RunnableConfig = {"run_name": "memory_extraction", "tags": ["kb-agent:memory-model"]}
        for attempt in range(1, self.attempts + 1):
            try:
                # Not in the run's context: nothing of the extraction streams into the user's answer.
                reply = invoke_with_timeout(self.model, messages, self.timeout, config=config, inherit_run=False)
                return reply.text
            except Exception as exc:
                if attempt == self.attempts:
                    raise ExtractionFailedError(
                        f"memory extraction failed {attempt} times, last: {type(exc).__name__}: {exc}"
                    ) from exc
                log.warning("memory extraction attempt %d failed (%s); retrying", attempt, exc)
                self._sleep(self.backoff * 2 ** (attempt - 1))
        raise AssertionError("unreachable")


class ExtractionFailedError(RuntimeError):
    """The extraction model kept failing; the turn's memories were not extracted (the answer is kept)."""
