"""The peer a server benchmark serves beside our graph: ``langchain.agents.create_agent`` with our calculator.

Named in ``bench/langgraph.json`` next to ``kb_agent``, so one ``kb-agent serve`` (Aegra, the same auth,
edge, Postgres and workers) runs both, and a turn's server CPU can be compared graph against graph. The
model is the operator's endpoint (``KB_AGENT_MODEL``, ``KB_AGENT_BASE_URL``, ``OPENAI_API_KEY``) through a
plain ``ChatOpenAI``; the server gives the checkpointer, as it does to ours.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from nodes.settings import Settings
from tools.builtin import CALCULATOR
from tools.calculator import evaluate


@tool("calculator", description=CALCULATOR.description)
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly."""
    return evaluate(expression)


def make_peer(checkpointer: Any = None, **clients: Any) -> Any:
    """The peer: compiled with ``checkpointer`` (none on a server, which supplies its own) and, in
    ``clients``, the HTTP clients a caller needs of its own (``http_client``/``http_async_client``)."""
    settings = Settings()
    model = ChatOpenAI(
        model=settings.model_name,
        base_url=settings.base_url,
        # the offline scenarios serve this config with no endpoint (and no key); only ours is driven there
        api_key=settings.api_key or "no-key",
        timeout=settings.model_timeout,
        max_retries=settings.model_max_retries,
        **clients,
    )
    return create_agent(model, tools=[calculator], checkpointer=checkpointer)


graph = make_peer()
