"""What to do about a name a package lacks when no version can be computed for it.

`matcher.catalog.mismatch` answers `cannot import name 'X' from 'P.m'` and `module 'P.m' has
no attribute 'X'` with the release of P to install when P's symbol index or sglang's pins
place the name. When they do not — P has no index and no pin that decides, the index has no
module P.m, or every release read defines X — the cause is still one of a few, each with a
command that tells them apart and a fix:

- **another copy of P is imported**: a `P.py` or `P/` in the working directory or on
  PYTHONPATH, a source checkout: the file Python imports is not under site-packages;
- **a version of P the importing code was not written for**: whose code imports it is the
  traceback's innermost frame outside P — an installed package Q (its requirement on P is what
  to install: `pip check` says whether the installed P meets it), sglang (its own requirement;
  sglang's own module missing means files of two sglang builds), or a project's script;
- **every release read defines X**: the installed P is older than those releases, or a build
  or install of P that lacks part of it (a CPU-only torch has no CUDA functions).

Each answer names the package, its distribution and the importer from the event. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer, requires
from matcher.catalog.symbols import DISTRIBUTION_OF_MODULE
from matcher.catalog.unindexed import IMPORT_DISTRIBUTION, importer

# `(…/P/m.py)` after the message: the file the module was imported from
_SOURCE = re.compile(r"\((?P<path>[^()]*\.(?:py|pyc|so|pyd))\)\s*$")
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
# names of CUDA-only parts, which a CPU-only build of torch and its kin lacks
_DEVICE_NAME = re.compile(r"cuda|cudnn|nccl|cublas|nvtx", re.IGNORECASE)


def distribution(top: str) -> str:
    """The distribution that installs the import name `top`."""
    named = DISTRIBUTION_OF_MODULE.get(top, ())
    return named[0] if named else IMPORT_DISTRIBUTION.get(top, re.sub(r"[-_.]+", "-", top).lower())


def requires_of(top: str, containing: str) -> str:
    """The command that prints what the distribution installing the import name `top`
    requires of `containing` (an import name's distribution is not always its name)."""
    if top in DISTRIBUTION_OF_MODULE or top in IMPORT_DISTRIBUTION:
        return requires(distribution(top), containing)
    return (f"python -c \"import importlib.metadata as m; d = m.packages_distributions()"
            f"['{top}'][0]; print(d, [r for r in m.requires(d) if '{containing}' in r])\"")


def imported_file(message: str) -> str | None:
    m = _SOURCE.search(message.strip())
    return m["path"] if m else None


def answer(module: str, name: str | None, message: str, traceback: str | None,
           everywhere: str | None = None, dist: str | None = None) -> Answer:
    """`module`, `name`: what the message names (`name` None for `No module named`);
    `everywhere`: the releases read that all define it (`2.5.1..2.14.1`), when that is why
    no version was computed; `dist`: the distribution, when its index names it."""
    top = module.split(".", 1)[0]
    dist = dist or distribution(top)
    what = f"`{module}.{name}`" if name else f"`{module}`"
    where = imported_file(message)
    if where is not None and not _INSTALLED.search(where):
        return _local_copy(top, dist, what, where)
    look = (f"See which {dist} is imported: pip show {dist} (its version); python -c "
            f"'import {top}; print({top}.__file__)' must print a file under site-packages — "
            f"else a `{top}.py` or `{top}/` in the working directory or on PYTHONPATH hides the "
            "installed one: rename it")
    if everywhere is not None:
        return _everywhere(top, dist, what, everywhere, look, name)
    who = importer(traceback, top)
    doc, act = _by_importer(who, top, dist, what)
    return Answer(doc, (act, look), ())


def _local_copy(top: str, dist: str, what: str, where: str) -> Answer:
    """The module's file is outside site-packages: a source checkout installed in place
    (`pip install -e`, as sglang's ROCm images install aiter), or a `top` on the path ahead
    of the installed package. `pip show` tells which."""
    return Answer(
        f"{what} is missing from {where}, outside site-packages: a source checkout of {dist} "
        f"(an editable install) at another version than the importing code wants, or a `{top}` "
        "in the working directory or on PYTHONPATH imported ahead of the installed package.",
        ((f"pip show {dist} gives the installed location: if it is not that directory, run from "
         f"another directory or rename the `{top}` there; if it is (an editable install), check "
         f"out the {dist} version the importing code requires and reinstall it (pip install -e "
         "<checkout>)"),),
        ())


def _by_importer(who: str | None, top: str, dist: str, what: str) -> tuple[str, str]:
    """The documentation and the fix for the code that imported it: an installed package,
    sglang, a project's script, or not shown."""
    if top == "sglang":
        return _sglang_itself(who, what)
    if who == "sglang":
        return ((f"sglang's code uses {what}, which the installed {dist} lacks: it is not a "
                f"version of {dist} this sglang was written for."),
                (f"Install the {dist} your sglang requires: {requires('sglang', dist)} prints the "
                f"requirement, pip check says whether the installed {dist} meets it; then pip "
                f"install '{dist}<that requirement>' (or the {dist} of the lmsysorg/sglang image "
                "of your release)"))
    if who:
        return ((f"{who}'s code uses {what}, which the installed {dist} lacks: the installed "
                f"{who} and {dist} are releases not made for each other."),
                (f"Install the {dist} that the installed {who} requires: pip check names it when "
                f"the installed {dist} is outside that requirement ({requires_of(who, dist)} "
                f"prints it); then pip install '{dist}<that requirement>', or install the "
                f"release of {who}'s distribution written for the {dist} you have"))
    if who == "":
        return ((f"Your code (a script or project, not an installed package) uses {what}, which "
                f"the installed {dist} lacks: it was written for another version of {dist}."),
                (f"Install the {dist} version your project's requirements name: pip install "
                f"'{dist}==<that version>' (pip show {dist} gives the installed one)"))
    return ((f"The installed {dist} lacks {what}: the code importing it (not shown) was written "
            f"for another version of {dist}."),
            (f"Install the {dist} that the importing code requires — sglang's: "
            f"{requires('sglang', dist)} prints it; another package's: pip check names it when "
            f"the installed {dist} is outside it — then pip install '{dist}<that requirement>'"))


def _sglang_itself(who: str | None, what: str) -> tuple[str, str]:
    reinstall = ("pip install --force-reinstall --no-deps 'sglang==<the version you run>' (pip "
                 "show sglang), or for a source checkout pip install -e 'python' from its root, "
                 "after pip uninstall sglang")
    if who == "sglang":
        return ((f"sglang's module lacks {what}, which sglang's own code imports: its files are "
                "of two builds (a source checkout over an installed wheel, an upgrade that did "
                "not finish)."),
                f"Reinstall sglang whole: {reinstall}")
    if who is None:
        return ((f"sglang's module lacks {what}: the code importing it (not shown) was written "
                "for another sglang, or sglang's files are of two builds."),
                (f"If sglang's own code imports it, reinstall sglang whole: {reinstall}; if "
                "another project's does, install the sglang release that project requires"))
    if who == "":
        return ((f"Your code uses {what}, which the installed sglang lacks: it was written for "
                "another sglang release."),
                ("Install the sglang release your project was written for (its requirements or "
                "install script): pip install 'sglang==<that version>' (pip show sglang gives "
                "the installed one)"))
    return ((f"{who}'s code uses {what}, which the installed sglang lacks: the installed {who} "
            "was written for another sglang release."),
            (f"Install the sglang that the installed {who} requires: pip check names it when the "
            f"installed sglang is outside that requirement ({requires(who, 'sglang')} prints "
            f"it), or install the {who} release written for the sglang you run"))


def _everywhere(top: str, dist: str, what: str, releases: str, look: str,
                name: str | None) -> Answer:
    first = releases.split("..", 1)[0]
    if top == "sglang":  # every release has it: another copy, or a broken install
        return Answer(
            f"Every release of sglang read ({releases}) defines {what}: another copy of sglang "
            "is imported (a checkout or a folder named `sglang`), or its files are of two "
            "builds.", (look, _sglang_itself("sglang", what)[1]), ())
    doc = (f"Every release of {dist} read ({releases}) defines {what}: the installed {dist} is "
           f"older than {first}, another copy of {top} is imported, or the install lacks part "
           "of the package.")
    fixes = [look,
             (f"If pip show {dist} gives a version older than {first}, install the {dist} your "
              f"sglang requires ({requires('sglang', dist)} prints it); if it gives one of "
              f"{releases}, the install is incomplete: pip install --force-reinstall --no-deps "
              f"'{dist}==<that version>'")]
    if name and _DEVICE_NAME.search(name) and top == "torch":
        doc += f" {what} is a CUDA part: a CPU-only build ({dist} version ending in `+cpu`) lacks it."
        fixes.insert(0, (f"If pip show {dist} gives a `+cpu` version, install the CUDA build of "
                         f"the same version from the CUDA index of your CUDA release, e.g. pip "
                         f"install --force-reinstall '{dist}==<version>' --index-url "
                         "https://download.pytorch.org/whl/cu128"))
    return Answer(doc, tuple(fixes), ())


# `cannot import name 'X' from partially initialized module 'P.m' (most likely due to a
# circular import) (/…/P/m.py)`
CIRCULAR = re.compile(r"cannot import name '(?P<name>[\w.]+)' from partially initialized module "
                      r"'(?P<module>[\w.]+)'")
# `partially initialized module 'P' has no attribute 'X' (most likely due to a circular
# import)`; CPython 3.12 on names the module's file: `… module 'P' from '/…/P/__init__.py' has …`
CIRCULAR_ATTRIBUTE = re.compile(r"partially initialized module '(?P<module>[\w.]+)'(?: from "
                                r"'(?P<origin>[^'\n]+)')? has no attribute '(?P<name>\w+)'")


def circular(message: str, traceback: str | None) -> Answer | None:
    """A module imported while it was still being imported. Where the module's file is tells
    which circle: a file named like the package (a user's `sglang.py`) imported instead of the
    installed one; a directory outside site-packages — a checkout run from its root, or an
    editable install's own circle; inside site-packages, the installed package's own modules
    importing each other — a bug of that release or files of two releases mixed. No file shown:
    None (the record's own words stand)."""
    m = CIRCULAR.search(message) or CIRCULAR_ATTRIBUTE.search(message)
    if m is None:
        return None
    module = m["module"]
    top = module.split(".", 1)[0]
    dist = distribution(top)
    origin = m.groupdict().get("origin")
    where = origin or imported_file(message) or _frame_of(module, traceback)
    if where is None:
        return None  # the record's own words (a file named like the package) stand
    if not _INSTALLED.search(where) and where.endswith(f"/{top}.py"):
        return Answer(
            f"`{module}` is {where}: a file named like the package, imported instead of the "
            f"installed {dist}, imports itself.",
            ((f"Rename {where} (and delete the __pycache__ beside it), then python -c 'import "
             f"{top}; print({top}.__file__)' must print a file under site-packages"),), ())
    if not _INSTALLED.search(where):
        return Answer(
            f"`{module}` is {where}, outside site-packages: a directory named `{top}` (a "
            f"checkout run from its root) imported ahead of the installed {dist}, or an "
            "editable install whose modules import each other in a circle.",
            ((f"pip show {dist} gives the installed location: if it is not the directory above, "
             f"run from another directory or rename that `{top}` directory; if it is (an "
             f"editable install), update the checkout and reinstall it (pip install -e), or "
             f"install a released {dist}"),), ())
    return Answer(
        f"`{module}` is the installed {dist}'s own module ({where}): its modules import each "
        f"other in a circle when `{module}` is imported first — a bug of that release, or files "
        f"of two {dist} releases mixed. No file of yours shadows it.",
        ((f"Reinstall {dist} whole: pip install --force-reinstall --no-deps '{dist}==<the version "
         f"you run>' (pip show {dist}); if it persists it is that release's bug: install a later "
         f"{dist} (pip install -U {dist}), and report it to {dist}'s issues with the traceback "
         "if that has it too"),), ())


def _frame_of(module: str, traceback: str | None) -> str | None:
    """The path of the traceback's frame in `module`'s file."""
    path = module.replace(".", "/")
    m = re.search(rf'File "(?P<path>[^"]*/{re.escape(path)}(?:/__init__)?\.py)"', traceback or "")
    return m["path"] if m else None
