"""What each sglang release pins: its wheel's `Requires-Dist`, read for a CUDA server install.

`pip install "sglang[all]"` (0.4.x) or `pip install sglang` (0.5.x, whose server dependencies are
no longer behind an extra) on Linux x86-64: the requirements without an extra, and those of the
extras that install the CUDA server (`srt`, `runtime_common`), with their environment markers
evaluated for that platform. Each is kept as the specifier text (`==2.6.0`, `<=0.1.11,>=0.0.44`,
or empty when unbounded), under the distribution's normalized name; sglang renamed its kernel
package (`sgl-kernel` → `sglang-kernel`) and flashinfer its distribution (`flashinfer` →
`flashinfer-python`), so both names are kept as the wheels say them and `DISTRIBUTION_OF_MODULE`
maps an import name to every distribution that provides it.

Pure but for `read_wheel_pins`, which opens a wheel.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping
from email.parser import Parser
from pathlib import Path

from packaging.markers import InvalidMarker, Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from matcher.catalog.symbols import DISTRIBUTION_OF_MODULE as DISTRIBUTION_OF_MODULE

# The extras a CUDA server install takes, before 0.5 put everything in the base requirements.
SERVER_EXTRAS = frozenset({"srt", "runtime-common", "runtime_common"})
_PLATFORM = {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux",
             "os_name": "posix", "python_version": "3.11", "python_full_version": "3.11.7",
             "implementation_name": "cpython", "platform_python_implementation": "CPython"}

def normalize(name: str) -> str:
    """PEP 503's normalized distribution name (`flashinfer_python` → `flashinfer-python`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def server_pins(metadata: str) -> dict[str, str]:
    """A wheel's METADATA → {normalized distribution: specifier text} for a CUDA server install
    on Linux x86-64 (see the module's doc); self-references (`sglang[runtime_common]`) left out,
    and a distribution named twice keeps the narrower (longer) specifier."""
    message = Parser().parsestr(metadata, headersonly=True)
    out: dict[str, str] = {}
    for line in message.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if not _for_server(req.marker):
            continue
        name = normalize(req.name)
        if name == "sglang":
            continue
        spec = str(req.specifier)
        if name not in out or len(spec) > len(out[name]):
            out[name] = spec
    return out


def _for_server(marker: Marker | None) -> bool:
    if marker is None:
        return True
    try:
        if marker.evaluate({**_PLATFORM, "extra": ""}):
            return True
        return any(marker.evaluate({**_PLATFORM, "extra": e}) for e in SERVER_EXTRAS)
    except InvalidMarker:
        return False


def read_wheel_pins(wheel: Path) -> tuple[str, dict[str, str]]:
    """(version, pins) of an sglang wheel, from its `*.dist-info/METADATA`."""
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist()
                    if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = z.read(name).decode("utf-8", "replace")
    version = Parser().parsestr(text, headersonly=True).get("Version") or ""
    return version, server_pins(text)


def exact(spec: str) -> str | None:
    """The version an `==v` specifier names (no wildcard), else None."""
    m = re.fullmatch(r"===?\s*([^\s,*]+)", spec.strip())
    return m.group(1) if m else None


def bounds(spec: str) -> list[str]:
    """The versions a specifier names (`<=0.1.11,>=0.0.44` → both), for choosing which
    releases of a package to index."""
    try:
        return [s.version for s in SpecifierSet(spec) if not s.version.endswith("*")]
    except InvalidSpecifier:
        return []


def admits(spec: str, version: str) -> bool:
    """`version` satisfies `spec` (pre-releases allowed: sglang pins some, `0.6.3.dev13`)."""
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def pinned_versions(pins: Iterable[Mapping[str, str]], distribution: str) -> list[str]:
    """Every version of `distribution` that some release's specifier names, sorted."""
    names: set[str] = set()
    for p in pins:
        spec = p.get(distribution)
        if spec:
            names.update(bounds(spec))
    return sorted(names, key=_key)


def _key(v: str) -> tuple[int, Version | str]:
    try:
        return (1, Version(v))
    except InvalidVersion:
        return (0, v)
