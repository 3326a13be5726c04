"""A dependency of the wrong version, and the `pip install` that fixes it — decided per event.

Five forms of one failure — code written against one release of a package running against
another:

    ImportError: cannot import name 'X' from 'P.mod' (…)
    ModuleNotFoundError: No module named 'P.mod'
    AttributeError: module 'P.mod' has no attribute 'X'
    TypeError: Q() got an unexpected keyword argument 'k'
    NameError: name 'N' is not defined        (N bound by a guarded import in sglang)

There is one catalog record per form (`mismatch.jsonl`, `records()`), not one per (module,
name): the answer depends on the module and name the line shows and on the sglang release the
log was written by, so it is computed when the event is made (`remedy`), from the symbol index
shipped beside the catalog (`patterns/sglang/generated/symbols/<dist>.txt.gz`, made by
`python -m matcher.catalog.depindex`): which releases of P define X, which version the sglang
release pins, hence `pip install 'P==v'` — or, for sglang's own API used by another project
(`from sglang.utils import launch_server_cmd`), the sglang releases that have it.

A method or a parameter only some releases have (`'C' object has no attribute 'y'`,
`Q() missing 1 required positional argument: 'a'`, messages of curated records) is answered
from the index's function lines by `matcher.catalog.signature`, which builds on this module
(the pipeline asks it when `remedy` has no form for the message).

A package with no index gets its fix by rule (`matcher.catalog.unindexed`, from every release's
pins in `sglang-pins.tsv` and the traceback's frames); `from 'P' (unknown location)` is a folder
shadowing P, not a version.

Nothing is read at start: an index is opened the first time an event needs it (a few are kept).
Pure but for reading the index files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog.answer import Answer
from matcher.catalog.symbols import DISTRIBUTION_OF_MODULE, Index
from matcher.catalog.versions import version_key
from matcher.wrappers import LAZY_IMPORT

GENERATOR = "matcher.catalog.mismatch"
INDEX_DIR = ("sglang", "generated", "symbols")

_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("import", re.compile(
        r"cannot import name '(?P<name>[\w.]+)' from '(?P<module>[\w.]+)'")),
    ("module", re.compile(r"No module named '(?P<module>[\w.]+)'")),
    ("attribute", re.compile(
        r"module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'")),
    ("keyword", re.compile(
        r"(?P<callee>[\w.<>]+)\(\) got an unexpected keyword argument '(?P<name>\w+)'")),
    ("name", re.compile(r"name '(?P<name>\w+)' is not defined")),
)


@dataclass(frozen=True, slots=True)
class Form:
    kind: str  # import, module, attribute, keyword, name
    module: str | None
    name: str | None
    callee: str | None = None




def lazy_wrapped(message: str) -> bool:
    """A RuntimeError of transformers' lazy importer around an import's message."""
    return LAZY_IMPORT.search(re.sub(r"^\s*[\w.]+:\s*", "", message)) is not None


def stripped(message: str) -> str:
    """The message without `Class: `, an `[address=…]` prefix or transformers' lazy
    importer's line."""
    text = re.sub(r"^\s*(?:[\w.]+(?:Error|Exception)):\s*", "", message)
    text = re.sub(r"^\[address=[^\]]*\]\s*", "", text)
    return LAZY_IMPORT.sub("", text)


def parse(message: str) -> Form | None:
    """The form a message has (searched at its start, after `Class: ` if it is there, and
    after transformers' `Failed to import … because of the following error …:`)."""
    text = stripped(message)
    for kind, rx in _FORMS:
        m = rx.match(text)
        if m is not None:
            g = m.groupdict()
            return Form(kind, g.get("module"), g.get("name"), g.get("callee"))
    return None


# --- the index files ---------------------------------------------------------------------------

def index_dir() -> Path:
    from matcher.catalog import builtin_patterns_dir

    return builtin_patterns_dir().joinpath(*INDEX_DIR)


def _load(directory: Path, distribution: str) -> Index | None:
    """A distribution's symbol index, kept: sglang's (every answer reads it, 13 MB in memory)
    in a place of its own, the others three at a time — sharing one LRU of three with them,
    sglang's was evicted and read again for each event of a log with several packages'
    import errors (12 reads, 0.33 s, in a scan of the 1M-line bench log)."""
    if distribution == "sglang":
        return _load_sglang(directory)
    return _load_other(directory, distribution)


def _read(directory: Path, distribution: str) -> Index | None:
    path = directory / f"{distribution}.txt.gz"
    try:
        return Index.load(path, distribution)
    except (OSError, ValueError, EOFError):
        return None


@functools.lru_cache(maxsize=1)
def _load_sglang(directory: Path) -> Index | None:
    return _read(directory, "sglang")


@functools.lru_cache(maxsize=3)
def _load_other(directory: Path, distribution: str) -> Index | None:
    return _read(directory, distribution)


def index_for(top: str, directory: Path | None = None) -> Index | None:
    """The index of the distribution that installs the top-level package `top`."""
    directory = directory or index_dir()
    for dist in DISTRIBUTION_OF_MODULE.get(top, ()):
        got = _load(directory, dist)
        if got is not None:
            return got
    return None


