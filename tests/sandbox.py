"""A root filesystem of our own, entered with bubblewrap: how the image's steps and the systemd
install recipe are run here without Docker and without touching this machine's own /etc, /opt or
/usr/local.

A sandbox root is a directory of the test's: /etc copied from this machine, /usr bound
read-only (Debian 12, as the python:3.11-slim image and a Debian host have it), /bin, /lib …
as links into /usr, /proc and /dev fresh. What a step writes lands in that directory.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from debian import require_tool

PATH_TAIL = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TOP = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


@dataclass
class Stage:
    name: str
    base: str
    root: Path
    python: Path | None = None  # the stage's fresh venv: the image's Python
    workdir: str = "/"
    env: dict[str, str] = field(default_factory=dict)
    user: str = "0"
    seconds: dict[str, float] = field(default_factory=dict)


def dockerfile_steps(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", text)
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            steps.append((word.upper(), rest.strip()))
    return steps


def new_root(path: Path) -> None:
    """A root filesystem of the sandbox: its own writable tree, /etc copied from this machine,
    /bin, /lib … as this machine has them (links into /usr on Debian 12, as in the image)."""
    path.mkdir(parents=True)
    shutil.copytree("/etc", path / "etc", symlinks=True,
                    ignore_dangling_symlinks=True, dirs_exist_ok=True)
    for name in _TOP:
        host = Path("/") / name
        if host.is_symlink():
            (path / name).symlink_to(os.readlink(host))
    for name in ("usr", "root", "tmp", "proc", "dev", "var", "opt", "run"):
        (path / name).mkdir(exist_ok=True)


def sandbox(stage: Stage, *, read_only: bool = False, binds: tuple[tuple[Path, str], ...] = (),
            ro_binds: tuple[tuple[Path, str], ...] = (), own_network: bool = False) -> list[str]:
    """The bwrap command line that enters `stage`'s root."""
    inside = [sys.base_prefix, *([] if stage.python is None else [str(stage.python)]),
              *(d for _, d in (*binds, *ro_binds))]
    for path in inside:  # mount points made here, readable by all as an image's would be
        for parent in reversed(Path(path).parents[:-1]):
            made = stage.root / parent.relative_to("/")
            if not made.is_symlink() and not made.exists() and parent.parts[1] != "usr":
                made.mkdir()
                made.chmod(0o755)
    argv = [require_tool("bwrap", "bubblewrap"), "--die-with-parent",
            "--ro-bind" if read_only else "--bind", str(stage.root), "/",
            "--ro-bind", "/usr", "/usr"]
    for name in _TOP:
        host = Path("/") / name
        if host.is_dir() and not host.is_symlink():
            argv += ["--ro-bind", str(host), f"/{name}"]
    # What this machine's pip configuration points at (its /etc/pip.conf), each entry of /opt
    # on its own: /opt itself is the sandbox's, writable.
    for entry in sorted(Path("/opt").iterdir()) if Path("/opt").is_dir() else ():
        argv += ["--ro-bind", str(entry), str(entry)]
    argv += ["--ro-bind", sys.base_prefix, sys.base_prefix]
    if stage.python is not None:
        argv += ["--ro-bind" if read_only else "--bind", str(stage.python), str(stage.python)]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for host, inside in binds:
        argv += ["--bind", str(host), inside]
    for host, inside in ro_binds:
        argv += ["--ro-bind", str(host), inside]
    if own_network:
        argv += ["--unshare-net", "--unshare-pid"]
    path = PATH_TAIL if stage.python is None else f"{stage.python}/bin:{PATH_TAIL}"
    env = {"PATH": path, "LANG": "C.UTF-8", "HOME": "/root",
           **{k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")},
           **stage.env}
    argv += ["--clearenv", "--chdir", stage.workdir]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv


