r"""torch's own C++ log lines → catalog records: what torch's distributed (c10d) and CUDA runtime
write to the log when something goes wrong, in c10's glog-like format —
`[rank1]:[W1119 17:59:26.271588084 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(…):
Failed to recv, got 0 bytes. …` (`E`, `W` or `F` for the level, then the date, the time, the file
and the line that logged it).

    python -m matcher.catalog.torch_logs [--dir DIR | --tree DIR] [-o patterns/sglang/generated/torch-logs.jsonl]

The source is the release tarball `torch_native` reads (Debian's copy of PyTorch's, kept in
`$SGLANG_MATCHER_CACHE_DIR/torch`), or an extracted tree (`--tree`). Read:
`torch/csrc/distributed/c10d/` (ProcessGroupNCCL and its watchdog, NCCLUtils, TCPStore and its
sockets, ProcessGroupGloo, the flight recorder …; not the MPI and UCC process groups, which an
sglang server does not run), `c10/cuda`, `aten/src/ATen/cuda`, `torch/csrc/cuda` and
`torch/csrc/CudaIPCTypes.cpp` (the CUDA tensors sglang's processes share).

Each `LOG(ERROR|WARNING|FATAL)`, `C10D_ERROR`/`C10D_WARNING` and, in c10d, `TORCH_WARN` gives
its messages (`torch_log_sites`: a message built before the statement is followed to where it is
made; c10d's macros put `[c10d] ` in front). A message is searched anywhere in a line from its
first literal of at least 12 characters (what comes before — c10d's `[PG ID 2 PG GUID 3 Rank 1] `
— is left out), its first line only; one with less literal text than that (20 characters in
all) is dropped. The record's severity is the level's (ERROR and FATAL: error; WARNING:
warning); it says what torch logged and where, and carries a way to fix only where the message
itself names the setting to change (`MESSAGE_FIXES`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matcher.catalog import torch_native
from matcher.catalog.cpp_checks import Hole, Part, plain_text
from matcher.catalog.sgl_kernel import message_pattern
from matcher.catalog.source_text import join_literals
from matcher.catalog.torch_log_sites import C10D_MACROS, C10D_PREFIX, LogSite, log_sites
from matcher.catalog.torch_native import GENERATED, VERSIONS, default_dir, fetch, shape_of, slug

PACKAGE = "torch"
GENERATOR = "matcher.catalog.torch_logs"
ID_PREFIX = "sglang-matcher/torch-logs/"
DEFAULT_OUTPUT = GENERATED / "torch-logs.jsonl"
SUFFIXES = (".cpp", ".cu", ".cuh", ".h", ".hpp", ".cc")
IN_SCOPE = re.compile(
    r"torch/csrc/distributed/c10d/.+|c10/cuda/.+|aten/src/ATen/cuda/.+|torch/csrc/cuda/.+"
    r"|torch/csrc/CudaIPCTypes\.cpp")
LEFT_OUT = re.compile(r"/(?:ProcessGroupMPI|ProcessGroupUCC|UCCUtils|UCCTracing|hip|test)[^/]*"
                      r"(?:/|$)")
WARNINGS_READ = re.compile(r"torch/csrc/distributed/c10d/")  # where TORCH_WARN is read
MARKERS = ("LOG(", "C10D_ERROR", "C10D_WARNING", "TORCH_WARN")
MIN_FIRST_LITERAL = 12
MIN_LITERAL = 20


def in_scope(member: str) -> str | None:
    """The path inside the source tree of a tarball member (`pytorch-v2.6.0/c10/…`), or None
    when it is not read."""
    rel = member.split("/", 1)[1] if "/" in member else member
    if not rel.endswith(SUFFIXES) or LEFT_OUT.search("/" + rel):
        return None
    return rel if IN_SCOPE.fullmatch(rel) else None


def tarball_files(path: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope files of a release tarball that log."""
    return torch_native.tarball_files(path, in_scope, MARKERS)