def ranges(versions: Sequence[str], order: Sequence[str]) -> str:
    """`0.1.0, 0.1.1, 0.1.2, 0.2.0` of `order` → `0.1.0..0.2.0` (runs of consecutive ones)."""
    runs: list[list[str]] = []
    chosen = set(versions)
    previous = False
    for v in order:
        if v in chosen:
            if previous:
                runs[-1].append(v)
            else:
                runs.append([v])
        previous = v in chosen
    return ", ".join(r[0] if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs)


def releases_in(label: str | None, known: Iterable[str]) -> list[str]:
    """The sglang releases of `known` that an event's `sglang_version` (`0.5.6`, `0.5.1..0.5.3`,
    `0.5.1..` open above) names."""
    if not label:
        return []
    lo, sep, hi = label.partition("..")
    if not sep:
        hi = lo
    out = []
    for v in known:
        k = version_key(v)
        if (not lo or version_key(lo) <= k) and (not hi or k <= version_key(hi)):
            out.append(v)
    return sorted(out, key=version_key)


# Packages whose namespaces a lazy loader fills from files the reader does not follow, read
# at a few of their releases: a name missing between two that have it is taken as there.
LAZY = frozenset({"transformers"})


def filled(mask: int) -> int:
    """A name's releases with the gaps between its first and last filled: a release between
    two that define it is taken to define it too. Lazy packages export names the reader cannot
    see (transformers 4.52.3 lists no `qwen3` in `models/__init__.py`: its `_LazyModule` finds
    `Qwen3ForCausalLM` by scanning the files), and a name is seldom removed and then restored."""
    if mask == 0:
        return 0
    low = mask & -mask
    return ((1 << mask.bit_length()) - 1) & ~(low - 1)


def preferred(candidates: Sequence[str], specs: Iterable[str]) -> str:
    """The version to install of `candidates` (oldest first): the newest that one of `specs`
    names (`==0.3.3`, the bound of `>=0.3.3`: a release sglang was written against), else the
    newest — an open `>=` admits releases long after the one sglang knew."""
    from matcher.catalog.pins import bounds

    named = {v for spec in specs for v in bounds(re.sub(r"^[A-Za-z0-9_.-]+", "", spec))}
    return next((v for v in reversed(candidates) if v in named), candidates[-1])


# the last `/sglang/` of the path: a source checkout is `…/sglang/python/sglang/srt/…`
_SGLANG_FRAME = re.compile(r'File "[^"]*/(sglang/[\w/]+)\.py", line \d+')


def importer_releases(traceback: str | None, form: Form, directory: Path | None) -> str | None:
    """The sglang releases whose module that the traceback's innermost sglang frame shows
    imports the failing name (`A` lines of sglang's index), as a label `A..B`: a log that
    failed at start says nothing else about its release."""
    if not traceback or form.kind not in ("import", "name", "module"):
        return None
    if form.kind != "module" and form.name is None:
        return None
    frames = _SGLANG_FRAME.findall(traceback)
    if not frames:
        return None
    module = frames[-1].replace("/", ".").removesuffix(".__init__")
    sglang = _load(directory or index_dir(), "sglang")
    if sglang is None:
        return None
    mask = 0
    if form.kind == "name":
        assert form.name is not None
        for where, m, _, _ in sglang.imports_of(form.name):
            if where == module:
                mask |= m
    else:
        for where, m in sglang.importers(form.module or "", form.name):
            if where == module:
                mask |= m
    versions = sglang.versions_of(mask)
    if not versions:
        return None
    return versions[0] if len(versions) == 1 else f"{versions[0]}..{versions[-1]}"


def remedy(message: str, sglang_version: str | None = None, *, traceback: str | None = None,
           directory: Path | None = None) -> Answer | None:
    """What the index says about a mismatch message (None when it says nothing).
    `sglang_version`: the release (or range) the log was written by, when known; else the
    releases whose importing module the traceback shows are taken."""
    form = parse(message)
    if form is None:  # a circle of imports; else a method or a parameter of another
        # release, which `matcher.catalog.signature` answers
        from matcher.catalog import unplaced
        return unplaced.circular(message, traceback)
    if form.kind == "import" and _NAMESPACE.search(message):
        return _namespace(form)
    inferred = sglang_version is None
    if sglang_version is None:
        sglang_version = importer_releases(traceback, form, directory)
    if form.kind == "name":
        return _name(form, sglang_version, directory, inferred=inferred)
    if form.kind == "keyword":
        from matcher.catalog import removed_keywords  # a keyword a later release removed
        assert form.callee is not None and form.name is not None
        return (removed_keywords.answer(form.callee, form.name, traceback)
                or _keyword(form, sglang_version, directory))
    assert form.module is not None
    if form.kind in ("module", "attribute"):
        from matcher.catalog import stdlib_modules  # Python's own: the platform, its build
        own = (stdlib_modules.answer(form.module) if form.kind == "module" else
               stdlib_modules.attribute_answer(form.module, form.name or ""))
        if own is not None:
            return own
    top = form.module.split(".", 1)[0]
    index = index_for(top, directory)
    got = None
    if index is not None and form.kind == "module":
        got = _module(index, form.module, sglang_version, directory)
    elif index is not None:
        assert form.name is not None
        got = _symbol(index, form.module, form.name, sglang_version, directory)
    if index is None:
        got = _by_rule(form, sglang_version, traceback, message)
    elif got is None and form.kind == "import" and _INSTALLED_SOURCE.search(message):
        got = _older_than_read(index, form, sglang_version, traceback)
    if top == "sglang" and got is not None and not got.solutions:
        got = _no_sglang_has_it(got, traceback)
    if form.kind == "module" or (got is not None and got.solutions):
        return got
    return _unplaced(index, form, message, traceback, got)


