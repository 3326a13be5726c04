"""The daemon's settings: a TOML file, then `SGLANG_MATCHER_*` environment variables, then flags.

Each layer overrides the one before it, field by field. Every setting is declared once, as a
field of `Config` (`matcher.settings.setting`): its type, default, words, flag, check and
whether a reload applies it. A value that does not fit gives a `ConfigError` naming the
setting and where the value came from — `--check` turns that into exit code 2 before a unit
or a pod ever starts.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.address import parse_address
from matcher.catalog.schema import SEVERITIES as EVENT_SEVERITIES
from matcher.decode import INPUT_FORMATS
from matcher.settings import (
    BOOL,
    COUNT,
    COUNT_OR_AUTO,
    PATH,
    PATH_OR_UNSET,
    PATHS,
    SECONDS,
    TABLE,
    TEXT,
    TEXT_OR_UNSET,
    TEXTS,
    Flag,
    Setting,
    setting,
    settings_of,
)

# `auto`: `human` when stdout is a terminal, else `json`; `console` is `human`'s older name.
LOG_FORMATS = ("auto", "json", "human", "console")
MIN_SEVERITIES = tuple(reversed(EVENT_SEVERITIES))  # the least severe first
EVENTS_ACCESS = ("local", "any", "off")  # who `/events` serves (`matcher.http`)
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


def label_problem(name: str) -> str | None:
    """Why `name` cannot be a static label name (None: it can)."""
    if not LABEL_NAME.fullmatch(name) or name.startswith("__"):
        return (f"label name {name!r} is not a valid Prometheus label name: use letters, digits "
                "and _, not starting with a digit or with __")
    if name in RESERVED_LABELS:
        return (f"label name {name!r} is one the matcher's own metrics use: choose another "
                f"(reserved: {', '.join(sorted(RESERVED_LABELS))})")
    return None


def _label_names(labels: Mapping[str, str]) -> None:
    for name in labels:
        problem = label_problem(name)
        if problem:
            raise ValueError(problem)


def label_flag(text: str) -> str:
    """`--label NAME=VALUE`, checked as the config checks labels (an invalid or reserved name)."""
    name, sep, _ = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. --label cluster=a)")
    problem = label_problem(name)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def _address(value: str) -> None:

    parse_address(value)


def _above_zero(value: float) -> None:
    if value <= 0:
        raise ValueError("must be above 0")


def _paths_flag(given: list[str]) -> list[str] | None:
    """`watch PATH…`: `-` is standard input, not a path; none given: not set here."""
    paths = [p for p in given if p != "-"]
    return paths or ([] if "-" in given else None)


def _labels_flag(given: list[str] | None) -> dict[str, str] | None:
    return dict(x.split("=", 1) for x in given) if given else None


@dataclass(frozen=True, slots=True)
class Config:
    """Every setting of `watch`. The `doc` of each is its paragraph in docs/configuration.md;
    the flag's `help` its line in `watch --help`."""

    paths: tuple[str, ...] = setting(
        ("/var/log/sglang/*.log",), kind=TEXTS,
        doc="Log files to follow: paths or globs (`*`, `?`, `[…]`, `**`). The globs are "
            "evaluated again at every poll and whenever inotify reports a change, so a file "
            "that appears later is picked up. `-` on the command line reads standard input.",
        flag=Flag((), "log files or globs (default: from config, else /var/log/sglang/*.log); "
                      "- for stdin", metavar="PATH|GLOB", to_setting=_paths_flag))
    exclude: tuple[str, ...] = setting(
        ("*.gz", "*.zst", "*.bz2", "*.xz"), kind=TEXTS,
        doc="File-name globs that are never read, even when a path matches them "
            "(compressed rotations by default).")
    state_dir: Path = setting(
        kind=PATH, factory=default_state_dir, reloadable=False,
        default_words="`$STATE_DIRECTORY` (systemd), else `$XDG_STATE_HOME/sglang-matcher`, "
                      "else `~/.local/state/sglang-matcher`",
        doc="Where read positions are kept (`checkpoints.json`), so a restart reads each line "
            "once.",
        flag=Flag(("--state-dir",), "where read positions are kept", type=Path))
    metrics_addr: str | None = setting(
        None, kind=TEXT_OR_UNSET, check=_address,
        hint="use HOST:PORT, [IPv6]:PORT or :PORT (all interfaces)",
        doc="`HOST:PORT` (`[::1]:PORT` for IPv6, `:PORT` for every interface) for the HTTP "
            "server: `/metrics`, `/healthz`, `/readyz` and `/events?limit=N`. Unset: no "
            "server. See [metrics](metrics.md).",
        flag=Flag(("--metrics-addr",), "serve /metrics and health here", metavar="HOST:PORT"))
    catalogs: tuple[Path, ...] = setting(
        (), kind=PATHS,
        doc="Extra catalog files or directories (repeatable). Their records override built-in "
            "ones with the same `id` or message template. See "
            "[the catalog format](catalog-format.md).",
        flag=Flag(("--catalog",), "extra catalog file or directory (repeatable)",
                  metavar="PATH", action="append", type=Path))
    builtin_catalog: bool = setting(
        True, kind=BOOL,
        doc="Load the catalog shipped with the package. `--no-builtin`: only the `catalogs` "
            "given.",
        flag=Flag(("--no-builtin",), "do not load the built-in sglang catalog",
                  action="store_false"))
    # Which sglang: "auto" (learn it from the log's tracebacks; match against every release
    # until then), "all", one release ("0.5.23"), "installed" or "none" (no generated layer).
    sglang_version: str = setting(
        "auto", kind=TEXT,
        doc="Which sglang wrote the logs: `auto` learns it per log from its tracebacks (every "
            "release matches until then); a release such as `0.5.23` matches only that "
            "release's records and names it on every event; `all` matches every release and "
            "names none; `installed` extracts the records of the sglang importable in this "
            "Python; `none` loads no generated records.",
        flag=Flag(("--sglang-version",), 'which sglang wrote the logs: "auto" (default: '
                  'learned per log), "all", a release such as 0.5.23, "installed" or "none"',
                  metavar="V"))
    input_format: str = setting(
        "auto", kind=TEXT, choices=INPUT_FORMATS,
        doc="How each line is wrapped: `plain` text, Kubernetes `cri` (`/var/log/pods`), "
            "`docker` json-file, or `auto`, judged per file from its first line.",
        flag=Flag(("--input-format",), "how the log is wrapped, as for scan (default auto, "
                  "decided per file)"))
    log_format: str = setting(
        "auto", kind=TEXT, choices=LOG_FORMATS,
        doc="How events are written to standard output: `json` (one object per line, see "
            "[events](events.md)), `human` (what `scan` prints for a failure: class, pattern, "
            "message, where, ranks, what happened, how to fix), or `auto`: `human` when "
            "standard output is a terminal, else `json`. `console` is `human`'s older name.",
        flag=Flag(("--format", "--log-format"), "how events are written to stdout: json (one "
                  "object per line), human (as scan prints them), or auto (default: human on "
                  "a terminal, json otherwise); --input-format is the log's format"))
    min_severity: str = setting(
        "info", kind=TEXT, choices=MIN_SEVERITIES,
        doc="Print, write and send only events of this severity or above (`info`, `warning`, "
            "`error`, `critical`); the metrics count every event whatever it is set to.",
        flag=Flag(("--min-severity",), "print and send only events of this severity or above "
                  "(default info: all); the metrics count every event"))
    from_beginning: bool = setting(
        False, kind=BOOL,
        doc="Read the files present at the very first start from their beginning (otherwise "
            "from their end). Files that appear later are always read from their beginning; "
            "after the first start, the checkpoint decides.",
        flag=Flag(("--from-beginning",), "read files present at first start from their "
                  "beginning", action="store_true"))
    # False: run without checkpoints (nothing read from or written to `state_dir`; every start
    # is a first start). True: `state_dir` must be writable at start, and is locked.
    checkpoints: bool = setting(
        True, kind=BOOL, reloadable=False,
        doc="Keep read positions in `state_dir` (the default). The state dir must then be "
            "writable at start (else exit 2) and is locked: a second daemon on it exits 2 "
            "naming the holder's pid. `false` runs without checkpoints: nothing is read from "
            "or written to `state_dir`, and every start is a first start (lines written while "
            "the daemon was stopped are not read).",
        flag=Flag(("--no-checkpoints",), "run without read positions in the state dir (every "
                  "start a first start); for a state dir that cannot be written",
                  action="store_false"))
    poll_interval: float = setting(
        1.0, kind=SECONDS, check=_above_zero,
        doc="Seconds between polls of the followed files and globs (inotify wakes the daemon "
            "earlier where it works).",
        flag=Flag(("--poll-interval",), "seconds between polls of the followed files and globs "
                  "(default 1; inotify wakes the daemon sooner where it works)",
                  metavar="SECONDS", type=float))
    poll_only: bool = setting(
        False, kind=BOOL,
        doc="Do not use inotify; find changes by polling only (network filesystems, where "
            "inotify says nothing).",
        flag=Flag(("--poll-only",), "no inotify: find changes by polling only (network "
                  "filesystems)", action="store_true"))
    checkpoint_interval: float = setting(
        1.0, kind=SECONDS,
        doc="Seconds between two saves of the read positions. After a SIGKILL, at most this "
            "much reading is delivered again.")
    stop_timeout: float = setting(
        28.0, kind=SECONDS,
        doc="Seconds after SIGTERM or SIGINT by which the daemon has exited, whatever its "
            "outputs do (a stdout nobody reads, a stuck events file or stderr): past it, it "
            "stops where it is, with exit code 3, keeping the last checkpoint (saved after the "
            "events before it were written), so the events not written are told after the "
            "restart. Within Kubernetes' default 30 s grace period; a second signal stops at "
            "once the same way.")
    partial_line_flush: float = setting(
        5.0, kind=SECONDS,
        doc="Seconds a last line without its newline waits before it is read as complete.")
    rotate_wait: float = setting(
        5.0, kind=SECONDS,
        doc="Seconds a rotated-away file is kept open after its last growth (so lines written "
            "to it late are still read), and the time a possible copytruncate copy waits for "
            "its original to shrink.")
    fingerprint_bytes: int = setting(
        1024, kind=COUNT,
        doc="Bytes at the start of a file (and before a checkpointed offset) whose checksum, "
            "with device and inode, identifies the file across rotation.")
    max_line_bytes: int = setting(
        1024 * 1024, kind=COUNT,
        doc="The longest line kept; beyond it the rest of the line is dropped and counted "
            "(`sglang_matcher_lines_truncated_total`).")
    read_chunk_bytes: int = setting(
        1024 * 1024, kind=COUNT,
        doc="Bytes read from one file before the next file gets its turn: smaller is fairer "
            "between files during a backlog, larger catches up faster.")
    journal_units: tuple[str, ...] = setting(
        (), kind=TEXTS,
        doc="systemd units whose journal is followed (through `journalctl -o json`; the cursor "
            "is checkpointed). Repeatable. Where `paths` is set nowhere (no PATH, variable or "
            "file setting), the journal is the only input: the default `paths` are not "
            "followed too.",
        flag=Flag(("--journal-unit",), "follow this systemd unit's journal (repeatable); with "
                  "no PATH given, the journal only", metavar="UNIT", action="append"))
    journal_directory: Path | None = setting(
        None, kind=PATH_OR_UNSET,
        doc="Read the journal from this directory (a copied or remote journal) instead of the "
            "system's.",
        flag=Flag(("--journal-directory",), "read the journal from DIR (a copied or remote "
                  "journal)", metavar="DIR", type=Path))
    journal_from_beginning: bool = setting(
        False, kind=BOOL,
        doc="Read each unit's journal from its beginning at the very first start "
            "(`from_beginning` does so too).")
    webhook_url: str | None = setting(
        None, kind=TEXT_OR_UNSET,
        doc="Also POST each printed event, as JSON, to this `http://` or `https://` URL: a "
            "bounded queue, retried with backoff, never blocking reading. Credentials in the "
            "URL (`https://user:pass@host/path`) are sent as HTTP Basic auth and never printed.",
        flag=Flag(("--webhook-url",), "also POST each event as JSON here", metavar="URL"))
    # Unset: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/logs
    # (sinks/otlp.py, `resolve_endpoint`).
    otlp_endpoint: str | None = setting(
        None, kind=TEXT_OR_UNSET,
        doc="Also send each printed event as an OpenTelemetry log record (OTLP/HTTP protobuf) "
            "to this logs URL, e.g. `http://collector:4318/v1/logs`. Unset: "
            "`OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (used as given), else "
            "`OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/logs` appended.",
        flag=Flag(("--otlp-endpoint",), "also send each event as an OpenTelemetry log record "
                  "(OTLP/HTTP protobuf) to this logs URL, e.g. http://collector:4318/v1/logs",
                  metavar="URL"))
    otlp_headers: Mapping[str, str] = setting(
        kind=TABLE, factory=dict,
        doc="HTTP headers sent with every OTLP request, `NAME=VALUE[,NAME=VALUE…]` (e.g. "
            "`Authorization=Bearer …`); they take precedence over `OTEL_EXPORTER_OTLP_HEADERS` "
            "and `OTEL_EXPORTER_OTLP_LOGS_HEADERS`. Never logged.")
    events_buffer: int = setting(
        1000, kind=COUNT,
        doc="How many of the most recent printed events `/events` keeps in memory (each cut to "
            "32 KiB of JSON, a marker saying so, and at most 32 MiB together: past that the "
            "oldest go first).")
    events_access: str = setting(
        "local", kind=TEXT, choices=EVENTS_ACCESS,
        doc="Who may read `/events` on the `metrics_addr` port: `local` (clients connecting "
            "from this host's loopback, as `curl localhost` and `kubectl port-forward` do), "
            "`any` (every client: put it behind a network policy or an authenticating proxy, "
            "since events carry log text) or `off`. Others get 403; `/metrics`, `/healthz` and "
            "`/readyz` answer every client.",
        flag=Flag(("--events-access",), "who may read /events on the metrics port: local "
                  "(default: clients on this host), any, or off"))
    labels: Mapping[str, str] = setting(
        kind=TABLE, factory=dict, check=_label_names, reloadable=False,
        doc="Static labels on every event and every metric series, `NAME=VALUE` (repeatable "
            "flag; `NAME=VALUE,…` in the environment; a table in the file). A name must be a "
            "Prometheus label name and not one the matcher's own series use.",
        flag=Flag(("--label",), "static label on every event and metric (repeatable)",
                  metavar="NAME=VALUE", action="append", type=label_flag,
                  to_setting=_labels_flag))
    labels_from_env: Mapping[str, str] = setting(
        kind=TABLE, factory=dict, check=_label_names, reloadable=False,
        doc="Labels whose values come from environment variables, `label=VARIABLE,…` (e.g. "
            "`pod=POD_NAME,namespace=POD_NAMESPACE` from the Kubernetes downward API); a "
            "variable that is unset or empty adds no label.")
    redact_patterns: tuple[str, ...] = setting(
        (), kind=TEXTS,
        doc="Extra regular expressions whose matches are masked in everything emitted, after "
            "the built-in redaction of keys, tokens and passwords; a named group "
            "`(?P<secret>…)` masks only that part.")
    aggregate_window: float = setting(
        5.0, kind=SECONDS,
        doc="Seconds within which the same error printed by several ranks is one event "
            "(listing the ranks and their count), and a consequence is attached to the failure "
            "it follows.")
    early_events: bool = setting(
        True, kind=BOOL,
        doc="Emit a failure as soon as every rank the log has shown printed it, or "
            "`rank_grace` after its first rank did, instead of at the end of "
            "`aggregate_window`; ranks printing it later within the window fold into the event "
            "already sent. Off: wait for the window and list every rank, as `scan` does.")
    rank_grace: float = setting(
        0.1, kind=SECONDS,
        doc="Seconds the other ranks get to print the same error before an early event is "
            "emitted.")
    repeat_interval: float = setting(
        60.0, kind=SECONDS,
        doc="A repeated failure (the same record with the same captured values, in one file or "
            "journal) is printed once per this many seconds; every repeat is counted, and the "
            "next printed event says how many were held back (`suppressed`). Another value or "
            "another source is printed at once. `0` prints every one.")
    events_file: Path | None = setting(
        None, kind=PATH_OR_UNSET,
        doc="Also append every printed event, as a JSON line, to this file. It may be rotated "
            "by logrotate with `create` (the next event goes to the new file; a SIGHUP in "
            "`postrotate` switches at once) or `copytruncate`; deleted (`rm`), it is made again "
            "at the next event. The daemon never reads it, even where `paths` match it.")
    max_open_files: int | None = setting(
        None, kind=COUNT_OR_AUTO, default_words="`auto`",
        doc="Files kept open at once; beyond it the idlest are closed (after a checkpoint) and "
            "reopened by identity when they grow. `auto`: the descriptor limit, raised at start "
            "from the soft to the hard limit, less what the daemon and its HTTP server need.")
    max_walk_entries: int = setting(
        200_000, kind=COUNT,
        doc="Directory entries one walk of the globs may list; beyond it the walk stops, "
            "`discovery_capped` is logged and the files already followed are kept.")

    def static_labels(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Configured labels plus those read from the environment (pod, namespace, node)."""
        env = os.environ if environ is None else environ
        out = dict(self.labels)
        for label, var in self.labels_from_env.items():
            if env.get(var):
                out[label] = env[var]
        return out


SETTINGS: tuple[Setting, ...] = settings_of(Config)
BY_NAME = {s.name: s for s in SETTINGS}
# Settings a reload cannot apply: the state dir and its use are claimed at start, and every
# series carries the labels by name (Prometheus cannot rename them in place).
NOT_RELOADABLE = tuple(s.name for s in SETTINGS if not s.reloadable)

# `watch` options that are not settings: where the settings are read from, and what to do.
CONFIG_FILE_FLAG = Flag(("--config",), "TOML config file", metavar="FILE", type=Path,
                        doc="read settings from this TOML file first (the environment "
                            "overrides it, flags override both)")
CHECK_FLAG = Flag(("--check",), "validate config and catalog, then exit 0 (ok) or 2",
                  action="store_true",
                  doc="build everything `watch` would (catalog, port, files), report problems, "
                      "and exit 0 or 2 without reading any log")


def _coerce(spec: Setting, value: Any, origin: str) -> Any:
    """A TOML, environment or flag value as the setting's type, or why it can't be."""
    try:
        return spec.kind.parse(value)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{origin}: setting '{spec.name}': {e}") from e


def validate(config: Config) -> Config:
    """`config`, or the `ConfigError` of its first setting whose value cannot be used."""
    for spec in SETTINGS:
        problem = spec.problem(getattr(config, spec.name))
        if problem:
            raise ConfigError(f"setting '{spec.name}': {problem}", spec.hint)
    return config


def _file_values(file: Path) -> dict[str, Any]:
    import tomllib  # only `watch --config` reads a file: the other commands do without

    try:
        doc = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{file}: cannot read: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{file}: not valid TOML: {e}") from e
    values = {}
    for key, value in doc.items():
        if key not in BY_NAME:
            close = difflib.get_close_matches(key, BY_NAME, n=1)
            raise ConfigError(f"{file}: unknown setting '{key}' "
                              + (f"(did you mean '{close[0]}'?)" if close else
                                 f"(known: {', '.join(sorted(BY_NAME))})"))
        values[key] = _coerce(BY_NAME[key], value, str(file))
    return values


def load_config(
    *,
    file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Config:
    """File, then environment, then flags (None-valued flags are 'not given')."""
    values: dict[str, Any] = _file_values(file) if file is not None else {}
    env = os.environ if environ is None else environ
    for spec in SETTINGS:
        if spec.env in env:
            values[spec.name] = _coerce(spec, env[spec.env], f"environment {spec.env}")
    for name, value in (flags or {}).items():
        if value is not None:
            values[name] = _coerce(BY_NAME[name], value, "command line")
    if values.get("journal_units") and "paths" not in values:
        # Journal units and no path from anywhere: the journal only, not also the default log
        # files (on a journal-only host they match nothing: SglangMatcherFollowingNothing).
        values["paths"] = ()
    return validate(Config(**values))
