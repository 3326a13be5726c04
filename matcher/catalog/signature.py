"""A method or a parameter that only some releases of a package have — answered from the
function lines (`F`) of the shipped symbol indexes.

Two forms of one failure, code written against one release of a package running another:

    AttributeError: 'C' object has no attribute 'y'      (also `type object 'C' …`)
    TypeError: Q() missing 1 required positional argument: 'a'

An `F` line holds a function or method (`C.y`) of a module with the releases it has one list
of parameters in; a function is listed only when its presence or its parameters vary across
the releases read, and not when it takes `**kwargs`. So the lines prove which releases define
`C.y` (the class is the module's: its body defines the method) and which releases' `Q` has
no parameter `a`; they do not prove that a release lacks anything (an unlisted release may
inherit the method, or take `**kwargs`). The fix is therefore always a release that has it.

Answered only when the name is held by one module of one package (or the traceback's frames
pick one), and the traceback shows a caller outside that package: sglang calling sglang is a
bug of that release or files of two builds mixed, which a pin does not prove.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from matcher.catalog.answer import Answer
from matcher.catalog.symbols import Index

METHOD = re.compile(r"(?:type object '(?P<tcls>[\w.]+)'|'(?P<cls>[\w.]+)' object) "
                    r"has no attribute '(?P<name>\w+)'")
MISSING = re.compile(r"(?P<callee>[\w.<>]+)\(\) missing \d+ required (?:positional|keyword-only) "
                     r"arguments?: (?P<names>'\w+'(?:,? (?:and )?'\w+')*)")


# Python's own types: no index holds them (and reading every index for them is 0.6 s)
_BUILTIN = frozenset({"NoneType", "str", "int", "float", "bool", "bytes", "list", "dict", "tuple",
                      "set", "function", "method", "module", "type", "object"})


@dataclass(frozen=True, slots=True)
class Hit:
    """One `F` line: a function of `module` in `dist`, its releases and parameters."""

    dist: str
    module: str
    mask: int
    params: tuple[str, ...]


def missing_names(text: str) -> tuple[str, ...]:
    """`'a', 'b' and 'c'` → ('a', 'b', 'c')."""
    return tuple(re.findall(r"'(\w+)'", text))


def hits(qualname: str, indexes: Iterable[Index]) -> list[Hit]:
    out = []
    for index in indexes:
        for line in _function_lines(index, qualname):
            parts = line.split(" ")
            if parts[0] != "F" or parts[2] != qualname:
                continue
            params = tuple(parts[4].split(",")) if len(parts) > 4 and parts[4] else ()
            out.append(Hit(index.distribution, parts[1], int(parts[3], 16), params))
    return out


def _function_lines(index: Index, qualname: str) -> Iterator[str]:
    """The lines between the index's `F` and `A` groups that hold ` qualname ` (a search
    for the name, not a split of every line: the `F` group of sglang's index is megabytes)."""
    text, key = index.text, f" {qualname} "
    start = index.starts.get("F", 0)
    # a group that is absent starts where the one before it does
    end = min((at for at in (index.starts.get("A", 0), index.starts.get("P", 0)) if at > start),
              default=len(text))
    at = text.find(key, start, end)
    while at >= 0:
        head = text.rfind("\n", 0, at) + 1
        tail = text.find("\n", at)
        yield text[head: tail if tail >= 0 else len(text)]
        at = text.find(key, tail if tail >= 0 else len(text), end)


def one_module(found: Sequence[Hit], prefix: str | None, traceback: str | None) -> list[Hit]:
    """The hits of the one (package, module) the name belongs to: the message's own module
    prefix (`'mooncake.store.C'`) or the traceback's frames narrow several; [] when still
    several (or none)."""
    if prefix:
        found = [h for h in found if h.module == prefix or h.module.startswith(prefix + ".")]
    places = {(h.dist, h.module) for h in found}
    if len(places) > 1 and traceback:
        shown = {p for p in places if _in_frames(p[1], traceback)}
        if len(shown) == 1:
            places = shown
    if len(places) != 1:
        return []
    place = next(iter(places))
    return [h for h in found if (h.dist, h.module) == place]