def _unplaced(index: Index | None, form: Form, message: str, traceback: str | None,
              got: Answer | None) -> Answer:
    """A name no version was computed for: what to check and do by the importer and the file
    imported (`matcher.catalog.unplaced`), after what the index or pins said of it."""
    from matcher.catalog import unplaced

    assert form.module is not None
    everywhere = None
    if index is not None and form.name is not None:
        order = list(index.versions)
        has = index.name(form.module, form.name)
        if index.distribution in LAZY:
            has = filled(has)
        if has == (1 << len(order)) - 1:
            everywhere = ranges(order, order)
    fallback = unplaced.answer(form.module, form.name, message, traceback, everywhere,
                               index.distribution if index is not None else None)
    if got is None:
        return fallback
    return Answer(got.documentation, fallback.solutions, got.installs)


# `cannot import name 'X' from 'P.m' (/…/site-packages/P/m.py)`: the installed module's source
_INSTALLED_SOURCE = re.compile(r"from '[\w.]+' \([^()]*[/\\](?:site|dist)-packages[/\\][^()]*\.py\)")


def _older_than_read(index: Index, form: Form, sglang_version: str | None,
                     traceback: str | None) -> Answer | None:
    """An installed Python module of P lacks a name that P.m has in every release read: the
    installed P is outside the releases read — older than the first, as a name seldom goes
    away (the index reads a few recent releases; older ones are common in the field). Not for
    compiled modules (a CPU build lacks CUDA functions every release declares) nor for a module
    some release read lacks."""
    from matcher.catalog.answer import requires
    from matcher.catalog.unindexed import innermost

    assert form.module is not None and form.name is not None
    order = list(index.versions)
    everyone = (1 << len(order)) - 1
    has = index.name(form.module, form.name)
    if index.distribution in LAZY:
        has = filled(has)
    if has != everyone or index.module(form.module)[0] != everyone:
        return None
    dist, what = index.distribution, f"`{form.module}.{form.name}`"
    doc = (f"Every release of {dist} read ({ranges(order, order)}) defines {what}, and the "
           f"installed {form.module} lacks it: the installed {dist} is older than {order[0]} "
           "(or files of two releases are mixed)")
    releases, pins = _sglang_pins(index, sglang_version)
    if releases:
        doc, solution, install = _pinned_fix(doc, what, dist, order, order, releases, pins,
                                             sglang_version)
        if solution is not None and install is not None:
            return Answer(doc + ".", (solution,), (install,))
    who = innermost(traceback)
    whose = (f"that {who} requires (its requirements)" if who and who not in ("sglang", dist)
             else f"that your sglang pins ({requires('sglang', dist)} prints it) or that the "
             "project importing it requires")
    return Answer(doc + ".", (
        (f"Install the {dist} {whose}: pip install --force-reinstall '{dist}==<that version>' "
         f"(pip show {dist} shows the installed one; every {dist} from {order[0]} to "
         f"{order[-1]} defines {what})"),), ())


def _no_sglang_has_it(got: Answer, traceback: str | None) -> Answer:
    """sglang's name that no release read defines: whose code asked for it says what to do —
    another project's, written for an sglang that no release has (a development build, a
    fork); sglang's own, the files of two builds mixed. No frame shown: nothing more."""
    from matcher.catalog.unindexed import innermost

    who = innermost(traceback)
    if who is None or who == "sglang":
        return got
    return Answer(got.documentation, (
        ("The calling code was written for an sglang that no release has (a development build "
        "or a fork): install the sglang its project pins (its requirements or install script), "
        "or a version of the project written for the sglang you run"),), ())


# `cannot import name 'X' from 'P' (unknown location)`: P has no file — a namespace package
_NAMESPACE = re.compile(r"from '[\w.]+' \(unknown location\)")


def _namespace(form: Form) -> Answer:
    """P imported from no file: Python took a directory named P without an `__init__.py` for
    it — one ahead of the installed package on the path (the directory a checkout is run from),
    or what a partial uninstall left. No release lacks X: a version is not the fix."""
    assert form.module is not None
    top = form.module.split(".", 1)[0]
    dist = next(iter(DISTRIBUTION_OF_MODULE.get(top, ())), top.replace("_", "-"))
    return Answer(
        f"`{form.module}` was imported from no file (`unknown location`): Python found a "
        f"directory named `{top}` without an `__init__.py` ahead of an installed {dist}, or "
        f"what an interrupted install or uninstall of {dist} left — not a version mismatch.",
        ((f"See which directory is imported: python -c 'import {top}; print({top}.__path__)'; "
         "if it is not the installed package (a source checkout or a folder in the working "
         "directory), run from another directory or rename that folder"),
         (f"If it is the installed one, reinstall it: pip install --force-reinstall --no-deps "
         f"'{dist}==<the version you run>'")), ())


