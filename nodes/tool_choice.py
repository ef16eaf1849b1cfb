"""Which tools the model is offered this round: the ones the caller may use, searched when there are many.

A tool the caller's roles do not permit is never offered (the executor refuses it anyway, but offering it
would only invite a denied call). When more than ``tool_candidates`` searchable tools remain (tools marked
``always_on`` — the built-ins — are always bound and not counted), only the best matches for the question
are bound, plus those the model found with ``find_tools`` earlier in the turn; see
:mod:`tools.tool_search`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nodes.conversation import current_question
from nodes.settings import Settings
from stores.embeddings import EmbedderError, embedder_for
from stores.vector_cache import CachedEmbedder
from tools.permissions import grant_for
from tools.registry import ToolContext, ToolRegistry, ToolSpec
from tools.tool_search import FIND_TOOLS, ToolSearch, find_tools_spec, loaded_from_messages, select_tools

log = logging.getLogger("kb_agent.tools")

_lock = threading.Lock()
_indexes: dict[tuple[int, tuple[str, ...], str], ToolSearch] = {}


def tool_index(registry: ToolRegistry, ctx: Settings) -> ToolSearch:
    """The search index of ``registry`` (built once per catalog and embedder; vectors cached on disk)."""
    names = tuple(spec.name for spec in registry if spec.name != FIND_TOOLS)
    key = (id(registry), names, ctx.tool_search_embedder)
    with _lock:
        found = _indexes.get(key)
    if found is not None:
        return found
    specs = [spec for spec in registry if spec.name != FIND_TOOLS]
    embedder = None
    if ctx.tool_search_embedder:
        try:
            base = embedder_for(ctx, ctx.tool_search_embedder)
            embedder = CachedEmbedder(base, Path(ctx.data_dir) / "cache" / "tool-vectors.sqlite")
        except (EmbedderError, OSError) as exc:
            log.warning("tool search falls back to keywords only: %s", exc)
    index = ToolSearch(specs, embedder=embedder)
    with _lock:
        for stale in [k for k in _indexes if k[0] == key[0]]:
            del _indexes[stale]
        _indexes[key] = index
    return index


def _needs_search(specs: Sequence[ToolSpec], k: int) -> bool:
    return sum(not spec.always_on and spec.name != FIND_TOOLS for spec in specs) > k


def add_find_tools(registry: ToolRegistry, k: int = 8) -> None:
    """Register the ``find_tools`` meta-tool when the catalog is too big to bind whole."""
    if FIND_TOOLS in registry or not _needs_search(list(registry), k):
        return

    def index_for(tool_context: ToolContext) -> ToolSearch:
        settings = tool_context.settings
        if not isinstance(settings, Settings):  # no run behind the call: keywords only, nothing read from the environment
            return ToolSearch([spec for spec in registry if spec.name != FIND_TOOLS], embedder=None)
        return tool_index(registry, settings)

    def allowed(tool_context: ToolContext) -> Any:
        permits = grant_for(tool_context.settings, tool_context.user_id).permits
        return lambda spec: permits(spec) and not spec.unavailable_for(tool_context.settings)

    registry.register(find_tools_spec(index_for, allowed=allowed))


def offered_tools(registry: ToolRegistry, messages: Sequence[Any], ctx: Settings) -> list[ToolSpec]:
    """The tools bound to the model for this round, in registration order."""
    grant = grant_for(ctx)
    permitted = [spec for spec in registry if grant.permits(spec) and not spec.unavailable_for(ctx)]
    if not _needs_search(permitted, ctx.tool_candidates):
        return [spec for spec in permitted if spec.name != FIND_TOOLS]
    question, _ = current_question(list(messages))
    return select_tools(
        permitted,
        question,
        k=ctx.tool_candidates,
        loaded=loaded_from_messages(list(messages)),
        search=tool_index(registry, ctx),
    )


def offered_definitions(
    registry: ToolRegistry, messages: Sequence[Any], ctx: Settings
) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` entries of :func:`offered_tools` (also what the budget counts)."""
    return [spec.definition() for spec in offered_tools(registry, messages, ctx)]