def _in_frames(module: str, traceback: str) -> bool:
    path = module.replace(".", "/")
    return re.search(rf'File "[^"]*/{re.escape(path)}(?:/__init__)?\.py"', traceback) is not None


def method_have(found: Sequence[Hit], index: Index) -> int:
    """Releases whose class defines the method; 0 when every release having the module does
    (then nothing is a version's doing)."""
    have = 0
    for h in found:
        have |= h.mask
    every, _ = index.module(found[0].module)
    return 0 if every and have & every == every else have


def free_of(found: Sequence[Hit], names: Sequence[str]) -> int:
    """Releases whose function has none of `names` as a parameter; 0 when every release
    listed has one of them (or none has any: then the caller, not a release, is wrong)."""
    free = taking = 0
    for h in found:
        if any(n in h.params for n in names):
            taking |= h.mask
        else:
            free |= h.mask
    return free if taking else 0


def remedy(message: str, sglang_version: str | None = None, *, traceback: str | None = None,
           directory: Path | None = None) -> Answer | None:
    """`mismatch.remedy`'s counterpart for the two forms here: the message as an event
    has it (`AttributeError: 'C' object …`)."""
    from matcher.catalog import mismatch

    if mismatch.parse(message) is not None:
        return None
    return answer(mismatch.stripped(message), sglang_version, traceback, directory)


def answer(message: str, sglang_version: str | None, traceback: str | None,
           directory: Path | None) -> Answer | None:
    """The fix for a method or parameter of another release, or None when the index does
    not prove one."""
    from matcher.catalog import mismatch

    names: tuple[str, ...] = ()
    if (m := METHOD.match(message)) is not None:
        cls = m["cls"] or m["tcls"]
        if cls in _BUILTIN:
            return None
        prefix, _, short = cls.rpartition(".")
        qual = f"{short}.{m['name']}"
    elif (m := MISSING.match(message)) is not None:
        qual, prefix, names = m["callee"], "", missing_names(m["names"])
    else:
        return None
    found = one_module(hits(qual, mismatch.all_indexes(directory)), prefix or None, traceback)
    if not found:
        return None
    index = mismatch._load(directory or mismatch.index_dir(), found[0].dist)
    if index is None:
        return None
    have = free_of(found, names) if names else method_have(found, index)
    if not have:
        return None
    return _fix(index, found[0].module, qual, names, have, sglang_version, traceback)


def _fix(index: Index, module: str, qual: str, names: Sequence[str], have: int,
         sglang_version: str | None, traceback: str | None) -> Answer | None:
    from matcher.catalog import mismatch
    from matcher.catalog.unindexed import innermost

    dist = index.distribution
    # the caller is the innermost frame (Python raises both errors in the frame that reads
    # the attribute or makes the call); a package calling its own code, or a caller not
    # shown, is a bug of a release or files of two builds mixed, which no pin is proved to fix
    caller = innermost(traceback)
    if caller is None or caller == module.split(".", 1)[0]:
        return None
    order = list(index.versions)
    versions = index.versions_of(have)
    if names:
        what = f"`{module}.{qual}` without a parameter {' or '.join(f'`{n}`' for n in names)}"
        doc = (f"{what} is in {dist} {mismatch.ranges(versions, order)} (releases read: "
               f"{mismatch.ranges(order, order)}): the caller was written for one of those")
    else:
        what = f"`{module}.{qual}`"
        doc = (f"{what} is defined in {dist} {mismatch.ranges(versions, order)} (releases "
               f"read: {mismatch.ranges(order, order)}): the caller was written for one of those")
    if dist == "sglang":
        return mismatch._sglang_api(doc, versions, order, sglang_version)
    releases, pins = mismatch._sglang_pins(index, sglang_version)
    solution = install = None
    if releases:
        doc, solution, install = mismatch._pinned_fix(doc, what, dist, versions, order,
                                                      releases, pins, sglang_version)
    if install is None:
        doc, solution, install = mismatch._unpinned_fix(doc, what, dist, versions, order,
                                                        pins, have)
    assert solution is not None
    return Answer(doc + ".", (solution,), (install,))