def _by_rule(form: Form, sglang_version: str | None, traceback: str | None,
             message: str) -> Answer | None:
    """What the pins and the traceback say of a package with no symbol index
    (`matcher.catalog.unindexed`). A package with one says nothing more when the index cannot
    place the name: a name every release read defines, or a module that makes names on
    access, is not a version mismatch that a pin fixes."""
    from matcher.catalog import pin_table, unindexed

    assert form.module is not None
    top = form.module.split(".", 1)[0]
    if form.kind == "module" and form.module == top:
        return None  # the package itself is missing: the record's own words say what to do
    table = pin_table.load()
    if table is None:
        return None
    what = f"`{form.module}`" if form.kind == "module" else f"`{form.module}.{form.name}`"
    releases = releases_in(sglang_version, table.releases)
    installed = re.search(r"[/\\](?:site|dist)-packages[/\\]", message) is not None
    return unindexed.answer(top, what, releases, sglang_version, traceback, table,
                            installed=installed)


def _sglang_pins(index: Index, sglang_version: str | None) -> tuple[list[str], dict[str, tuple[str, int]]]:
    pins = index.pins()
    return releases_in(sglang_version, pins), pins


def _symbol(index: Index, module: str, name: str, sglang_version: str | None,
            directory: Path | None, *, via: str = "") -> Answer | None:
    order = list(index.versions)
    everyone = (1 << len(order)) - 1
    has = index.name(module, name)
    if index.distribution in LAZY:
        has = filled(has)
    module_mask, is_open = index.module(module)
    dist = index.distribution
    what = f"`{module}.{name}`" if not via else f"`{name}` ({via})"
    if has == 0 and module_mask == 0:
        return None
    if has == everyone:
        return None  # in every release read: not a version mismatch (a CPU build, a circular
        # import, a half-done install, a local file shadowing the package): nothing to pin
    if has == 0:
        if is_open:
            return None  # a module that makes names on access: absence proves nothing
        doc = f"No release of {dist} read ({ranges(order, order)}) defines {what}"
        return _unread_pin_answer(index, doc, sglang_version) or Answer(
            doc + ": the code importing it was written for another version of it, or for a "
            "fork.", (), ())
    have = index.versions_of(has)
    doc = f"{what} is defined in {dist} {ranges(have, order)} (releases read: {ranges(order, order)})"
    if dist == "sglang":
        return _sglang_api(doc, have, order, sglang_version)
    releases, pins = _sglang_pins(index, sglang_version)
    solution = install = None
    if releases:
        doc, solution, install = _pinned_fix(doc, what, dist, have, order, releases, pins,
                                             sglang_version)
    if install is None:
        doc, solution, install = _unpinned_fix(doc, what, dist, have, order, pins, has)
    assert solution is not None  # set with `install`, by either fix
    return Answer(doc + ".", (solution,), (install,))


def _pinned_fix(doc: str, what: str, dist: str, have: Sequence[str], order: Sequence[str],
                releases: Sequence[str], pins: dict[str, tuple[str, int]],
                sglang_version: str | None) -> tuple[str, str | None, str | None]:
    """The fix the sglang release's own pins give: the documentation with what they require,
    and the solution and install (None: no release it admits is known to define the name)."""
    fit = [v for v in have if any(pins[r][1] >> order.index(v) & 1 for r in releases if r in pins)]
    specs = sorted({pins[r][0] for r in releases if r in pins})
    if specs:
        doc += f"; sglang {sglang_version} requires {' or '.join(specs)}"
    if fit:
        best = preferred(fit, specs)
        solution = (f"Install the {dist} that sglang {sglang_version} pins, which has {what}: "
                    f"pip install '{dist}=={best}' (check with pip show {dist})")
        return doc, solution, f"{dist}=={best}"
    if (pinned := unread_pin(releases, pins, specs)) is not None:
        doc += " (a release not read here: the index holds a few of the pinned ones)"
        return doc, (f"Install the {dist} that sglang {sglang_version} pins: "
                     f"pip install '{dist}=={pinned}' (check with pip show {dist})"), \
            f"{dist}=={pinned}"
    if specs:
        doc += (f", and no release it admits defines {what}: this sglang was not built "
                f"against the {dist} it pins (a source checkout or a patched install)")
    return doc, None, None


def _unpinned_fix(doc: str, what: str, dist: str, have: Sequence[str], order: Sequence[str],
                  pins: dict[str, tuple[str, int]], has: int) -> tuple[str, str, str]:
    """The fix without a pin to follow: a release of `dist` that has the name, the newest one
    that some sglang release pins if any; the documentation names those sglang releases."""
    pinned_by = {r: spec for r, (spec, mask) in pins.items() if mask & has}
    best = have[-1]
    # prefer the newest version having it that some sglang release pins
    pinned_have = [v for v in have
                   if any(mask >> order.index(v) & 1 for _, mask in pins.values())]
    if pinned_have:
        best = preferred(pinned_have, [spec for spec, _ in pins.values()])
    if pinned_by:
        rel = sorted(pinned_by, key=version_key)
        doc += f"; sglang releases whose pins admit such a {dist}: {ranges(rel, rel)}"
    return doc, (f"Install a release of {dist} that has {what}: "
                 f"pip install '{dist}=={best}'"), f"{dist}=={best}"


