"""Where the deployment's settings come from, for ``nodes.settings.Settings`` (pydantic-settings):
``KB_AGENT_*`` environment variables (typed, with errors that name the variable) and the operator's
optional TOML file (``KB_AGENT_CONFIG``), each remembering which settings it supplied so that
``kb-agent config`` can say where every value in force came from."""

from __future__ import annotations

import contextvars
import difflib
import functools
import os
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices
from pydantic_settings import PydanticBaseSettingsSource, TomlConfigSettingsSource

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo
    from pydantic_settings import BaseSettings

ENV_PREFIX = "KB_AGENT_"
CONFIG_FILE_ENV = "KB_AGENT_CONFIG"
T = TypeVar("T")

# ``KB_AGENT_*`` variables that are not settings: secrets and server wiring read where they are used.
# Any other ``KB_AGENT_*`` variable is a typo or a setting that no longer exists, and is refused.
OTHER_VARIABLES = frozenset(
    {
        CONFIG_FILE_ENV,
        "KB_AGENT_API_KEY",  # the model endpoint's key, kept out of the settings so it is never shown
        "KB_AGENT_API_TOKENS",  # the server's bearer tokens
        "KB_AGENT_REDIS_URL",  # the server's run queue across workers
        "KB_AGENT_SERVE_SELF_CHECK",  # set by `kb-agent serve` for its workers
        "KB_AGENT_SERVE_REPLICA_ID",  # set by `kb-agent serve` for its workers
    }
)

DEFAULT, FILE, ENVIRONMENT, ARGUMENT = "default", "file", "environment", "argument"

# The settings each source supplied while one ``Settings`` is being built (sources are called inside
# pydantic-settings, which keeps no record of which of them a value came from).
supplied: contextvars.ContextVar[dict[str, set[str]] | None] = contextvars.ContextVar(
    "kb_agent_settings_supplied", default=None
)


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the variable and what to put in it."""


def env_name(name: str, info: FieldInfo) -> str:
    """The variable of a field: an upper-case validation alias (``KB_AGENT_HOME``), else the prefixed name."""
    alias = info.validation_alias
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    for choice in choices:
        if isinstance(choice, str) and choice.isupper():
            return choice
    return ENV_PREFIX + name.upper()


@functools.cache
def setting_fields(cls: type[BaseSettings]) -> tuple[tuple[str, str, Any, Any], ...]:
    """(field, env variable, default, type) per field, computed once: every run resolves its settings."""
    return tuple(
        (name, env_name(name, info), info.default, info.annotation) for name, info in cls.model_fields.items()
    )


def coerce(raw: str, typ: Any, env: str) -> Any:
    """Turn an environment string into the field's type, or say which variable is wrong."""
    try:
        if typ is bool:
            if raw.strip().lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.strip().lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if typ in (int, float):
            return typ(raw)
    except ValueError:
        raise ConfigError(f"{env}={raw!r} is not a valid {typ.__name__}") from None
    return raw


def _record(source: str, names: Any) -> None:
    seen = supplied.get()
    if seen is not None:
        seen[source] = set(names)


class EnvSource(PydanticBaseSettingsSource):
    """``KB_AGENT_<FIELD>`` per field; only the settings' own variables are read, so the other
    ``KB_AGENT_*`` variables (API key, server tokens, test switches) are never refused. An empty variable
    of a non-string setting means unset."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads every field at once

    def __call__(self) -> dict[str, Any]:
        environ = os.environ
        values: dict[str, Any] = {}
        for name, env, _default, typ in setting_fields(self.settings_cls):
            raw = environ.get(env)
            if raw is None or (typ is not str and not raw.strip()):
                continue
            values[name] = coerce(raw, typ, env)
        _record(ENVIRONMENT, values)
        return values


@functools.cache
def _read_config_file(cls: type, path: str, mtime: float) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}={path!r} cannot be read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{CONFIG_FILE_ENV}={path!r} is not valid TOML: {exc}") from None
    data = data.get("kb_agent", data)  # a [kb_agent] table, or settings at the top level
    types = {name: typ for name, _env, _default, typ in setting_fields(cls)}
    for key, value in data.items():
        if key not in types:
            raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: unknown setting {key!r}")
        typ = types[key]
        ok = isinstance(value, typ) if typ is not float else isinstance(value, int | float)
        if not ok or (typ in (int, float) and isinstance(value, bool)):
            raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: {key} must be a {typ.__name__}, got {value!r:.60}")
    return {k: (float(v) if types[k] is float else v) for k, v in data.items()}


class FileSource(TomlConfigSettingsSource):
    """The TOML file ``KB_AGENT_CONFIG`` names at construction time (none: nothing). Its keys are field
    names, at the top level or under ``[kb_agent]``; the parsed file is kept while its mtime is unchanged."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        raw = os.environ.get(CONFIG_FILE_ENV, "")
        path = Path(raw).expanduser() if raw.strip() else None
        if path is not None and not path.is_file():
            raise ConfigError(f"{CONFIG_FILE_ENV}={raw!r}: no such file")
        self._settings_type = settings_cls  # _read_file runs inside the base class's __init__
        super().__init__(settings_cls, toml_file=path)
        _record(FILE, self.toml_data)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        path = str(file_path)
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: no such file") from None
        return dict(_read_config_file(self._settings_type, path, mtime))


def masked(value: Any) -> Any:
    """A URL's password replaced by ``***`` (``postgresql://kb:***@db/kb``); anything else as it is."""
    if not isinstance(value, str) or "@" not in value or "://" not in value:
        return value
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return value
    if not password:
        return value
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


_defaults: dict[type, tuple[tuple[Any, ...], Any]] = {}


def refuse_unknown(cls: type, environ: Any, also: frozenset[str] = frozenset()) -> None:
    """A ``KB_AGENT_*`` variable that names no setting would be silently ignored: refuse it by name.
    ``also`` are variables this deployment's settings name (the one holding the API key)."""
    known = {env for _, env, _, _ in setting_fields(cls)} | also
    for name in environ:
        if name.startswith(ENV_PREFIX) and name not in known and name not in OTHER_VARIABLES:
            suffixes = sorted(v.removeprefix(ENV_PREFIX) for v in known | OTHER_VARIABLES)
            close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1, cutoff=0.75)
            hint = f" (did you mean {ENV_PREFIX}{close[0]}?)" if close else ""
            raise ConfigError(f"{name} (environment): unknown setting{hint}")


@functools.cache
def _env_keys(cls: type) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    names = (*(env for _, env, _, _ in setting_fields(cls)), CONFIG_FILE_ENV)
    return names, tuple(os.fsencode(name) for name in names)


def _env_snapshot(cls: type) -> tuple[Any, ...]:
    """The values of every setting's variable: read from the raw environment (bytes) when the platform
    exposes it, since this runs per graph invocation and ``os.environ.get`` decodes each key and value."""
    names, raw_names = _env_keys(cls)
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict) and os.name == "posix":
        return tuple(map(raw.get, raw_names))
    return tuple(map(os.environ.get, names))


def default_settings(cls: type[T]) -> T:
    """``cls()`` for runs given no context, reused while the environment it was read from is unchanged."""
    snapshot = _env_snapshot(cls)
    cached = _defaults.get(cls)
    if cached is None or cached[0] != snapshot:
        cached = (snapshot, cls())
        _defaults[cls] = cached
    return cached[1]
