"""The offline model: a deterministic, rule-based stand-in for an LLM, so kb-agent runs with no endpoint.

Only the model factory (``models.get_chat_model``) and tests reach into this package; nothing else decides
anything with its rules. What it can do — arithmetic, dates, the knowledge-base, memory and feedback tools
on recognisable requests — is spelled out in its modules.
"""

from __future__ import annotations

from models.offline.model import OFFLINE_MODEL_NAME, OfflineChatModel

__all__ = ["OFFLINE_MODEL_NAME", "OfflineChatModel"]