def _unread_pin_answer(index: Index, doc: str, sglang_version: str | None) -> Answer | None:
    """The running releases' exact pins when the (thinned) index read no version they admit:
    the name may be in those versions all the same — sglang's code was written against its own
    pin. One release (or one pin): that pin; several, each release's (one for all would be
    wrong for some)."""
    from matcher.catalog.pins import exact

    releases, pins = _sglang_pins(index, sglang_version)
    if not releases or any(pins[r][1] for r in releases if r in pins):
        return None  # no release named, or the index read a version one admits: it knows
    by_pin: dict[str, list[str]] = {}
    for r in releases:
        version = exact(re.sub(r"^[A-Za-z0-9_.-]+", "", pins[r][0])) if r in pins else None
        if version is None:
            return None
        by_pin.setdefault(version, []).append(r)
    dist = index.distribution
    if len(by_pin) == 1:
        [pinned] = by_pin
        return Answer(f"{doc}; sglang {sglang_version} requires {dist}=={pinned}, a release not "
                      "read here.",
                      ((f"Install the {dist} that sglang {sglang_version} pins: "
                        f"pip install '{dist}=={pinned}' (check with pip show {dist})"),),
                      (f"{dist}=={pinned}",))
    if len(by_pin) > 8:
        return None
    order = sorted(pins, key=version_key)
    listed = "; ".join(f"sglang {ranges(rs, order)}: pip install '{dist}=={v}'"
                       for v, rs in by_pin.items())
    return Answer(f"{doc}; each of sglang {sglang_version} pins a {dist} not read here.",
                  (f"Install the {dist} your sglang release pins (pip show sglang): {listed}",),
                  ())


def unread_pin(releases: Sequence[str], pins: dict[str, tuple[str, int]],
               specs: Sequence[str]) -> str | None:
    """The one exact version the running releases pin, when the index read none of the
    versions they admit (thinned indexes read a few pinned releases): that pin is the fix,
    though the index cannot say what it defines."""
    from matcher.catalog.pins import exact

    if any(pins[r][1] for r in releases if r in pins) or len(specs) != 1:
        return None
    return exact(re.sub(r"^[A-Za-z0-9_.-]+", "", specs[0]))


def _sglang_api(doc: str, have: Sequence[str], order: Sequence[str],
                sglang_version: str | None) -> Answer:
    """sglang's own API, used by another project or by a mismatched install: which releases
    have it, and the `pip install` of one — the nearest newer release when the log's release
    is known (else the newest run of releases that have it)."""
    running = releases_in(sglang_version, order)
    keyed = {v: version_key(v) for v in order}
    solutions: list[str] = []
    installs: list[str] = []
    if running and not set(running) & set(have):
        top, bottom = max(keyed[r] for r in running), min(keyed[r] for r in running)
        later = [v for v in have if keyed[v] > top]
        earlier = [v for v in have if keyed[v] < bottom]
        if later:
            installs.append(f"sglang>={later[0]}")
            solutions.append(f"The caller was written for another sglang: upgrade sglang to "
                             f"{later[0]} or later: pip install 'sglang>={later[0]}'")
        if earlier:
            installs.append(f"sglang=={earlier[-1]}")
            solutions.append(f"Or install the last sglang before it that has it: "
                             f"pip install 'sglang=={earlier[-1]}'")
    if not installs:
        runs = ranges(have, order).split(", ")
        last = runs[-1]
        first, _, end = last.partition("..")
        end = end or first
        req = f"sglang>={first}" if end == order[-1] else f"sglang>={first},<={end}"
        installs.append(req)
        solutions.append(f"The caller was written for another sglang: install one that has it: "
                         f"pip install '{req}'")
    return Answer(doc + ".", tuple(solutions), tuple(installs))


def _module(index: Index, module: str, sglang_version: str | None,
            directory: Path | None) -> Answer | None:
    order = list(index.versions)
    has, _ = index.module(module)
    dist = index.distribution
    top = module.split(".", 1)[0]
    releases, pins = _sglang_pins(index, sglang_version)
    if module == top or has == 0:
        if module != top:
            return None  # a module no release read has: nothing to say
        # the package itself is missing
        specs = sorted({pins[r][0] for r in releases if r in pins})
        fit = [v for v in order if any(pins[r][1] >> order.index(v) & 1
                                       for r in releases if r in pins)]
        if fit:
            best = preferred(fit, specs)
            return Answer(f"`{top}` is not installed; sglang {sglang_version} requires "
                          f"{' or '.join(specs)}.",
                          (f"Install it: pip install '{dist}=={best}'",),
                          (f"{dist}=={best}",))
        return None
    have = index.versions_of(has)
    if has == (1 << len(order)) - 1:
        return None  # in every release: not a version problem
    doc = f"`{module}` exists in {dist} {ranges(have, order)} (releases read: {ranges(order, order)})"
    if dist == "sglang":
        return _sglang_api(doc, have, order, sglang_version)
    fit = [v for v in have if any(pins[r][1] >> order.index(v) & 1 for r in releases if r in pins)]
    if fit:
        specs = sorted({pins[r][0] for r in releases if r in pins})
        best = preferred(fit, specs)
        solution = (f"Install the {dist} that sglang {sglang_version} pins: "
                    f"pip install '{dist}=={best}'")
        return Answer(doc + f"; sglang {sglang_version} requires {' or '.join(specs)}.",
                      (solution,), (f"{dist}=={best}",))
    pinned_by = sorted((r for r, (_, mask) in pins.items() if mask & has), key=version_key)
    pinned_have = [v for v in have if any(mask >> order.index(v) & 1 for _, mask in pins.values())]
    best = preferred(pinned_have or have, [spec for spec, _ in pins.values()])
    if pinned_by:
        doc += f"; sglang releases whose pins admit such a {dist}: {ranges(pinned_by, pinned_by)}"
    solution = f"Install a release of {dist} that has it: pip install '{dist}=={best}'"
    return Answer(doc + ".", (solution,), (f"{dist}=={best}",))


