"""What a setting of `watch` is, declared once: its type, default, words, flag, environment
variable, check and whether a reload applies it.

Each field of `matcher.config.Config` is declared with `setting(...)`; `settings_of(Config)`
reads those declarations back as `Setting`s. From them come the parsing of the TOML file, the
environment and the flags (`Kind.parse`, chosen by the setting's type, never by its name), the
checks after parsing, `watch`'s flags (`Flag.add_to`, `Flag.value`), the settings a reload
leaves alone, and `docs/configuration.md` (`matcher.reference`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_PREFIX = "SGLANG_MATCHER_"
SETTING = "setting"  # the key of a field's metadata that holds its declaration


@dataclass(frozen=True, slots=True)
class Kind:
    """A setting's type: the Python type `Config` holds (`type`), what the docs call it
    (`word`), and how a TOML value, an environment string or a flag's value becomes it
    (`parse`, which raises ValueError or TypeError with what is wrong)."""

    type: Any
    word: str
    parse: Callable[[Any], Any]


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [v for v in value.replace(",", "\n").split("\n") if v.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ValueError("expected a list")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("1", "true", "yes", "on"):
        return True
    if str(value).lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _count(value: Any) -> int:
    if isinstance(value, (bool, float)):
        raise ValueError(f"expected a whole number, got {value!r}")
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a whole number, got {value!r}") from None
    if n <= 0:
        raise ValueError(f"must be a positive whole number, got {n}")
    return n


def _count_or_auto(value: Any) -> int | None:
    if value is None or str(value).lower() in ("", "auto"):
        return None
    return _count(value)


def _seconds(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    try:
        x = float(str(value).strip())
    except ValueError:
        raise ValueError(f"expected a number (of seconds), got {value!r}") from None
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"must be a finite number, 0 or more, got {value!r}")
    return x


def _table(value: Any) -> dict[str, str]:
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


def _unset_if_empty(then: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value in (None, "") else then(value)


TEXT = Kind(str, "string", str)
TEXT_OR_UNSET = Kind(str | None, "string", _unset_if_empty(str))
PATH = Kind(Path, "path", lambda value: Path(str(value)))
PATH_OR_UNSET = Kind(Path | None, "path", _unset_if_empty(lambda value: Path(str(value))))
BOOL = Kind(bool, "boolean", _bool)
COUNT = Kind(int, "integer", _count)
COUNT_OR_AUTO = Kind(int | None, "integer or `auto`", _count_or_auto)
SECONDS = Kind(float, "seconds", _seconds)
TEXTS = Kind(tuple[str, ...], "list of strings",
             lambda value: tuple(str(v) for v in _as_list(value)))
PATHS = Kind(tuple[Path, ...], "list of paths",
             lambda value: tuple(Path(str(v)) for v in _as_list(value)))
TABLE = Kind(Mapping[str, str], "table (`NAME=VALUE,…`)", _table)


@dataclass(frozen=True, slots=True)
class Flag:
    """A command-line option of `watch` (or its positional argument: no `options`).

    `action`: `store` (a value), `append` (repeatable), `store_true` / `store_false` (no
    value; what it sets the setting to). `to_setting` turns what argparse parsed into the
    setting's value; `doc` is said of an option that is not a setting (`--config`)."""

    options: tuple[str, ...]
    help: str
    metavar: str | None = None
    action: str = "store"
    type: Callable[[str], Any] | None = None
    to_setting: Callable[[Any], Any] | None = None
    doc: str = ""

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append")

    def add_to(self, parser: argparse.ArgumentParser, dest: str,
               choices: tuple[str, ...] = ()) -> None:
        """This flag on `parser`, its value kept under `dest`; None when it is not given."""
        if not self.options:
            parser.add_argument(dest, nargs="*", metavar=self.metavar, help=self.help)
            return
        kwargs: dict[str, Any] = {"dest": dest, "action": self.action, "default": None,
                                  "help": self.help}
        if self.takes_value:
            kwargs.update(metavar=self.metavar, type=self.type, choices=choices or None)
        parser.add_argument(*self.options, **kwargs)

    def value(self, parsed: Any) -> Any:
        """The setting's value from what argparse parsed (None: not given)."""
        if parsed is not None and self.to_setting is not None:
            return self.to_setting(parsed)
        return parsed

    def shown(self, dest: str, choices: tuple[str, ...] = ()) -> str:
        """How the docs write it: `--log-format auto|json|…`, `PATH|GLOB …`, other spellings
        first (`--format`, `--log-format …`)."""
        if not self.options:
            return f"{self.metavar or dest} …"
        option = max(self.options, key=len)
        shown = option
        if self.takes_value:
            shown += " " + ("|".join(choices) if choices else self.metavar or dest.upper())
        return "`, `".join([*sorted(set(self.options) - {option}), shown])


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: everything about it, in one place.

    `check` raises ValueError when a parsed value cannot be used (its message and `hint` are
    the `ConfigError`'s); `choices`, when given, are the only values; `default_words` says a
    default that depends on the machine; `reloadable`: a SIGHUP applies a change to it."""

    name: str
    kind: Kind
    doc: str
    default: Any = dataclasses.MISSING
    factory: Callable[[], Any] | None = None
    flag: Flag | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[Any], None] | None = None
    hint: str = ""
    reloadable: bool = True
    default_words: str = ""

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def default_value(self) -> Any:
        return self.factory() if self.factory is not None else self.default

    def problem(self, value: Any) -> str | None:
        """What is wrong with a parsed value (None: nothing)."""
        if self.choices and value not in self.choices:
            return f"{value!r} is not one of {', '.join(self.choices)}"
        if self.check is not None and value is not None:
            try:
                self.check(value)
            except ValueError as e:
                return str(e)
        return None


def setting(default: Any = dataclasses.MISSING, *, kind: Kind, doc: str,
            factory: Callable[[], Any] | None = None, flag: Flag | None = None,
            choices: tuple[str, ...] = (), check: Callable[[Any], None] | None = None,
            hint: str = "", reloadable: bool = True, default_words: str = "") -> Any:
    """A `Config` field declared as a setting (its name is the field's)."""
    spec = Setting("", kind, doc, default, factory, flag, choices, check, hint, reloadable,
                   default_words)
    metadata = {SETTING: spec}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def settings_of(cls: type) -> tuple[Setting, ...]:
    """The settings `cls`'s fields declare, in their order."""
    return tuple(dataclasses.replace(f.metadata[SETTING], name=f.name)
                 for f in dataclasses.fields(cls))
