"""sglang's command-line arguments per release: the table derived fixes are written in.

A generated record's guard condition reads `ServerArgs` fields (`self.enable_hierarchical_cache`,
`server_args.tp_size`); the operator knows them as flags (`--enable-hierarchical-cache`). This
table says, for each release, what flag sets each field, with its default, choices, type and
help — read from the release's own argparse parser (`argdump.py`, run by that release), so a fix
names the flag the operator's sglang accepts.

On disk (`patterns/sglang/generated/server-args.json.gz`, gzip: not a catalog file): each field's specs, each with the
releases (ranges, as `sglangVersions`) it held in; written by `catalog server-args`.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog.layers import builtin_patterns_dir
from matcher.catalog.pep440 import compact_ranges, in_ranges, sort_versions, version_key

SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One server argument in one release: `dest` is the `ServerArgs` field it sets."""

    dest: str
    flags: tuple[str, ...]
    default: Any
    choices: tuple[Any, ...] | None
    type: str | None  # "int", "float", "str", … (argparse's `type`, by name)
    action: str  # argparse's action class: "_StoreAction", "_StoreTrueAction", …
    nargs: Any
    help: str | None

    @property
    def flag(self) -> str:
        """The spelling the help lists first (`--tp-size`, not `--tensor-parallel-size`)."""
        return self.flags[0]

    @property
    def switch(self) -> bool | None:
        """True for a flag that sets True with no value, False for one that sets False."""
        if self.action in ("_StoreTrueAction", "DeprecatedStoreTrueAction"):
            return True
        if self.action == "_StoreFalseAction":
            return False
        return None

    @property
    def boolean_optional(self) -> bool:
        """`--x` / `--no-x` (argparse's BooleanOptionalAction)."""
        return self.action == "BooleanOptionalAction"


def spec_from(dest: str, doc: Mapping[str, Any]) -> ArgSpec:
    choices = doc.get("choices")
    return ArgSpec(dest=dest, flags=tuple(doc["flags"]), default=doc.get("default"),
                   choices=tuple(choices) if choices else None, type=doc.get("type"),
                   action=doc.get("action") or "", nargs=doc.get("nargs"), help=doc.get("help"))


_SPEC_KEYS = ("flags", "default", "choices", "type", "action", "nargs", "help")


class ServerArgsTable:
    """Every release's arguments; `at(version)` is one release's, by `ServerArgs` field."""

    def __init__(self, releases: Sequence[str], specs: Mapping[str, Sequence[Mapping[str, Any]]]):
        self.releases = tuple(releases)
        self._specs = specs
        self._at: dict[str, dict[str, ArgSpec]] = {}

    def holds(self, version: str) -> bool:
        """`version` is not older than the oldest release the table read (a newer one gets
        the newest's flags: `at`)."""
        return bool(self.releases) and version_key(version) >= version_key(self.releases[0])

    def at(self, version: str) -> Mapping[str, ArgSpec]:
        """The arguments of `version`; a release the table lacks gets the nearest older one's
        (or the oldest), so a record of a newer release than the table still gets flags."""
        if version not in self.releases:
            key = version_key(version)
            older = [v for v in self.releases if version_key(v) <= key] or [self.releases[0]]
            version = older[-1]
        cached = self._at.get(version)
        if cached is None:
            cached = {dest: spec_from(dest, doc) for dest, runs in self._specs.items()
                      for doc in runs if in_ranges(version, doc["versions"])}
            self._at[version] = cached
        return cached

    @classmethod
    def load(cls, path: Path) -> ServerArgsTable:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("schemaVersion") != SCHEMA_VERSION:
            raise ValueError(f"{path}: schemaVersion {doc.get('schemaVersion')!r}, this "
                             f"version reads {SCHEMA_VERSION}: rebuild it with "
                             "`sglang-matcher catalog server-args`")
        return cls(doc["releases"], doc["arguments"])

    @classmethod
    def from_releases(cls, per_release: Mapping[str, Mapping[str, Mapping[str, Any]]]
                      ) -> ServerArgsTable:
        """`per_release`: version → `argdump` output. Runs of releases where a field's spec is
        the same are stored once."""
        order = sort_versions(per_release)
        specs: dict[str, list[dict[str, Any]]] = {}
        for dest in sorted({d for args in per_release.values() for d in args}):
            kinds: dict[str, list[str]] = {}
            docs: dict[str, dict[str, Any]] = {}
            for v in order:
                doc = per_release[v].get(dest)
                if doc is None:
                    continue
                spec = {k: doc.get(k) for k in _SPEC_KEYS}
                key = json.dumps(spec, sort_keys=True)
                kinds.setdefault(key, []).append(v)
                docs[key] = spec
            specs[dest] = [{"versions": compact_ranges(vs, order), **docs[key]}
                           for key, vs in kinds.items()]
        return cls(order, specs)

    def dump(self) -> dict[str, Any]:
        return {"schemaVersion": SCHEMA_VERSION, "releases": list(self.releases),
                "arguments": self._specs}


class DumpError(RuntimeError):
    """A release's arguments could not be read (its import failed)."""


def dump_release(wheel: Path, python: str, *, timeout: float = 300) -> dict[str, Any]:
    """Run `argdump.py` by `python` with `wheel`'s `sglang/` first on its path."""
    script = Path(__file__).with_name("argdump.py")
    with tempfile.TemporaryDirectory(prefix="sglang-args-") as tmp:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tmp, [n for n in z.namelist() if n.startswith("sglang/")])
        env = {**os.environ, "PYTHONPATH": tmp}
        run = subprocess.run([python, str(script)], env=env, cwd=tmp, capture_output=True,
                             text=True, timeout=timeout, check=False)
    if run.returncode != 0:
        tail = "\n".join(run.stderr.strip().splitlines()[-3:])
        raise DumpError(f"{wheel.name}: argdump exited {run.returncode}: {tail}")
    doc: dict[str, Any] = json.loads(run.stdout)
    return doc


def default_path() -> Path:
    return builtin_patterns_dir() / "sglang" / "generated" / "server-args.json.gz"


def flags_of(specs: Iterable[ArgSpec]) -> dict[str, ArgSpec]:
    """Every spelling → its spec."""
    return {flag: s for s in specs for flag in s.flags}