def _name(form: Form, sglang_version: str | None, directory: Path | None, *,
          inferred: bool = False) -> Answer | None:
    """`name 'sgl_x' is not defined`: sglang bound it by a guarded import of a dependency's
    name; that name is what the installed dependency lacks. `inferred`: the release is not
    the log's but the range whose modules bind the name (their pins may differ)."""
    assert form.name is not None
    sglang = _load(directory or index_dir(), "sglang")
    if sglang is None:
        return None
    found = sglang.imports_of(form.name)
    if not found:
        return None
    running = releases_in(sglang_version, sglang.versions)
    if not running or inferred:
        per_release = _pins_by_release(form.name, found, sglang, directory)
        if per_release is not None:
            return per_release
    bound = [f for f in found if any(f[1] >> sglang.versions.index(r) & 1 for r in running)]
    if not bound:
        # the log's release does not bind the name (or the release is not known): sglang's
        # own code used a name that release no longer imports — no dependency to pin
        order = list(sglang.versions)
        where = "; ".join(
            f"`from {src} import {name} as {form.name}` in {m} (sglang "
            f"{ranges(sglang.versions_of(mask), order)})" for m, mask, src, name in found)
        return Answer(f"`{form.name}` is bound by {where}. "
                      + ("In sglang " + str(sglang_version) + " it is not: the code using it "
                         "is sglang's own, left behind when the import went."
                         if running else "The release that wrote this log is not known."),
                      (), ())
    found = bound
    one = _one_source(found, directory)
    if one is None:
        return None
    source, name, index = one
    modules = sorted({m for m, _, _, _ in found})
    via = f"imported as `{form.name}` by {', '.join(modules)} from `{source}`"
    got = _symbol(index, source, name, sglang_version, directory, via=via)
    if got is None:
        return None
    note = (" The import is guarded (inside `try`/`if`), so when it fails the name is left "
            "undefined and the error surfaces later as this NameError — also when the guard is "
            "false on this platform (not CUDA, no GPU visible).")
    return Answer(got.documentation + note, got.solutions, got.installs)


def _one_source(found: Sequence[tuple[str, int, str, str]], directory: Path | None
                ) -> tuple[str, str, Index] | None:
    """The one dependency name every import found binds, and that package's index; None when
    the imports bind several, or no index is shipped for it."""
    sources = sorted({(src, name) for _, _, src, name in found})
    if len(sources) != 1:
        return None
    source, name = sources[0]
    index = index_for(source.split(".", 1)[0], directory)
    return None if index is None else (source, name, index)


def _pins_by_release(alias: str, found: Sequence[tuple[str, int, str, str]], sglang: Index,
                     directory: Path | None) -> Answer | None:
    """The release that wrote the log is not known: when every import binding `alias` takes
    one dependency name, say what each sglang release binding it pins of that dependency —
    the fix is the pin of the user's release, whichever it is."""
    one = _one_source(found, directory)
    if one is None:
        return None
    source, name, index = one
    mask = 0
    for _, m, _, _ in found:
        mask |= m
    binding = sglang.versions_of(mask)
    pins = index.pins()
    by_spec: dict[str, list[str]] = {}
    for r in binding:
        if r in pins and pins[r][0]:
            by_spec.setdefault(pins[r][0], []).append(r)
    if not by_spec or len(by_spec) > 8:
        return None
    order = list(sglang.versions)
    dist = index.distribution
    where = ", ".join(sorted({m for m, _, _, _ in found}))
    listed = "; ".join(f"sglang {ranges(rs, order)}: pip install '{spec}'"
                       for spec, rs in sorted(by_spec.items(), key=lambda kv: version_key(kv[1][0])))
    doc = (f"`{alias}` is bound by `from {source} import {name} as {alias}` in {where} (sglang "
           f"{ranges(binding, order)}), inside a guard: the installed {dist} lacks `{name}`, or "
           "the guard is false on this platform (not CUDA, no GPU visible). The release that "
           "wrote this log is not known.")
    return Answer(doc, (f"Install the {dist} your sglang release pins (pip show sglang): "
                        + listed,), ())


def all_indexes(directory: Path | None = None) -> Iterator[Index]:
    """Every shipped index, by distribution name, read one at a time (not all held)."""
    directory = directory or index_dir()
    try:
        names = sorted(p.name.removesuffix(".txt.gz") for p in directory.glob("*.txt.gz"))
    except OSError:
        return
    for dist in names:
        index = _load(directory, dist)
        if index is not None:
            yield index


