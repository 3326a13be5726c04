"""A bare `KeyError: '<model_type>'`: the installed transformers (or sglang) does not know the
model type config.json declares — and which release does, decided per event.

transformers' `AutoConfig.from_pretrained` looks config.json's `model_type` up in its
`CONFIG_MAPPING`; a type the installed release lacks raises `KeyError: 'gemma3'` (releases before
4.37 stop there; later ones raise `ValueError: … does not recognize this architecture` from it,
and the KeyError's own traceback is printed above). sglang registers configurations of its own
with `AutoConfig.register` (`_CONFIG_REGISTRY`), so a type only sglang knows fails the same way
on an sglang release older than its registration.

The vocabulary is closed: the keys of `CONFIG_MAPPING_NAMES` across transformers releases and
the names of sglang's registry. A key that is one of them and was added after the releases
sglang ever ran with (`SINCE`) is taken for this failure; keys every such release knows
(`llama`, `bert`) are not — their KeyError comes from some other lookup.

    T <model_type> <first transformers release that knows it>
    S <model_type> <first sglang release shipping its configuration class> <class>

(`model-types.tsv` beside the catalog, made by `python -m matcher.catalog.model_types`.) It is
read the first time an event needs it. The answer: the transformers release that knows the
type; the first sglang release whose pin includes it (`sglang-pins.tsv`); or, when the log's
release is known and its pin already has it, the pin itself.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from matcher.catalog.answer import Answer
from matcher.catalog.pep440 import version_key

FILE = ("sglang", "generated", "model-types.tsv")
SINCE = "4.36.0"  # sglang's first releases ran with transformers 4.36+: types it had are not news

@dataclass(frozen=True, slots=True)
class ModelTypes:
    transformers: Mapping[str, str]  # model type → first transformers release with it
    sglang: Mapping[str, tuple[str, str]]  # model type → (first sglang release, config class)

    @staticmethod
    def parse(text: str) -> ModelTypes:
        t: dict[str, str] = {}
        s: dict[str, tuple[str, str]] = {}
        for line in text.splitlines():
            parts = line.split("\t")
            if parts[0] == "T" and len(parts) == 3:
                t[parts[1]] = parts[2]
            elif parts[0] == "S" and len(parts) == 4:
                s[parts[1]] = (parts[2], parts[3])
        return ModelTypes(t, s)

    def knows(self, key: str) -> bool:
        return key in self.transformers or key in self.sglang


def default_path() -> Path:
    from matcher.catalog import builtin_patterns_dir

    return builtin_patterns_dir().joinpath(*FILE)


@functools.lru_cache(maxsize=1)
def load(path: Path | None = None) -> ModelTypes | None:
    try:
        return ModelTypes.parse((path or default_path()).read_text(encoding="utf-8"))
    except OSError:
        return None


def is_model_type(key: str, table: ModelTypes | None = None) -> bool:
    """Whether `key` is a model type of the vocabulary (and so a KeyError on it is this)."""
    table = table or load()
    return table is not None and table.knows(key)


def _transformers_pins() -> list[tuple[str, str]]:
    """(sglang release, the transformers version it pins with ==), oldest first."""
    from matcher.catalog import pin_table

    table = pin_table.load()
    if table is None:
        return []
    out = []
    for release in table.releases:
        spec = table.spec("transformers", release) or ""
        if spec.startswith("=="):
            out.append((release, spec[2:]))
    return out


def _releases(label: str | None, pins: list[tuple[str, str]]) -> list[tuple[str, str]]:
    from matcher.catalog.mismatch import releases_in

    named = set(releases_in(label, [r for r, _ in pins]))
    return [(r, p) for r, p in pins if r in named]


def remedy(key: str, sglang_version: str | None) -> Answer | None:
    """What to do about `KeyError: '<model type>'`, for the log's release when it is known."""
    table = load()
    if table is None or not table.knows(key):
        return None
    ways: list[tuple[str, str]] = []  # (solution, its pip requirement)
    own = table.sglang.get(key)
    if own is not None and _all_at_least(sglang_version, own[0]):
        own = None  # the log's release registers it already: the lookup ran without it
    if own is not None:
        release, cls = own
        ways.append(((f"Upgrade sglang to {release} or later: sglang registers the configuration "
                     f"of model type `{key}` itself (`{cls}`, in sglang since {release})"),
                     f"sglang>={release}"))
    first = table.transformers.get(key)
    if first is not None:
        ways += _transformers_ways(key, first, sglang_version, own[0] if own else None)
    doc = (f"config.json declares `model_type: {key}`, and the installed transformers' AutoConfig "
           "has no configuration registered under it" + (
               f" (transformers added it in {first})" if first else "")
           + ": the lookup of the model type raised this KeyError.")
    if not ways:
        return None  # the record's own words: nothing here tells a release
    return Answer(doc, tuple(w for w, _ in ways), tuple(r for _, r in ways))


def _all_at_least(sglang_version: str | None, release: str) -> bool:
    """Whether every release the log can be from is `release` or later."""
    from matcher.catalog import pin_table

    table = pin_table.load()
    running = _releases(sglang_version, [(r, "") for r in (table.releases if table else ())])
    return bool(running) and all(version_key(r) >= version_key(release) for r, _ in running)


def _transformers_ways(key: str, first: str, sglang_version: str | None,
                       registered_since: str | None) -> list[tuple[str, str]]:
    pins = _transformers_pins()
    running = {p for _, p in _releases(sglang_version, pins)}
    knows = f"model type `{key}` (added in transformers {first})"
    if running and all(version_key(p) >= version_key(first) for p in running):
        if len(running) == 1:
            pin = next(iter(running))
            return [((f"Install the transformers this sglang pins: pip install "
                     f"'transformers=={pin}' — it knows {knows}; the installed transformers is "
                     "older than sglang's pin"), f"transformers=={pin}")]
        return [((f"Install the transformers your sglang release pins (these releases pin "
                 f"{', '.join(sorted(running, key=version_key))}; each knows {knows}): the "
                 f"installed one is older — pip install 'transformers>={first}'"),
                 f"transformers>={first}")]
    later = [(r, p) for r, p in pins if version_key(p) >= version_key(first)]
    ways = []
    if later and (registered_since is None
                  or version_key(later[0][0]) < version_key(registered_since)):
        release, pin = later[0]
        ways.append(((f"Upgrade sglang to {release} or later: it pins transformers {pin}, the "
                     f"first of sglang's pins that knows {knows}"), f"sglang>={release}"))
    upgrade = bool(later) or registered_since is not None
    ways.append((("Or install" if upgrade else "Install") + f" a transformers that knows "
                 f"`{key}`: pip install 'transformers>={first}'" + (
                     " (newer than this sglang's pin: other parts of sglang may not work with "
                     "it)" if upgrade else ""), f"transformers>={first}"))
    return ways
