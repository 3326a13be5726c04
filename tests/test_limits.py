"""matcher.limits in a child Python started under a lowered descriptor limit (prlimit), as
systemd or a container runtime would start the daemon."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, resource
from matcher import limits
before = resource.getrlimit(resource.RLIMIT_NOFILE)
budget_before = limits.fd_budget(128)
raised = limits.raise_nofile_limit({ceiling})
after = resource.getrlimit(resource.RLIMIT_NOFILE)
print(json.dumps([before, budget_before, raised, after, limits.fd_budget(128)]))
"""


def run(nofile: str, ceiling: str = "limits.CEILING", seccomp_deny: bool = False) -> list:
    """Start a child under `prlimit --nofile=SOFT:HARD`; what it saw and did."""
    code = PROBE.format(ceiling=ceiling)
    if seccomp_deny:  # setrlimit refused, as a seccomp filter would (EPERM)
        code = ("import resource\n"
                "def refuse(*a):\n    raise PermissionError(1, 'Operation not permitted')\n"
                "resource.setrlimit = refuse\n" + code)
    out = subprocess.run(["prlimit", f"--nofile={nofile}", sys.executable, "-c", code],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_raises_the_soft_limit_to_the_hard_one():
    """systemd's default, soft 1024 under a higher hard limit: raised; the budget follows."""
    before, budget_before, raised, after, budget_after = run("1024:4096")
    assert (before, budget_before) == ([1024, 4096], 896)
    assert raised == [1024, 4096]
    assert (after, budget_after) == ([4096, 4096], 3968)


def test_soft_already_at_hard_is_left_alone():
    _, _, raised, after, budget = run("2048:2048")
    assert (raised, after, budget) == ([2048, 2048], [2048, 2048], 1920)


def test_the_raise_stops_at_the_ceiling():
    """Never above `ceiling` (fs.nr_open by default: Linux refuses a soft limit past it, which is
    why a hard limit of 'unlimited' is raised to the ceiling, not to itself)."""
    _, _, raised, after, _ = run("1024:4096", ceiling="3000")
    assert (raised, after) == ([1024, 3000], [3000, 4096])


def test_a_refused_setrlimit_never_fails_the_start():
    """setrlimit refused: nothing raised, the old soft limit reported twice, no exception."""
    _, _, raised, after, budget = run("1024:4096", seccomp_deny=True)
    assert (raised, after, budget) == ([1024, 1024], [1024, 4096], 896)


@pytest.mark.parametrize(("nofile", "budget"), [("100:100", 0), ("128:128", 0), ("129:129", 1)])
def test_a_limit_below_the_reserve_leaves_no_budget(nofile, budget):
    """Never negative: a limit that does not cover the reserve leaves 0 files."""
    assert run(nofile)[4] == budget
