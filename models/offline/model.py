"""The offline model: a real, deterministic ``BaseChatModel`` that needs no endpoint.

It is what runs with zero configuration, what the README's first command and the graph's tests use. It
decides from the conversation by rule (see ``models.offline.intents``), calls only the tools it was bound
with, and marks every answer ``response_metadata["offline"] = True`` so nobody mistakes it for an LLM.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk

from models.local import LocalChatModel, openai_tools
from models.offline import intents, kb_intents, memory_intents, tool_intents
from models.offline.earlier_calculation import earlier_calculation
from models.offline.request_reading import read_request
from models.tokens import count_message_tokens, estimate_tokens, has_cjk
from stores.text_analysis import query_focus

OFFLINE_MODEL_NAME = "kb-agent-offline"


def _tool_names(tools: Sequence[Any] | None) -> set[str]:
    names = set()
    for tool in tools or []:
        names.add(openai_tools([tool])[0]["function"]["name"])
    return names


def _last_human(messages: Sequence[BaseMessage]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return -1


class OfflineChatModel(LocalChatModel):
    """Rule-based stand-in for an LLM: arithmetic → ``calculator``, dates → ``get_current_date``."""

    model_name: str = OFFLINE_MODEL_NAME
    # Its rules answer recognisable requests only: free-form work (rewrite, summarise, judge) is not asked of it.
    follows_instructions: ClassVar[bool] = False

    @property
    def _llm_type(self) -> str:
        return OFFLINE_MODEL_NAME

    def decide(self, messages: Sequence[BaseMessage], tools: Sequence[Any] | None = None) -> AIMessage:
        """The next assistant message for this conversation (tool calls or a final answer)."""
        sent, messages = messages, read_request(messages)
        names = _tool_names(tools)
        start = _last_human(messages)
        request = messages[start].text if start >= 0 else ""
        # The rules read what is asked: of a page pasted with a question, the sentences that ask. A
        # calculation is computed only when read whole, so a request cut that way is never computed.
        question = query_focus(request)
        if question != request:
            if "calculator" in names and intents.read(question).calculation.is_calculation:
                return self._message(intents.too_long_to_compute(has_cjk(question)), messages=sent)
            names = names - {"calculator"}
        turn = list(messages[start + 1 :])
        asked = [m for m in turn if isinstance(m, AIMessage) and m.tool_calls]
        results = {m.tool_call_id: m for m in turn if isinstance(m, ToolMessage)}
        kb_steps = tool_intents.plan_tool_steps(question, names)
        if kb_steps is None:
            kb_steps = kb_intents.plan_feedback(question, names, messages)
        if kb_steps is None:
            kb_steps = memory_intents.plan_memory_steps(question, names, messages)
        if kb_steps is None and memory_intents.wants_memory(
            question, memory_intents.memories_in_prompt(messages)
        ):
            kb_steps = []  # "remember that my team is L1-1" is never arithmetic
        if kb_steps is None and tool_intents.missing_capability(question, names):
            kb_steps = []  # "今天杭州天气怎么样？" is neither a date question nor one for the documents
        if kb_steps is None:
            kb_steps = kb_intents.plan_kb_steps(question, names, messages)
        rounds = intents.rounds_of(kb_steps if kb_steps is not None else intents.plan_steps(question, names))
        if not rounds and kb_steps is None and "calculator" in names:
            # "把第一个问题的结果乘以 2": an earlier turn's result, from the history or the running summary.
            expression = earlier_calculation(question, messages)
            if expression is not None:
                rounds = [[intents.Step("calculator", {"expression": expression})]]
        if not rounds and kb_steps is None and self._reply(question, messages, names) is None:
            # A question for the documents that came without passages is searched before it is answered.
            rounds = intents.rounds_of(kb_intents.search_first(question, messages, names) or [])

        executed: list[tuple[str, dict[str, Any], str, str]] = []
        last_calc: str | None = None
        failed = False
        for message in asked:
            for call in message.tool_calls:
                result = results.get(call["id"]) if call["id"] is not None else None
                if result is None:
                    continue
                status = (
                    "error" if result.status == "error" or result.text.startswith("Error:") else "success"
                )
                failed = failed or status == "error" or kb_intents.found_nothing(call["name"], result.text)
                executed.append((call["name"], call["args"], result.text, status))
                if call["name"] == "calculator" and status == "success":
                    last_calc = result.text

        if len(asked) < len(rounds) and not failed:
            calls = [
                {
                    "name": step.tool,
                    "args": intents.resolve(step, last_calc),
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                }
                for step in rounds[len(asked)]
            ]
            return self._message("", tool_calls=calls, messages=sent)
        if executed:
            return self._message(self._compose(question, executed), messages=sent)
        reply = self._reply(question, messages, names) or kb_intents.knowledge_reply(
            question, messages, names
        )
        return self._message(reply or intents.capabilities_reply(question, names), messages=sent)

    @staticmethod
    def _reply(question: str, messages: Sequence[BaseMessage], names: set[str]) -> str | None:
        """A final answer some rule gives without a tool, before the documents are asked; None when none
        does (a tool that is not offered, a memory question or statement, what could not be computed)."""
        return (
            # a statement told is no request for a missing tool: "the weather here is lovely" is news
            memory_intents.not_stored_reply(question, memory_intents.memories_in_prompt(messages), names)
            or tool_intents.unavailable_reply(question, names)
            or memory_intents.memory_reply(question, messages, names)
            or intents.unread_reply(question, names)
        )

    @staticmethod
    def _compose(question: str, executed: list[tuple[str, dict[str, Any], str, str]]) -> str:
        """The final answer: knowledge tools described by their own rules, the rest by the arithmetic ones."""
        zh = has_cjk(question)
        lines = []
        for tool, _args, content, status in executed:
            described = memory_intents.describe_memory_result(tool, content, status, zh)
            if described is None and status == "success":
                described = kb_intents.describe_kb_result(tool, content, zh, question)
            if described is None:
                return intents.compose_answer(question, executed)
            lines.append(described)
        return "\n".join(lines)

    def _message(
        self, content: str, *, messages: Sequence[BaseMessage], tool_calls: list[dict[str, Any]] | None = None
    ) -> AIMessage:
        prompt_tokens = count_message_tokens(messages)
        output_tokens = estimate_tokens(content) + 8 * len(tool_calls or [])
        return AIMessage(
            content=content,
            tool_calls=tool_calls or [],
            id=f"offline-{uuid.uuid4().hex}",
            response_metadata={
                "model_name": self.model_name,
                "offline": True,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            },
            usage_metadata={
                "input_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "total_tokens": prompt_tokens + output_tokens,
            },
        )

    def reply(self, messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]]) -> AIMessage:
        return self.decide(messages, tools)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """Stream the decision: tool calls in one chunk, text in short pieces (so the CLI shows tokens)."""
        message = self.decide(messages, kwargs.get("tools"))
        text = message.text
        pieces = [text[i : i + 16] for i in range(0, len(text), 16)] or [""]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            chunk = AIMessageChunk(
                content=piece,
                id=message.id,
                tool_call_chunks=(
                    [
                        {
                            "name": c["name"],
                            "args": _json(c["args"]),
                            "id": c["id"],
                            "index": n,
                            "type": "tool_call_chunk",
                        }
                        for n, c in enumerate(message.tool_calls)
                    ]
                    if last
                    else []
                ),
                response_metadata=message.response_metadata if last else {},
                usage_metadata=message.usage_metadata if last else None,
                chunk_position="last" if last else None,
            )
            if run_manager and piece:
                run_manager.on_llm_new_token(piece, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
