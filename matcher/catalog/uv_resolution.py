"""uv's account of why no set of versions satisfies every requirement, and the way out —
read per event from the line.

After `× No solution found when resolving dependencies:` uv (its PubGrub resolver) explains
the conflict as a chain of `Because …, we can conclude that …` sentences; the first one
(`╰─▶ Because …`) names the requirements that clash. Two of its forms name them outright:

    Because A==1 depends on P==1.0 and B==2 depends on P==2.0, we can conclude that A==1 and B==2 are incompatible.
    Because P was not found in the package registry and A==1 depends on P==1.0, we can conclude that A==1 cannot be used.

(uv wraps the sentence at the terminal's width, so only its head up to `we can conclude that`
is read.) In the first form the two requirements are of one package P; when the second
names A itself (`B depends on A`) the sentence is a step of the chain, not the clash, and
nothing is answered here. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer

# A requirement as uv prints it: a name (extras allowed), then a specifier or nothing.
_REQ = r"[A-Za-z0-9][\w.-]*(?:\[[\w,.-]*\])?[^\s,]*"
CONFLICT = re.compile(
    rf"Because (?P<a>{_REQ}) depends on (?P<req_a>{_REQ}) and (?P<b>{_REQ}) depends on "
    rf"(?P<req_b>{_REQ}), we can conclude that")
NOT_FOUND = re.compile(
    rf"Because (?P<package>{_REQ}) was not found in the package registry and (?P<a>{_REQ}) "
    rf"depends on (?P<req_a>{_REQ}), we can conclude that")
_SPLIT = re.compile(r"(?P<name>[A-Za-z0-9][\w.-]*)(?:\[[\w,.-]*\])?(?P<spec>.*)")


def _name(requirement: str) -> str:
    m = _SPLIT.fullmatch(requirement)
    return (m["name"] if m else requirement).lower().replace("_", "-")


def answer(message: str) -> Answer | None:
    """The requirements the sentence names and how to make them agree, or None for a
    sentence of another form (or a step of the chain)."""
    if (m := CONFLICT.search(message)) is not None:
        return _conflict(m["a"], m["req_a"], m["b"], m["req_b"])
    if (m := NOT_FOUND.search(message)) is not None:
        return _not_found(m["package"], m["a"], m["req_a"])
    return None


def _conflict(a: str, req_a: str, b: str, req_b: str) -> Answer | None:
    dep = _name(req_a)
    if dep != _name(req_b) or dep in (_name(a), _name(b)) or _name(a) == _name(b):
        return None
    doc = (f"{a} requires {req_a} and {b} requires {req_b}: no release of {dep} satisfies "
           f"both, so the two cannot be installed together.")
    agree = (f"Make the two requirements of {dep} agree: where {b} is your own project or "
             f"requirements file, require {dep} as {a} does ({req_a}); otherwise install a "
             f"release of {_name(a)} or {_name(b)} whose {dep} requirement admits the other's "
             f"(name them without versions and let uv choose)")
    apart = f"Or install {_name(a)} and {_name(b)} into separate environments"
    return Answer(doc, (agree, apart), ())


def _not_found(package: str, a: str, req_a: str) -> Answer:
    doc = (f"{a} requires {req_a}, and no package {package} is on the indexes uv reads: the "
           f"package was renamed, is published on another index, or the name is misspelt.")
    where = (f"Find where {package} is published (its project's install guide; `pip index "
             f"versions {package}`) and add that index (`--extra-index-url` or `--find-links`), "
             f"or install a release of {_name(a)} that requires a package your indexes have")
    return Answer(doc, (where,), ())
