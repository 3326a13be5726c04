"""A keyword argument a package's later release removed, and what its caller must install.

    TypeError: Client.__init__() got an unexpected keyword argument 'proxies'

httpx 0.28.0 removed `proxies` from `Client` and `AsyncClient` (0.27.2 takes it; 0.28.0 takes
`proxy` alone). openai's client before 1.55.3 passes `proxies=` to them on every construction
(`openai/_base_client.py`: 1.55.2 always, 1.55.3 only when the caller gave proxies), so any
`OpenAI()` made with openai < 1.55.3 under httpx >= 0.28 fails this way; other clients written
for httpx < 0.28 do the same. The symbol index (`matcher.catalog.mismatch`) has no httpx, so the
answer is this table, read from those releases' wheels. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer

# (callee as Python prints it, keyword) → (the package, the first release without it, the last
# release with it)
REMOVED: dict[tuple[str, str], tuple[str, str, str]] = {
    ("Client.__init__", "proxies"): ("httpx", "0.28.0", "0.27.2"),
    ("AsyncClient.__init__", "proxies"): ("httpx", "0.28.0", "0.27.2"),
}
# callers whose release that still passes the keyword is known: package → the first release
# that no longer does
FIXED_CALLERS: dict[str, str] = {"openai": "1.55.3"}

# `File ".../site-packages/P/x.py"` (or `dist-packages`, `\` on Windows)
_FRAME = re.compile(r'File "[^"\n]*?[/\\](?:site|dist)-packages[/\\](?P<package>[A-Za-z_]\w*)[/\\]')


def caller(traceback: str | None) -> str | None:
    """The installed package of the traceback's innermost frame: the code that made the call."""
    found = _FRAME.findall(traceback or "")
    return found[-1] if found else None


def answer(callee: str, keyword: str, traceback: str | None) -> Answer | None:
    """What to install for a call with `keyword` that `callee` no longer takes; None when the
    table does not know the pair. Python before 3.10 prints `__init__()` alone: then the
    traceback must show a caller the table knows."""
    who = caller(traceback)
    if callee == "__init__":
        keys = [k for k in REMOVED if k[1] == keyword]
        if who not in FIXED_CALLERS or not keys:
            return None
        callee = keys[0][0]
    removed = REMOVED.get((callee, keyword))
    if removed is None:
        return None
    package, without, last = removed
    doc = (f"{package} {without} removed the `{keyword}` argument of `{callee.split('.')[0]}` "
           f"({last} still takes it): the code that called it was written for an older "
           f"{package}.")
    solutions: list[str] = []
    installs: list[str] = []
    fixed = {p: v for p, v in FIXED_CALLERS.items() if who in (None, p)}
    for p, v in fixed.items():
        when = "Upgrade" if who == p else \
            f"If the traceback shows {p}'s client making the call, upgrade"
        solutions.append(f"{when} {p}, whose releases from {v} on no longer pass "
                         f"`{keyword}`: pip install -U '{p}>={v}'")
        installs.append(f"{p}>={v}")
    if who is not None and who not in FIXED_CALLERS and who != package:
        solutions.append(f"Upgrade {who}, which made the call, to a release written for "
                         f"{package} >= {without}: pip install -U {who}")
    solutions.append(f"Or keep the caller and install the last {package} that takes "
                     f"`{keyword}`: pip install '{package}<{without}'")
    installs.append(f"{package}<{without}")
    return Answer(doc, tuple(solutions), tuple(installs))
