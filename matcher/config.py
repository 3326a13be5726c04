"""The daemon's settings: a TOML file, then `SGLANG_MATCHER_*` environment variables, then flags.

Each layer overrides the one before it, field by field. Every field has a type and a default
here, and a value that does not fit gives a `ConfigError` naming the field and where the value
came from — `--check` turns that into exit code 2 before a unit or a pod ever starts.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_PREFIX = "SGLANG_MATCHER_"
INPUT_FORMATS = ("auto", "plain", "cri", "docker")
# `auto`: `human` when stdout is a terminal, else `json`; `console` is `human`'s older name.
LOG_FORMATS = ("auto", "json", "human", "console")
SEVERITIES = ("info", "warning", "error", "critical")
EVENTS_ACCESS = ("local", "any", "off")  # who `/events` serves (matcher.http)
# Label names the daemon's own series use (sinks/metrics.py, telemetry.py), and the ones
# Prometheus gives a meaning (histogram buckets, summary quantiles): a static label of one of
# these names would clash with them.
RESERVED_LABELS = frozenset({
    "pattern_id", "error_class", "severity", "layer", "version", "catalog_version",
    "source", "result", "stage", "error_type", "reason", "sink", "le", "quantile",
    "summary", "fix", "doc_url",  # sglang_error_pattern_info's words of a failure
})
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ConfigError(Exception):
    """A setting has a value that cannot be used; the message names it and its origin, the
    hint (when there is one) what to do. Printed as one line, exit code 2."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} — {self.hint}" if self.hint else self.message


def default_state_dir() -> Path:
    """systemd's `StateDirectory=`, else XDG state home, else ~/.local/state."""
    if os.environ.get("STATE_DIRECTORY"):
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "sglang-matcher"