def _keyword(form: Form, sglang_version: str | None, directory: Path | None) -> Answer | None:
    """`Q() got an unexpected keyword argument 'k'`: the releases whose Q takes k, in every
    index that has a function Q with varying parameters."""
    assert form.callee is not None and form.name is not None
    answers: list[Answer] = []
    qual = form.callee
    for index in all_indexes(directory):
        dist = index.distribution
        takes, lacks, where = index.keyword(qual, form.name)
        if not takes:
            continue
        order = list(index.versions)
        have = index.versions_of(takes)
        what = f"`{qual}` ({', '.join(where)}) takes `{form.name}`"
        doc = f"{what} in {dist} {ranges(have, order)}, not in {ranges(index.versions_of(lacks), order)}"
        if dist == "sglang":
            answers.append(_sglang_api(doc, have, order, sglang_version))
            continue
        releases, pins = _sglang_pins(index, sglang_version)
        fit = [v for v in have if any(pins[r][1] >> order.index(v) & 1
                                      for r in releases if r in pins)]
        best = fit[-1] if fit else have[-1]
        answers.append(Answer(doc + ".", (
            f"Install a release of {dist} whose `{qual}` takes `{form.name}`"
            + (f" (the one sglang {sglang_version} pins)" if fit else "")
            + f": pip install '{dist}=={best}'",), (f"{dist}=={best}",)))
    return answers[0] if len(answers) == 1 else None


# --- the records -------------------------------------------------------------------------------

_DOC = {
    "import": "Code imported a name its dependency does not define in the installed version.",
    "attribute": "Code used a module attribute that the installed version of the package "
                 "does not have.",
    "keyword": "Code called a function with a keyword argument that the installed version of "
               "the callee does not take.",
    "name": "A name sglang binds through a guarded import (`try: from P import X as N`) was "
            "never bound: the import failed quietly at start.",
    "lazy": "transformers' lazy importer could not import one of its modules because an import "
            "inside it failed: a name the installed version of a package does not define.",
    "circular-attribute": "Python found the package half-imported: a module used an attribute "
                          "of it while the package itself was still being imported. Not a "
                          "version mismatch — a file of the package's name (a script "
                          "`torch.py`, a directory `torch/`) in the working directory or on "
                          "PYTHONPATH imported instead of the installed package, or the "
                          "installed package's own modules importing each other in a circle "
                          "(a bug of that release, or files of two releases mixed).",
    "circular": "Python found the package half-imported: a module imported it while the "
                "package itself was still being imported. Not a version mismatch — almost "
                "always a file of the package's name (a script `sglang.py`, a directory "
                "`sglang/`) in the working directory or on PYTHONPATH, which Python imports "
                "instead of the installed package.",
}
_SOLUTIONS = {
    "circular": [
        ("Rename the script or directory named like the package (e.g. your `sglang.py`), delete "
        "its `__pycache__`, and run from another directory"),
        ("Check which file is imported: python -c 'import sglang; print(sglang.__file__)' — it "
        "must be inside site-packages"),
    ],
}
_PATTERNS = {
    "import": r"^\s*cannot import name '(?P<name>[\w.]+)' from '(?P<module>[\w.]+)'",
    "attribute": r"^\s*module '(?P<module>[\w.]+)' has no attribute '(?P<name>\w+)'",
    "keyword": r"^\s*(?P<callee>[\w.<>]+)\(\) got an unexpected keyword argument "
               r"'(?P<name>\w+)'",
    "name": r"^\s*name '(?P<name>sgl_\w+|\w+_kernel\w*)' is not defined",
    "circular": r"^\s*cannot import name '(?P<name>[\w.]+)' from partially initialized module "
                r"'(?P<module>[\w.]+)'",
    "circular-attribute": r"^\s*partially initialized module '(?P<module>[\w.]+)'(?: from "
                          r"'(?P<origin>[^'\n]+)')? has no attribute '(?P<name>\w+)'",
    "lazy": r"^\s*Failed to import (?P<importer>[\w.]+) because of the following error \(look up "
            r"to see its traceback\):\s*cannot import name '(?P<name>[\w.]+)' from "
            r"'(?P<module>[\w.]+)'",
}
_TEMPLATE = {
    "import": "cannot import name '{name}' from '{module}'",
    "attribute": "module '{module}' has no attribute '{name}'",
    "keyword": "{callee}() got an unexpected keyword argument '{name}'",
    "name": "name '{name}' is not defined",
    "circular": "cannot import name '{name}' from partially initialized module '{module}' "
                "(most likely due to a circular import)",
    "circular-attribute": "partially initialized module '{module}' has no attribute '{name}' "
                          "(most likely due to a circular import)",
    "lazy": "Failed to import {importer} because of the following error (look up to see its "
            "traceback):\ncannot import name '{name}' from '{module}'",
}
_CLASS = {"import": "ImportError", "attribute": "AttributeError", "keyword": "TypeError",
          "name": "NameError", "circular": "ImportError", "lazy": "RuntimeError",
          "circular-attribute": "AttributeError"}
# who makes each form's message: Python's import machinery, or transformers' lazy importer
# (`_LazyModule._get_module`'s re-raise, in the transformers releases the index reads)
_SOURCE = {"lazy": ("transformers", ["4.48.3..5.25.0"])}


