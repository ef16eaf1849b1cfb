"""The model-backed memory extractor: the configured chat model proposes memory operations from a turn
(the extraction rules as the system prompt, the recent user messages and at most 100 memories as data).
It only proposes; ``stores.memory.rules`` decides."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from models.deadline import invoke_with_timeout
from stores.memory.rules import EXTRACTION_PROMPT, ExtractionRequest


class ModelExtractor:
    """The configured chat model as extractor; a reply slower than ``timeout`` seconds is abandoned."""

    def __init__(self, model: BaseChatModel, timeout: float = 60.0) -> None:
        self.model = model
        self.timeout = timeout

    def __call__(self, request: ExtractionRequest) -> str:
        messages = [SystemMessage(EXTRACTION_PROMPT), HumanMessage(request.payload())]
        config = {"run_name": "memory_extraction", "tags": ["kb-agent:memory-model"]}
        # Not in the run's context: nothing of the extraction streams into the user's answer.
        reply = invoke_with_timeout(self.model, messages, self.timeout, config=config, inherit_run=False)
        return reply.text
