"""A class that is not a valid dataclass where it is defined, and whose release to install.

    TypeError: non-default argument 'vision_config' follows default argument

Python's `dataclasses` raises this while a module is imported, at a class whose fields put one
without a default after one with a default (Python 3.13 adds the defaulted field's name:
`… follows default argument 'x'`). The class is the one at the traceback's innermost frame
outside `dataclasses.py`. In sglang's logs it is a model config: transformers 5.4.0 and later
make every `PretrainedConfig` subclass a dataclass when it is defined
(`transformers/configuration_utils.py`, `__init_subclass__`: `cls = dataclass(cls,
repr=False)`; 5.3.0 and earlier do not, read from their wheels), so a config class written for
an earlier transformers may no longer define (sglang#21510: `DeepseekVL2Config` under
transformers 5.x). The answer names the class's file and package from the frames and, when
transformers made the dataclass, the first sglang release whose pins are from 5.4.0 on
(`sglang-pins.tsv`). Pure but for reading the pin table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from matcher.catalog.answer import Answer, requires
from matcher.frames import frames_of_text

MESSAGE = re.compile(r"non-default argument '(?P<argument>\w+)' follows default argument")
# The first transformers whose `PretrainedConfig.__init_subclass__` makes a dataclass.
DATACLASS_CONFIGS = "5.4.0"

_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\](?P<package>[A-Za-z_]\w*)[/\\]")
_SGLANG = re.compile(r"(?:^|[/\\])sglang[/\\]")
_TRANSFORMERS_CONFIG = re.compile(r"(?:^|[/\\])transformers[/\\]configuration_utils\.py$")


@dataclass(frozen=True, slots=True)
class Site:
    path: str
    line: str
    source: str | None
    package: str | None  # the installed package the file belongs to; None for one's own code


def answer(message: str, traceback: str | None) -> Answer | None:
    """What to install for the class the traceback shows; None without a message of this
    shape or without the frame of the class (a lone line: the record's own words stand)."""
    found = MESSAGE.search(message)
    site = _class_site(traceback or "")
    if found is None or site is None:
        return None
    argument = found.group("argument")
    where = f"`{site.path}`, line {site.line}" + (f" (`{site.source}`)" if site.source else "")
    if _transformers_made(traceback or ""):
        return _under_transformers(argument, where, site)
    return _own_dataclass(argument, where, site)


def _class_site(traceback: str) -> Site | None:
    """The innermost frame outside `dataclasses.py` and transformers' config base: the class."""
    for frame in reversed(frames_of_text(traceback)):
        path = frame.path
        if (path.endswith("dataclasses.py") or path.startswith("<")
                or _TRANSFORMERS_CONFIG.search(path)):
            continue
        package = _PACKAGE.search(path)
        name = package.group("package") if package else (
            "sglang" if _SGLANG.search(path) else None)
        return Site(path, str(frame.line), frame.source or None, name)
    return None


def _transformers_made(traceback: str) -> bool:
    return any(_TRANSFORMERS_CONFIG.search(f.path) and f.function == "__init_subclass__"
               for f in frames_of_text(traceback))


def _under_transformers(argument: str, where: str, site: Site) -> Answer:
    owner = site.package or "the package that defines it"
    doc = (f"transformers {DATACLASS_CONFIGS} and later make every `PretrainedConfig` subclass "
           f"a dataclass when it is defined (`__init_subclass__`); the config class at {where} "
           f"declares `{argument}` without a default after fields with defaults, which a "
           f"dataclass may not: {owner} was written for a transformers before "
           f"{DATACLASS_CONFIGS}, and the installed one is {DATACLASS_CONFIGS} or later.")
    solutions: list[str] = []
    installs: list[str] = []
    if site.package == "sglang":
        since = first_sglang_pinning_dataclass_configs()
        if since:
            solutions.append(f"Upgrade sglang to {since} or later, whose pins are transformers "
                             f"{DATACLASS_CONFIGS} or later and whose config classes are "
                             f"declared for it: pip install -U 'sglang>={since}'")
            installs.append(f"sglang>={since}")
        solutions.append(f"Or keep this sglang{f' (before {since})' if since else ''} and "
                         f"install the transformers it pins, one before {DATACLASS_CONFIGS} "
                         f"({requires('sglang', 'transformers')} prints it): pip install "
                         f"'transformers<{DATACLASS_CONFIGS}'")
        installs.append(f"transformers<{DATACLASS_CONFIGS}")
    else:
        solutions.append(f"Install the transformers {owner} requires, one before "
                         f"{DATACLASS_CONFIGS}: pip install 'transformers<{DATACLASS_CONFIGS}'"
                         + (f" ({requires(site.package, 'transformers')} prints its requirement)"
                            if site.package else ""))
        installs.append(f"transformers<{DATACLASS_CONFIGS}")
        solutions.append(f"Or upgrade {owner} to a release written for transformers "
                         f"{DATACLASS_CONFIGS} or later")
    return Answer(doc, tuple(solutions), tuple(installs), replaces=True)


def _own_dataclass(argument: str, where: str, site: Site) -> Answer:
    if site.package is None:
        doc = (f"The dataclass at {where} declares `{argument}` without a default after "
               f"fields with defaults (its own, or those of a dataclass it inherits).")
        reorder = (f"Give `{argument}` a default, move it before the fields with defaults, or "
                   f"declare the class `@dataclass(kw_only=True)` (Python 3.10 and later)")
        return Answer(doc, (reorder,), (), replaces=True)
    package = site.package
    doc = (f"The dataclass at {where}, in {package}, declares `{argument}` without a "
           f"default after fields with defaults, its own or those of a dataclass it inherits "
           f"(transformers {DATACLASS_CONFIGS} and later make `PretrainedConfig` one): the "
           f"installed {package} was not written for the packages installed with it.")
    dependencies = (f"Install the dependencies {package} requires, its base class's package "
                    f"first (for a config class, transformers: "
                    f"{requires(package, 'transformers')} prints the requirement), then "
                    f"`pip check`")
    another = (f"Or install another release of {package}, whose class is declared otherwise: "
               f"pip install -U {package}")
    return Answer(doc, (dependencies, another), (), replaces=True)


def first_sglang_pinning_dataclass_configs() -> str | None:
    """The sglang release from which every release pins transformers 5.4.0 or later (None when
    the pin table does not say)."""
    from matcher.catalog import pin_table
    from matcher.catalog.pep440 import version_key

    table = pin_table.load()
    if table is None:
        return None
    cut = version_key(DATACLASS_CONFIGS)
    since = None
    for release in reversed(table.releases):
        spec = table.spec("transformers", release) or ""
        if not (spec.startswith("==") and version_key(spec[2:]) >= cut):
            break
        since = release
    return since