def records(examples: dict[str, tuple[list[str], list[str]]] | None = None
            ) -> list[dict[str, Any]]:
    """The generic records, one per form (`No module named` is the curated
    `missing-python-module`'s; its events get the same computed fix)."""
    import hashlib

    out = []
    for kind in ("import", "attribute", "keyword", "name", "circular", "lazy",
                 "circular-attribute"):
        slug = f"dependency-version-mismatch-{kind}"
        rid = hashlib.sha256(f"sglang-matcher/generated/{GENERATOR}\n{kind}".encode()
                             ).hexdigest()[:16]
        match, no_match = (examples or {}).get(kind, ([], []))
        out.append({
            "id": rid, "slug": slug, "errorMessage": _TEMPLATE[kind],
            "messagePattern": _PATTERNS[kind], "errorType": "dependency",
            "errorClass": _CLASS[kind], "severity": "error",
            "documentation": _DOC[kind] + ("" if kind.startswith("circular") else
                                           " Which releases of the package have it, and the "
                                           "version the sglang release in the log pins, are "
                                           "computed for each event from the shipped symbol "
                                           "index."),
            "solutions": _SOLUTIONS.get(kind.split("-")[0], []),
            "tags": ["dependency", "version-mismatch", kind],
            # the message is Python's own (its import system, its call machinery), or the
            # lazy importer's of transformers
            "sourcePackage": _SOURCE.get(kind, ("cpython", []))[0],
            "sourceVersions": _SOURCE.get(kind, ("", ["3.10..3.13"]))[1], "generator": GENERATOR,
            "schemaVersion": 2,
            "examples": {"match": match, "noMatch": no_match},
        })
    return out


# Real lines each record must match (`catalog test`): where each was seen.
EXAMPLES: dict[str, tuple[list[str], list[str]]] = {
    # sglang #23535 (sglang-router 0.3.2 on sglang 0.5.10), as pasted there
    # and torch 2.13.0+cpu: `from torch.distributed import gather_into_tensor` (2.14.1's)
    # and sglang #3626 (train, tests/fixtures/field/sglang-f), a Qwen2.5-VL launch
    "import": (["ImportError: cannot import name 'is_port_available' from 'sglang.srt.utils'",
                ("ImportError: cannot import name 'gather_into_tensor' from 'torch.distributed' "
                "(/tmp/tvenv/lib/python3.11/site-packages/torch/distributed/__init__.py)"),
                ("ImportError: cannot import name 'is_valid_list_of_images' from "
                 "'transformers.models.mllama.image_processing_mllama' (/home/team/code/sglang/venv"
                 "/lib/python3.10/site-packages/transformers/models/mllama/"
                 "image_processing_mllama.py)")],
               []),
    # torch 2.13.0+cpu from PyPI: `torch.cuda.set_device(0)` (tests/fixtures/deps/torch-2.13.0);
    # sglang #22279 (train, tests/fixtures/field/sglang-f): the aiter of the v0.5.10 ROCm images
    "attribute": (["AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
                   "AttributeError: module 'aiter' has no attribute 'dtypes'"],
                  []),
    # torch 2.13.0+cpu: `init_process_group('gloo', enable_reconfigure=True)` (2.14.1's)
    "keyword": ([("TypeError: init_process_group() got an unexpected keyword argument "
                 "'enable_reconfigure'")], []),
    "name": ([], []),
    # https://github.com/luca-medeiros/lang-segment-anything/issues/67 (train), as pasted:
    # transformers' lazy import of its generation utils, huggingface_hub too old for it
    "lazy": ([("RuntimeError: Failed to import transformers.generation.utils because of the "
               "following error (look up to see its traceback):\ncannot import name "
               "'split_torch_state_dict_into_shards' from 'huggingface_hub' (/usr/local/lib/"
               "python3.10/dist-packages/huggingface_hub/__init__.py)")], []),
    # sglang #384 (train): a user's script importing sglang under a shadowing name
    "circular": ([("ImportError: cannot import name 'function' from partially initialized module "
                  "'sglang' (most likely due to a circular import)")], []),
    # https://github.com/mit-han-lab/smoothquant/issues/50 and
    # https://github.com/pesser/stable-diffusion/issues/9 (train): the installed torch's own
    # modules; https://github.com/pytorch/pytorch/pull/134019 (train): a torch release's circle
    "circular-attribute": ([
        ("AttributeError: partially initialized module 'torch' has no attribute "
         "'UntypedStorage' (most likely due to a circular import)"),
        ("AttributeError: partially initialized module 'torch' has no attribute 'Tensor' (most "
         "likely due to a circular import)"),
        ("AttributeError: partially initialized module 'torch' has no attribute 'version' (most "
         "likely due to a circular import)")], []),
}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json

    from matcher.atomic import write_atomic

    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.mismatch",
                                 description="write the generic version-mismatch records")
    ap.add_argument("-o", "--out", type=Path, default=Path(__file__).resolve().parents[2]
                    / "patterns" / "sglang" / "generated" / "mismatch.jsonl")
    args = ap.parse_args(argv)
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n"
             for r in records(EXAMPLES)]
    write_atomic(args.out, "".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