@dataclass(frozen=True, slots=True)
class Config:
    paths: tuple[str, ...] = ("/var/log/sglang/*.log",)
    exclude: tuple[str, ...] = ("*.gz", "*.zst", "*.bz2", "*.xz")
    state_dir: Path = field(default_factory=default_state_dir)
    metrics_addr: str | None = None
    catalogs: tuple[Path, ...] = ()
    builtin_catalog: bool = True
    # Which sglang: "auto" (learn it from the log's tracebacks; match against every release
    # until then), "all", one release ("0.5.23"), "installed" or "none" (no generated layer).
    sglang_version: str = "auto"
    input_format: str = "auto"
    log_format: str = "auto"
    min_severity: str = "info"
    from_beginning: bool = False
    # false: run without checkpoints (nothing read from or written to `state_dir`; every start
    # is a first start). True: `state_dir` must be writable at start, and is locked.
    checkpoints: bool = True
    poll_interval: float = 1.0
    poll_only: bool = False
    checkpoint_interval: float = 1.0
    # SIGTERM/SIGINT: the daemon is gone this many seconds later, whatever its outputs do.
    stop_timeout: float = 28.0
    partial_line_flush: float = 5.0
    rotate_wait: float = 5.0
    fingerprint_bytes: int = 1024
    max_line_bytes: int = 1024 * 1024
    read_chunk_bytes: int = 1024 * 1024
    journal_units: tuple[str, ...] = ()
    journal_directory: Path | None = None
    journal_from_beginning: bool = False
    webhook_url: str | None = None
    # OpenTelemetry logs (OTLP/HTTP protobuf): the full logs URL (http://collector:4318/v1/logs).
    # Unset: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs
    # (sinks/otlp.py, `resolve_endpoint`). Headers (auth) over OTEL_EXPORTER_OTLP_HEADERS.
    otlp_endpoint: str | None = None
    otlp_headers: Mapping[str, str] = field(default_factory=dict)
    events_buffer: int = 1000
    # Who may read `/events` (log text): "local" (loopback peers), "any", or "off".
    events_access: str = "local"
    labels: Mapping[str, str] = field(default_factory=dict)
    labels_from_env: Mapping[str, str] = field(default_factory=dict)
    redact_patterns: tuple[str, ...] = ()
    aggregate_window: float = 5.0
    # Emit a failure once every rank the log has shown reported it, or `rank_grace` seconds after
    # its first rank did — not at the window's end.
    early_events: bool = True
    rank_grace: float = 0.1
    repeat_interval: float = 60.0
    events_file: Path | None = None
    # Files kept open at once; beyond it the idlest are closed and reopened by identity when
    # they grow. None: what the descriptor limit allows after the daemon's own reserve.
    max_open_files: int | None = None
    max_walk_entries: int = 200_000  # directory entries one discovery walk may list

    def static_labels(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Configured labels plus those read from the environment (pod, namespace, node)."""
        env = os.environ if environ is None else environ
        out = dict(self.labels)
        for label, var in self.labels_from_env.items():
            if env.get(var):
                out[label] = env[var]
        return out


_FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def label_problem(name: str) -> str | None:
    """Why `name` cannot be a static label name (None: it can)."""
    if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
        return (f"label name {name!r} is not a valid Prometheus label name: use letters, digits "
                "and _, not starting with a digit or with __")
    if name in RESERVED_LABELS:
        return (f"label name {name!r} is one the matcher's own metrics use: choose another "
                f"(reserved: {', '.join(sorted(RESERVED_LABELS))})")
    return None


def _coerce(name: str, value: Any, origin: str) -> Any:
    """Turn a TOML, env or flag value into the field's type, or say why it can't be."""
    f = _FIELDS[name]
    kind = str(f.type)
    where = f"{origin}: setting '{name}'"
    try:
        if kind.startswith("tuple[Path"):
            items = _as_list(value)
            return tuple(Path(str(v)) for v in items)
        if kind.startswith("tuple[str"):
            return tuple(str(v) for v in _as_list(value))
        if kind == "Path":
            return Path(str(value))
        if kind == "Path | None":
            return None if value in (None, "") else Path(str(value))
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("1", "true", "yes", "on"):
                return True
            if str(value).lower() in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(f"expected true or false, got {value!r}")
        if kind == "int | None" and (value is None or str(value).lower() in ("", "auto")):
            return None
        if kind in ("int", "int | None"):
            if isinstance(value, (bool, float)):
                raise ValueError(f"expected a whole number, got {value!r}")
            try:
                n = int(str(value).strip())
            except ValueError:
                raise ValueError(f"expected a whole number, got {value!r}") from None
            if n <= 0:
                raise ValueError(f"must be a positive whole number, got {n}")
            return n
        if kind == "float":
            if isinstance(value, bool):
                raise ValueError(f"expected a number, got {value!r}")
            try:
                x = float(str(value).strip())
            except ValueError:
                raise ValueError(f"expected a number (of seconds), got {value!r}") from None
            if not math.isfinite(x) or x < 0:
                raise ValueError(f"must be a finite number, 0 or more, got {value!r}")
            return x
        if kind.startswith("Mapping"):
            if isinstance(value, str):
                items = [item.strip() for item in value.split(",") if item.strip()]
                bad = [item for item in items if "=" not in item or item.startswith("=")]
                if bad:
                    raise ValueError(f"{bad[0]!r} is not NAME=VALUE (the form is "
                                     "NAME=VALUE[,NAME=VALUE…])")
                value = dict(item.split("=", 1) for item in items)
            if not isinstance(value, Mapping):
                raise ValueError("expected a table of names to strings")
            for k, v in value.items():
                if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                    raise ValueError(f"{k!r}: expected a string value, got {v!r}")
            return {str(k).strip(): str(v) for k, v in value.items()}
        if kind == "str | None":
            return None if value in (None, "") else str(value)
        if kind == "str":
            return str(value)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from e
    raise ConfigError(f"{where}: unsupported type {kind}")  # pragma: no cover


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [v for v in value.replace(",", "\n").split("\n") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError("expected a list")


def _validate(cfg: Config) -> Config:
    if cfg.input_format not in INPUT_FORMATS:
        raise ConfigError(f"setting 'input_format': {cfg.input_format!r} is not one of "
                          f"{', '.join(INPUT_FORMATS)}")
    if cfg.log_format not in LOG_FORMATS:
        raise ConfigError(f"setting 'log_format': {cfg.log_format!r} is not one of "
                          f"{', '.join(LOG_FORMATS)}")
    if cfg.min_severity not in SEVERITIES:
        raise ConfigError(f"setting 'min_severity': {cfg.min_severity!r} is not one of "
                          f"{', '.join(SEVERITIES)}")
    if cfg.events_access not in EVENTS_ACCESS:
        raise ConfigError(f"setting 'events_access': {cfg.events_access!r} is not one of "
                          f"{', '.join(EVENTS_ACCESS)}")
    if cfg.events_buffer < 1:
        raise ConfigError("setting 'events_buffer': must be at least 1")
    if cfg.metrics_addr is not None:
        _host, sep, port = cfg.metrics_addr.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"setting 'metrics_addr': {cfg.metrics_addr!r} is not HOST:PORT")
    if cfg.poll_interval <= 0:
        raise ConfigError("setting 'poll_interval': must be above 0")
    for setting, names in (("labels", cfg.labels), ("labels_from_env", cfg.labels_from_env)):
        for name in names:
            problem = label_problem(name)
            if problem:
                raise ConfigError(f"setting '{setting}': {problem}")
    return cfg


def load_config(
    *,
    file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Config:
    """File, then environment, then flags (None-valued flags are 'not given')."""
    values: dict[str, Any] = {}
    if file is not None:
        try:
            doc = tomllib.loads(file.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"{file}: cannot read: {e.strerror}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{file}: not valid TOML: {e}") from e
        for key, value in doc.items():
            if key not in _FIELDS:
                close = difflib.get_close_matches(key, _FIELDS, n=1)
                raise ConfigError(f"{file}: unknown setting '{key}' "
                                  + (f"(did you mean '{close[0]}'?)" if close else
                                     f"(known: {', '.join(sorted(_FIELDS))})"))
            values[key] = _coerce(key, value, str(file))
    env = os.environ if environ is None else environ
    for name in _FIELDS:
        var = ENV_PREFIX + name.upper()
        if var in env:
            values[name] = _coerce(name, env[var], f"environment {var}")
    for name, value in (flags or {}).items():
        if value is not None:
            values[name] = _coerce(name, value, "command line")
    if values.get("journal_units") and "paths" not in values:
        # Journal units and no path from anywhere: the journal only, not also the default log
        # files (on a journal-only host they match nothing: SglangMatcherFollowingNothing).
        values["paths"] = ()
    return _validate(Config(**values))
