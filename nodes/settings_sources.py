"""Where the deployment's settings come from: ``KB_AGENT_*`` environment variables (typed, with errors
that name the variable) and the operator's optional TOML file (``KB_AGENT_CONFIG``), read once and
re-read only when a variable changes."""

from __future__ import annotations

import functools
import os
import tomllib
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

ENV_PREFIX = "KB_AGENT_"
CONFIG_FILE_ENV = "KB_AGENT_CONFIG"
T = TypeVar("T")


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the variable and what to put in it."""


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
    known = {f.name: f for f in fields(cls)}
    hints = field_types(cls)
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: unknown setting {key!r}")
        typ = hints[key]
        ok = isinstance(value, typ) if typ is not float else isinstance(value, int | float)
        if not ok or (typ is int and isinstance(value, bool)):
            raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: {key} must be a {typ.__name__}, got {value!r:.60}")
    return {k: (float(v) if hints[k] is float else v) for k, v in data.items()}


def config_file(cls: type, path: str) -> dict[str, Any]:
    """Settings from the operator's TOML file (field names as keys); empty when none is named."""
    if not path.strip():
        return {}
    target = Path(path).expanduser()
    try:
        mtime = target.stat().st_mtime
    except OSError:
        raise ConfigError(f"{CONFIG_FILE_ENV}={path!r}: no such file") from None
    return _read_config_file(cls, str(target), mtime)


def env_name(f: Any) -> str:
    return f.metadata.get("env") or ENV_PREFIX + f.name.upper()


def coerce(raw: str, typ: Any, env: str) -> Any:
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
def field_types(cls: type) -> dict[str, Any]:
    """Resolved field types, computed once per class (``get_type_hints`` is slow and runs per node)."""
    return typing.get_type_hints(cls)


@functools.cache
def setting_fields(cls: type) -> tuple[tuple[str, str, Any, Any], ...]:
    """(field, env variable, default, type) per field, computed once: every run resolves its settings."""
    hints = field_types(cls)
    return tuple((f.name, env_name(f), f.default, hints[f.name]) for f in fields(cls))


_defaults: dict[type, tuple[tuple[Any, ...], Any]] = {}


@functools.cache
def _env_keys(cls: type) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    names = (*(env for _, env, _, _ in setting_fields(cls)), CONFIG_FILE_ENV)
    return names, tuple(os.fsencode(name) for name in names)


def _env_snapshot(cls: type) -> tuple[Any, ...]:
    """The values of every setting's variable: read from the raw environment (bytes) when the platform
    exposes it, since this runs in every node and ``os.environ.get`` decodes each key and value."""
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
