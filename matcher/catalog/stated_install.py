"""The install a message states itself, read from each event's message.

Packages and sglang say what to install when something is missing or too old, in two shapes:

    awq quantization requires some operators from vllm. Please install vllm by `pip install vllm==0.8.4`
    --enable-http2 requires the 'granian' package. Install it with: pip install "sglang[http2]"
    bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1.
    W4A8 checkpoints require comfy-kitchen>=0.2.27 (`pip install -U comfy-kitchen`).

A `pip install` command gives its requirements when it holds nothing but requirements and
plain options (no editable install, requirements file, index, wheel path or placeholder, which
only the operator can fill in), and each later plain command its own (transformers' `requires
optimum library : `pip install optimum` and auto-gptq library 'pip install auto-gptq'`); else the words "<verb> X<op>V" (install, upgrade, require,
need) give `X<op>V` when X reads as a distribution's name — a bare name in prose is not taken
(`Please install mooncake` names a project, not its distribution), nor `SM>=90` or `NCCL>=2.11`. Read per event, so a message whose template has a hole for the
version (`pip install vllm=={version}`) gets the version its line shows. Pure.
"""

from __future__ import annotations

import re

from matcher.catalog.answer import Answer

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[\w,.-]+\])?"
_SPEC = r"(?:===|==|>=|<=|~=|!=|<|>)\d[\w.*+!-]*"
_REQUIREMENT = re.compile(rf"^{_NAME}(?:{_SPEC}(?:,{_SPEC})*)?$")
_VERSIONED = rf"{_NAME}{_SPEC}(?:,{_SPEC})*"

_COMMAND = re.compile(r"\b(?:uv\s+)?pip3?\s+install\s+(?P<args>[^`\n]*)")
# where a command written inside a sentence ends
_COMMAND_END = re.compile(r"[`)]|\s(?:or|and|to|then|first|before|if)\s|[.;,](?:\s|$)|\s*$")
# options that take no value and change nothing of what is installed
_PLAIN_OPTIONS = frozenset({"-U", "--upgrade", "--no-deps", "-q", "--quiet", "--pre",
                            "--force-reinstall", "--no-build-isolation", "--no-cache-dir", "-v",
                            "--user"})
_PROSE = re.compile(rf"(?i)\b(?:install|upgrade|requires?|needs?)\s+(?:to\s+)?[`'\"]?"
                    rf"(?P<req>{_VERSIONED})(?<![.,])")


def command_requirements(message: str) -> tuple[str, ...] | None:
    """The requirements of the first `pip install …` in the message, when it is a plain one."""
    m = _COMMAND.search(message)
    return _plain(m["args"]) if m else None


def commands_requirements(message: str) -> tuple[str, ...] | None:
    """The requirements of the plain `pip install …` commands of the message, in order, one per
    distribution (`requires optimum library : `pip install optimum` and auto-gptq library
    'pip install auto-gptq'`); None when the first is not a plain one. A later command that
    is not plain ends the reading."""
    out: dict[str, str] = {}
    for i, m in enumerate(_COMMAND.finditer(message)):
        got = _plain(m["args"])
        if got is None:
            if i == 0:
                return None
            break
        for r in got:
            out.setdefault(_base(r), r)
    return tuple(out.values()) or None


def _plain(args: str) -> tuple[str, ...] | None:
    """A command's requirements (what follows `pip install`), when it holds nothing else."""
    end = _COMMAND_END.search(args)
    out: list[str] = []
    for token in (args[: end.start()] if end else args).split():
        token = token.strip("'\"")
        if token.startswith("-"):
            if token not in _PLAIN_OPTIONS:
                return None  # -e, -r, -i, --index-url …: the command is the operator's to run
            continue
        if not _REQUIREMENT.match(token):
            return None  # a path, a URL, a wheel file, a placeholder
        out.append(token)
    return tuple(out) or None


# "Cannot install X==v because …", "failed to install X>=v": what did not work, not what to do
_REFUSED = re.compile(r"(?i)\b(?:cannot|can't|could not|couldn't|unable to|failed to|fail to|"
                      r"not)\s+$")
# a distribution's name in words: lower case letters first, no `_` — not a GPU's `SM>=90`, a
# library's `NCCL>=2.11.1` or a variable's `page_size>1`, and not a toolchain pip does not install
_DISTRIBUTION = re.compile(r"^(?!(?:python|cuda|gcc|nvcc|glibc|rocm|driver)\b)[a-z][a-z0-9.-]*"
                           r"(?:\[[\w,.-]+\])?(?:[<>=!~]|$)")
_HINT = ("install", "Install", "INSTALL", "requir", "Requir", "need", "Need", "upgrade", "Upgrade")
_BASE = re.compile(r"^[A-Za-z0-9._-]+")
_BARE = re.compile(rf"^{_NAME}$")


def _base(requirement: str) -> str:
    m = _BASE.match(requirement)
    return re.sub(r"[-_.]+", "-", m.group(0)).lower() if m else requirement


def requirements(message: str) -> tuple[str, ...] | None:
    """What the message says to install: its plain commands' requirements (a bare name given
    the version the words require of it: `require x>=1.2 (pip install -U x)`), else the first
    versioned requirement its words name."""
    if not any(h in message for h in _HINT):
        return None
    versioned = {_base(m["req"]): m["req"] for m in _PROSE.finditer(message)
                 if _DISTRIBUTION.match(m["req"]) and not _REFUSED.search(message, 0, m.start())}
    got = commands_requirements(message)
    if got:
        return tuple(versioned.get(_base(r), r) if _BARE.match(r) else r for r in got)
    return (next(iter(versioned.values())),) if versioned else None


def answer(message: str) -> Answer | None:
    reqs = requirements(message)
    if not reqs:
        return None
    quoted = " ".join(f"'{r}'" for r in reqs)
    return Answer(f"The message names what to install: {', '.join(reqs)}.",
                  (f"Install what the message names: pip install {quoted}",), reqs[:1])


# The curated family record of exceptions no other record knows whose message says what to
# install (`matcher.install_stated` makes such an exception its event), and the classes a
# package's check raises when what it needs is missing or too old.
FAMILY_RECORD = "message-states-install"
FAMILY_CLASSES = frozenset({"ImportError", "ModuleNotFoundError", "ValueError", "RuntimeError"})


def of_the_family(error_class: str, message: str) -> bool:
    """An exception of `FAMILY_CLASSES` whose message names what to install."""
    return error_class.rsplit(".", 1)[-1] in FAMILY_CLASSES and requirements(message) is not None