def tree_files(root: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of the in-scope files of an extracted source tree that log."""
    for p in sorted(root.rglob("*")):
        rel = in_scope(root.name + "/" + p.relative_to(root).as_posix()) if p.is_file() else None
        if rel:
            text = p.read_text(encoding="utf-8", errors="replace")
            if any(k in text for k in MARKERS):
                yield rel, text


def release_sites(files: Iterable[tuple[str, str]]) -> list[LogSite]:
    out: list[LogSite] = []
    for path, text in files:
        out.extend(log_sites(text, path, warnings=bool(WARNINGS_READ.match(path))))
    return out


def searched_parts(parts: Sequence[Part]) -> tuple[Part, ...] | None:
    """The part of a message a record searches: its first line, from its first literal of
    MIN_FIRST_LITERAL characters (what comes before is short text and values: a rank, a
    process group's prefix); None when no such literal, or too little literal text in all."""
    items = list(parts)
    for k, p in enumerate(items):
        if "\n" in (p if isinstance(p, str) else ""):
            items = [*items[:k], p.split("\n", 1)[0]] if isinstance(p, str) else items
            break
    start = next((k for k, p in enumerate(items)
                  if isinstance(p, str) and len(p.strip()) >= MIN_FIRST_LITERAL), None)
    if start is None:
        return None
    found: list[Part] = [str(items[start]).lstrip(), *items[start + 1:]]
    if isinstance(found[-1], str):  # a line's trailing blanks may not reach the log
        found[-1] = found[-1].rstrip()
    text = plain_text(tuple(found))
    if len(text.strip()) < MIN_LITERAL or " " not in text.strip():
        return None
    return tuple(p for p in found if p != "")


def logged_parts(site: LogSite) -> tuple[Part, ...]:
    """The message as the line shows it: c10d's macros put `[c10d] ` in front (which makes
    the short ones specific: `[c10d] Server shutting down`)."""
    if site.macro in C10D_MACROS:
        return join_literals([C10D_PREFIX, *site.parts])
    return site.parts


@dataclass(slots=True)
class Merged:
    key: str
    site: LogSite
    searched: tuple[Part, ...]
    versions: set[str] = field(default_factory=set)
    places: set[tuple[str, int, str]] = field(default_factory=set)
    levels: set[str] = field(default_factory=set)
    macros: set[str] = field(default_factory=set)


def template_of(parts: Sequence[Part]) -> str:
    return "".join("{" + p.expr + "}" if isinstance(p, Hole)
                   else p.replace("{", "{{").replace("}", "}}") for p in parts)


def record_id(key: str) -> str:
    return hashlib.sha256((ID_PREFIX + key).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class MessageFix:
    """A way to fix that the message itself states (it names the setting to change)."""

    words: re.Pattern[str]
    solution: str


MESSAGE_FIXES = (
    MessageFix(re.compile(r"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
               "If the watchdog is not stuck but waiting on a long operation, raise "
               "`TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC` in the server's environment, or turn the "
               "heartbeat monitor off with `TORCH_NCCL_ENABLE_MONITORING=0` (the settings the "
               "message names); otherwise debug the hang it reports."),
    MessageFix(re.compile(r"somaxconn"),
               "Raise the kernel's listen backlog on the host that runs the store to at least "
               "the number of workers: `sysctl -w net.core.somaxconn=<N>`."),
    MessageFix(re.compile(r"GLOO_SOCKET_IFNAME"),
               "Set `GLOO_SOCKET_IFNAME` (and `NCCL_SOCKET_IFNAME`) to the network interface "
               "the ranks reach each other through (`ip addr` lists them), as the message "
               "says."),
    MessageFix(re.compile(r"TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero"),
               "To have the failed collective's stack trace logged next time, set "
               "`TORCH_NCCL_TRACE_BUFFER_SIZE` to a non-zero value (e.g. 2000) in the server's "
               "environment; the failure itself is in the lines before this one."),
)


def _where(places: set[tuple[str, int, str]]) -> str:
    spots = sorted(places)
    where = ", ".join(f"`{fn}()` in {p}:{line}" if fn else f"{p}:{line}"
                      for p, line, fn in spots[:3])
    return where + (f" and {len(spots) - 3} more" if len(spots) > 3 else "")


AREAS = (
    (re.compile(r"ProcessGroupNCCL|NCCLUtils|FlightRecorder|TraceUtils"),
     ("This is ProcessGroupNCCL, the NCCL backend of torch.distributed that sglang's tensor-, "
      "pipeline- and expert-parallel groups run on (its watchdog thread checks every "
      "collective for errors and timeouts).")),
    (re.compile(r"TCPStore|socket|Store"),
     ("This is c10d's TCPStore (and its sockets), the key-value store the ranks of sglang's "
      "distributed groups meet at when they start (across nodes, at `--dist-init-addr`).")),
    (re.compile(r"distributed/c10d/"),
     ("This is in torch.distributed (c10d), which sglang's parallel groups communicate "
      "through.")),
    (re.compile(r"CudaIPC"),
     ("This is torch's sharing of CUDA tensors between processes, which sglang's processes "
      "pass tensors through.")),
    (re.compile(r""),
     "This is torch's CUDA runtime glue (devices, streams, the caching allocator)."),
)


def area_text(path: str) -> str:
    return next(text for shape, text in AREAS if shape.search(path))


def documentation(m: Merged) -> str:
    site = m.site
    level = "/".join(sorted(m.levels))
    doc = (f"torch {max(m.versions)} logs this at {level} level ({', '.join(sorted(m.macros))})"
           f" in {_where(m.places)}")
    doc += (". c10 prints it as `[<E|W|F><MMDD> <time> <file>:<line>] <message>` (torch.distributed"
            " puts `[rank<N>]:` in front). " + area_text(site.path))
    if "FATAL" in m.levels:
        doc += " A FATAL line is followed by `std::abort()`: the process dies with SIGABRT."
    return doc


def build_record(m: Merged) -> dict[str, Any]:
    site = m.site
    newest = max(m.versions)
    text = plain_text(site.parts)
    severity = "error" if m.levels & {"ERROR", "FATAL"} else "warning"
    return {
        "id": record_id(m.key),
        "repo": "pytorch/pytorch",
        "slug": "torch-log-" + slug(plain_text(m.searched), empty="log"),
        "errorMessage": template_of(logged_parts(site)),
        "messagePattern": message_pattern(m.searched),
        "errorType": "log",
        "errorClass": None,
        "severity": severity,
        "filePath": site.path,
        "lineNumber": site.line,
        "githubUrl": f"https://github.com/pytorch/pytorch/blob/v{newest}/{site.path}"
                     f"#L{site.line}",
        "documentation": documentation(m),
        "solutions": [f.solution for f in MESSAGE_FIXES if f.words.search(text)],
        "tags": ["dependency", PACKAGE, "cpp", "generated", "log", severity],
        "sourcePackage": PACKAGE,
        "sourceVersions": sorted(m.versions),
        "generator": GENERATOR,
        "sourceLocations": [{"versions": newest,
                             "sites": sorted(f"{p}:{line}" for p, line, _ in m.places)[:20],
                             "count": len(m.places)}],
        "schemaVersion": 2,
    }


@dataclass(slots=True)
class Result:
    records: list[dict[str, Any]]
    counts: Counter[str]


def extract(releases: Sequence[tuple[str, list[LogSite]]]) -> Result:
    """One record per shape of searched text, merged over sites, levels and releases."""
    merged: dict[str, Merged] = {}
    counts: Counter[str] = Counter()
    for version, found in releases:
        for s in found:
            counts[f"sites:{s.macro}"] += 1
            searched = searched_parts(logged_parts(s))
            if searched is None:
                counts["dropped: too little literal text"] += 1
                continue
            key = shape_of(template_of(searched))
            m = merged.setdefault(key, Merged(key, s, searched))
            m.versions.add(version)
            m.places.add((s.path, s.line, s.function))
            m.levels.add(s.level)
            m.macros.add(s.macro)
    records = sorted((build_record(m) for m in merged.values()), key=lambda r: r["id"])
    counts["records"] = len(records)
    counts["records with a fix"] = sum(bool(r["solutions"]) for r in records)
    return Result(records, counts)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m matcher.catalog.torch_logs",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=None, help="where the tarballs are kept")
    ap.add_argument("--tree", type=Path, default=None,
                    help="an extracted source tree of the (one) version read, instead")
    ap.add_argument("--versions", nargs="+", default=list(VERSIONS))
    ap.add_argument("-o", "--out", type=Path, default=DEFAULT_OUTPUT)
    args = ap.parse_args(argv)
    cache = args.dir or default_dir()
    releases = []
    for v in args.versions:
        files = tree_files(args.tree) if args.tree else tarball_files(fetch(v, cache))
        found = release_sites(files)
        print(f"torch=={v}: {len(found)} logged messages", file=sys.stderr)
        releases.append((v, found))
    result = extract(releases)
    from matcher.atomic import write_atomic

    write_atomic(args.out, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n"
                                   for r in result.records))
    for k, n in sorted(result.counts.items()):
        print(f"{k}: {n}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
