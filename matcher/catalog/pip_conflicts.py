"""pip's report of an installed package whose requirement the environment does not meet, and
the install that meets it — read per event from the line.

pip prints, after an install (`pip/_internal/commands/install.py`, `_warn_about_conflicts`,
under `ERROR: pip's dependency resolver does not currently take into account …`) and in
`pip check` (`commands/check.py`), one line per broken requirement:

    {name} {version} requires {requirement}, but you have {dep_name} {dep_version} which is incompatible.
    {name} {version} requires {requirement}, which is not installed.

(pip 23.2.1's templates; `has requirement … but you have X v.` is `pip check`'s, `you'll` the
legacy resolver's.) The install went on regardless: the package named first may fail when it
imports what it requires. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer

_NAME = r"[A-Za-z0-9][\w.-]*"
_VERSION = r"[\w.!+-]+"
MESSAGE = re.compile(
    rf"^\s*(?P<dist>{_NAME}) (?P<version>{_VERSION}) (?:requires|has requirement) "
    rf"(?P<requirement>[^\n]+?)(?:, which is not installed\.|, but you(?:'ll)? have "
    rf"(?P<have_dist>{_NAME}) (?P<have_version>{_VERSION})(?: which is incompatible)?\.)\s*$",
    re.MULTILINE)


def answer(message: str) -> Answer | None:
    """The install that meets the requirement pip names, and the other way out for a conflict."""
    m = MESSAGE.search(message)
    if m is None:
        return None
    dist, version = m["dist"], m["version"]
    requirement = m["requirement"].split(";", 1)[0].strip()  # an environment marker is pip's
    meet = f"Install what {dist} {version} requires: pip install '{requirement}'"
    check = ", then `pip check` lists anything else that breaks"
    if m["have_dist"] is None:
        doc = f"{dist} {version} requires {requirement}, which is not installed."
        return Answer(doc, (meet + check,), (requirement,))
    have = f"{m['have_dist']} {m['have_version']}"
    doc = (f"{dist} {version} requires {requirement}, but {have} is installed: {dist} may fail "
           f"where it uses {m['have_dist']}.")
    keep = (f"Or keep {have}: install a release of {dist} whose requirement admits it "
            f"(pip install -U {dist}, then `pip check`)")
    return Answer(doc, (f"{meet} (it replaces {have}){check}", keep), (requirement,))
