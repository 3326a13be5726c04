r"""sgl-kernel's C++/CUDA checks → catalog records, every release found in a sglang clone.

    python -m matcher.catalog.sgl_kernel --repo PATH [-o patterns/sglang/generated/sgl-kernel.jsonl]

PATH is a git clone of sgl-project/sglang (any fork with its history). Each sgl-kernel release
is the commit that set `sgl-kernel/python/sgl_kernel/version.py` to that version (the "bump
sgl-kernel version" commit; the first one when a version was set twice); only versions PyPI
published (`--versions`, default: read from PyPI's JSON API, `sgl-kernel` then
`sglang-kernel`) are kept. At each, every file of `sgl-kernel/csrc/` and `sgl-kernel/include/`
is read with `cpp_checks.checks` — `TORCH_CHECK*`, `TORCH_CHECK_EQ`…, `throw std::…(…)` and the
`CHECK_*` macros the file reaches (its own and its headers' `#define`s, sgl-kernel's
`include/utils.h`, and flashinfer's `pytorch_extension_utils.h` ones, `FLASHINFER_MACROS`) —
and the checks are merged into records over releases, like `catalog extract` does for sglang.

How torch prints a failed check, and so what a record matches:

- `RuntimeError: <message>` (or `ValueError`… for `TORCH_CHECK_VALUE`…): the message is the
  check's arguments printed one after another; the pattern is that text with a hole for each
  value, anchored at the start of the message — or after `what():  ` when the exception ended
  the process (`terminate called after throwing an instance of 'c10::Error'`);
- with `TORCH_SHOW_CPP_STACKTRACES=1`, or in a `what()`, torch adds `Exception raised from
  <function> at /sgl-kernel/csrc/gemm/fp8_gemm_kernel.cu:1201 (most recent call first):` — the
  frame: the pattern also takes that line, with the file and every line the check had in any
  release (when there are at most `MAX_FRAME_SITES` of them);
- a check without a message: `Expected <cond> to be true, but got false.` (the condition as the
  preprocessor spells it);
- the checks that sgl-kernel's and flashinfer's argument macros make (`q must be a CUDA
  tensor`, `CHECK_EQ(a, b) failed. 3 vs 4`, `x must be a 2D tensor`, `x must be contiguous`)
  are one family record each (`FAMILIES`), the argument a capture: a record per tensor name
  would multiply patterns without saying more than the capture does.

Remediation (`REMEDIES`) is given where the words say what to change: a GPU architecture, a
dtype (`--dtype`), a CUDA toolkit, a feature the wheel was built without; otherwise the record
says what failed and where, and `solutions` stays empty.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from matcher.catalog.cpp_checks import CppCheck, Hole, Macro, checks, lex, plain_text
from matcher.catalog.patterns import escape_literal
from matcher.catalog.versions import compact_ranges, sort_versions, version_key

PACKAGE = "sgl-kernel"
GENERATOR = "matcher.catalog.sgl_kernel"
ID_PREFIX = "sglang-matcher/sgl-kernel/"
DEFAULT_OUTPUT = Path("patterns/sglang/generated/sgl-kernel.jsonl")
VERSION_FILE = "sgl-kernel/python/sgl_kernel/version.py"
SOURCE_DIRS = ("sgl-kernel/csrc/", "sgl-kernel/include/")
SUFFIXES = (".cu", ".cuh", ".cc", ".cpp", ".h", ".hpp")
MIN_LITERAL_RUN = 12
MAX_FRAME_SITES = 24

# flashinfer's `pytorch_extension_utils.h` (CUDA build), which sgl-kernel's sources include:
# its argument checks, as flashinfer defines them.
FLASHINFER_MACROS = r"""
#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_CONTIGUOUS(x) TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
#define CHECK_LAST_DIM_CONTIGUOUS(x) TORCH_CHECK(x.strides()[x.strides().size() - 1] == 1, #x "must be contiguous at last dimension")
#define CHECK_INPUT(x) CHECK_CUDA(x); CHECK_CONTIGUOUS(x)
#define CHECK_LAST_DIM_CONTIGUOUS_INPUT(x) CHECK_CUDA(x); CHECK_LAST_DIM_CONTIGUOUS(x)
#define CHECK_DIM(d, x) TORCH_CHECK(x.dim() == d, #x " must be a " #d "D tensor")
#define CHECK_EQ(a, b) TORCH_CHECK((a) == (b), "CHECK_EQ(" #a ", " #b ") failed. ", a, " vs ", b)
#define CHECK_GE(a, b) TORCH_CHECK((a) >= (b), "CHECK_GE(" #a ", " #b ") failed. ", a, " vs ", b)
"""


@dataclass(frozen=True, slots=True)
class Family:
    """Checks made by one argument macro, matched by one record with captures."""

    name: str
    shape: re.Pattern[str]  # a check's template that belongs to the family
    pattern: str
    message: str
    documentation: str
    solution: str = ""


FAMILIES: tuple[Family, ...] = (
    Family("cuda-tensor", re.compile(r"^[\w.()\[\]>-]+ must be a CUDA tensor$"),
           r"(?<![\s\S])\s*(?P<tensor>[\w.()\[\]>-]+) must be a CUDA tensor\b",
           "{tensor} must be a CUDA tensor",
           "An sgl-kernel op was given a tensor that is not on a CUDA device (the capture names "
           "the argument). The op runs on the GPU only: the caller passed a CPU tensor — a model "
           "or buffer left on the CPU, or a CPU/other-device code path calling the CUDA kernel."),
    Family("contiguous", re.compile(r"^[\w.()\[\]>-]+ ?must be contiguous(?: at last dimension)?$"),
           r"(?<![\s\S])\s*(?P<tensor>[\w.()\[\]>-]+?) ?must be contiguous(?P<where> at last "
           r"dimension)?\b",
           "{tensor} must be contiguous",
           "An sgl-kernel op was given a tensor whose memory layout is not contiguous (or not "
           "contiguous in its last dimension); the kernel reads it as a flat buffer. The caller "
           "(sglang or a plugin) passed a transposed or sliced view: usually a mismatch between "
           "the sglang release and the sgl-kernel it runs with."),
    Family("dim", re.compile(r"^[\w.()\[\]>-]+ must be a \w+D tensor$"),
           r"(?<![\s\S])\s*(?P<tensor>[\w.()\[\]>-]+) must be a (?P<dims>\w+)D tensor\b",
           "{tensor} must be a {dims}D tensor",
           "An sgl-kernel op was given a tensor with the wrong number of dimensions."),
    Family("check-eq", re.compile(r"^CHECK_(?:EQ|GE)\("),
           r"(?<![\s\S])\s*CHECK_(?P<op>EQ|GE)\((?P<a>.+?), (?P<b>.+?)\) failed\. "
           r"(?P<a_value>.*?) vs (?P<b_value>.*)",
           "CHECK_{op}({a}, {b}) failed. {a_value} vs {b_value}",
           "An sgl-kernel op's arguments disagree: the two sizes (or devices) the check names "
           "must be equal (EQ) or the first at least the second (GE); the values follow "
           "`failed.`. A shape mismatch between the op's inputs: usually a mismatch between the "
           "sglang release and the sgl-kernel it runs with, or a batch assembled wrongly "
           "upstream."),
)


@dataclass(frozen=True, slots=True)
class Remedy:
    words: re.Pattern[str]
    solution: str
    documentation: str


REMEDIES: tuple[Remedy, ...] = (
    Remedy(re.compile(r"custom ?all ?reduce only supports num gpus|all ?reduce not supported "
                      r"for world_size|world size (?:>|==) ?\d+ is not supported|odd num gpus",
                      re.I),
           "Launch sglang with `--disable-custom-all-reduce` (NCCL's all-reduce is used instead), "
           "or use a tensor-parallel size the custom all-reduce supports (`--tp-size` 2, 4, 6 "
           "or 8 on one node).",
           "sgl-kernel's custom all-reduce handles only some numbers of GPUs."),
    Remedy(re.compile(r"custom ?all ?reduce only supports (?:float|half|bf)", re.I),
           "Launch sglang with `--disable-custom-all-reduce`, or run the model in a dtype it "
           "supports (`--dtype bfloat16` or `--dtype float16`).",
           "sgl-kernel's custom all-reduce handles only some dtypes."),
    Remedy(re.compile(r"VLLM_CUTLASS_SRC_DIR", re.I),
           "Set `VLLM_CUTLASS_SRC_DIR` to a CUTLASS 3.8 source directory and rebuild, or install "
           "a prebuilt sgl-kernel wheel for your CUDA instead of building it.",
           "The build found a CUTLASS version it does not support."),
    Remedy(re.compile(r"not compiled|compiled with|(?-i:ENABLE_[A-Z0-9_]+)|built without|"
                      r"No compiled", re.I),
           "This sgl-kernel build lacks the kernel: install the sgl-kernel wheel built for your "
           "GPU and CUDA (the release sglang pins, from the index for your CUDA version), or "
           "rebuild it with the feature the message names.",
           "The installed sgl-kernel was built without this kernel."),
    Remedy(re.compile(r"compute capability|sm[ _]?version|\bsm_?\d{2,3}[af]?\+?(?![\w.])|"
                      r"\bSM_?\d{2,3}\+?\b|CUDA[ _]ARCH|Ampere|Hopper|Blackwell", re.I),
           "This kernel needs a GPU architecture this one is not (the message names it): run on "
           "such a GPU, or launch sglang with a path that does not use it — another "
           "`--attention-backend` (e.g. `triton`), another `--quantization` (or none), or "
           "without the feature the kernel serves.",
           "The kernel is built for, or only runs on, certain GPU architectures."),
    Remedy(re.compile(r"(?:only supports?|must be|expect(?:s|ed)? \w+ to be|only|should be) "
                      r"(?:\w+ )?(?:bf16|bfloat16|half|float16|fp16|kFloat16|kBFloat16)\b|"
                      r"only BFloat16|(?:bf16|bfloat16|half|float16|fp16) (?:only|is required)",
                      re.I),
           "Run the model in the half-precision dtype the kernel needs: `--dtype bfloat16` (or "
           "`--dtype float16`, as the message says), not float32.",
           "The kernel handles 16-bit floating point inputs only."),
    Remedy(re.compile(r"CUDA (?:version|toolkit|runtime)? ?(?:>=|≥|\d+\.\d+ or "
                      r"(?:above|newer|later))|requires CUDA\b(?!_)|CUDA \d+\.\d+", re.I),
           "Use a CUDA toolkit/driver at least as new as the message says, and the sgl-kernel "
           "wheel built for it (`pip install sgl-kernel` from the index that matches your "
           "CUDA, as sglang's install guide gives it).",
           "The kernel needs a newer CUDA than this build or machine has."),
    Remedy(re.compile(r"head ?dim(?:ension)?s? .*(?:only|at most|must be|not supported|"
                      r"unsupported)|(?:only supports?|unsupported) .*head ?dim", re.I),
           "The attention kernel does not support this model's head size: launch with another "
           "`--attention-backend` (e.g. `triton` or `flashinfer`).",
           "The attention kernel handles only some head dimensions."),
)


def remedy_for(text: str) -> Remedy | None:
    for r in REMEDIES:
        if r.words.search(text):
            return r
    return None


# --- reading releases from a git clone -------------------------------------------------------

def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def release_commits(repo: Path, published: Iterable[str] | None) -> list[tuple[str, str]]:
    """(version, commit) for each version `version.py` was first set to, oldest first, kept
    when PyPI published it (`published`; None: all)."""
    keep = set(published) if published is not None else None
    log = _git(repo, "log", "--all", "--format=%ct %H", "--", VERSION_FILE)
    seen: dict[str, tuple[int, str]] = {}
    for row in log.splitlines():
        ts, commit = row.split()
        try:
            text = _git(repo, "show", f"{commit}:{VERSION_FILE}")
        except subprocess.CalledProcessError:
            continue
        m = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", text)
        if m is None:
            continue
        v = m.group(1)
        if keep is not None and v not in keep:
            continue
        if v not in seen or int(ts) < seen[v][0]:
            seen[v] = (int(ts), commit)
    return [(v, seen[v][1]) for v in sort_versions(seen)]


def published_versions() -> list[str]:
    """sgl-kernel's and sglang-kernel's releases on PyPI (final and .postN, not yanked)."""
    out: list[str] = []
    for name in ("sgl-kernel", "sglang-kernel"):
        with urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60) as r:
            data = json.load(r)
        for v, files in data["releases"].items():
            if files and not all(f.get("yanked") for f in files) and re.fullmatch(
                    r"\d+(?:\.\d+)*(?:\.post\d+)?", v):
                out.append(v)
    return sort_versions(out)


@dataclass(frozen=True, slots=True)
class SourceTree:
    version: str
    commit: str
    files: tuple[tuple[str, str], ...]  # (path from sgl-kernel/ on, blob id)


def read_tree(repo: Path, version: str, commit: str) -> SourceTree:
    rows = _git(repo, "ls-tree", "-r", commit, "--", *SOURCE_DIRS).splitlines()
    files = []
    for row in rows:
        meta, path = row.split("\t", 1)
        blob = meta.split()[2]
        name = PurePosixPath(path).name
        if path.endswith(SUFFIXES) and not name.startswith("test_"):
            files.append((path[len("sgl-kernel/"):], blob))
    return SourceTree(version, commit, tuple(sorted(files)))


class Blobs:
    """Blob texts read once (`git cat-file --batch`), shared by releases that hold them."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.cache: dict[str, str] = {}

    def read(self, blobs: Iterable[str]) -> None:
        need = [b for b in dict.fromkeys(blobs) if b not in self.cache]
        if not need:
            return
        proc = subprocess.run(["git", "-C", str(self.repo), "cat-file", "--batch"],
                              input="\n".join(need).encode() + b"\n", capture_output=True,
                              check=True)
        data = proc.stdout
        pos = 0
        for b in need:
            end = data.index(b"\n", pos)
            header = data[pos:end].split()
            size = int(header[2])
            self.cache[b] = data[end + 1:end + 1 + size].decode("utf-8", "replace")
            pos = end + 1 + size + 1

    def __getitem__(self, blob: str) -> str:
        return self.cache[blob]


_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _macros_for(path: str, text: str, by_path: dict[str, str], base: dict[str, Macro],
                memo: dict[str, dict[str, Macro]], depth: int = 0) -> dict[str, Macro]:
    """The macros a file sees: the shared ones, then those of the headers it includes by
    quotes (found beside it or in `include/`), then its own (added while it is lexed)."""
    table = dict(base)
    if depth > 4:
        return table
    for name in _INCLUDE.findall(text):
        for cand in (str(PurePosixPath(path).parent / name), f"include/{name}",
                     f"csrc/{name}"):
            cand = str(PurePosixPath(cand))
            if cand in by_path:
                if cand not in memo:
                    sub = _macros_for(cand, by_path[cand], by_path, base, memo, depth + 1)
                    lex(by_path[cand], sub)
                    memo[cand] = sub
                table.update(memo[cand])
                break
    return table


def tree_checks(tree: SourceTree, blobs: Blobs,
                memo: dict[tuple[str, str], list[CppCheck]]) -> list[CppCheck]:
    """Every check of one release (a file's checks are read once per blob and macro set)."""
    blobs.read(b for _, b in tree.files)
    by_path = {p: blobs[b] for p, b in tree.files}
    base: dict[str, Macro] = {}
    lex(FLASHINFER_MACROS, base)
    if "include/utils.h" in by_path:
        lex(by_path["include/utils.h"], base)
    header_memo: dict[str, dict[str, Macro]] = {}
    out: list[CppCheck] = []
    for path, blob in tree.files:
        text = by_path[path]
        if "CHECK" not in text and "throw" not in text:
            continue
        table = _macros_for(path, text, by_path, base, header_memo)
        key = (blob, hashlib.sha256(repr(sorted((k, v.body) for k, v in table.items()))
                                    .encode()).hexdigest())
        if key not in memo:
            memo[key] = checks(text, path, dict(table))
        out.extend(memo[key])
    return out


# --- records ---------------------------------------------------------------------------------

def family_of(check: CppCheck) -> Family | None:
    if check.kind == "throw":
        return None
    t = check.template
    for f in FAMILIES:
        if f.shape.search(t):
            return f
    return None


def usable(check: CppCheck) -> bool:
    runs = [p.strip() for p in check.parts if isinstance(p, str)]
    return max((len(r) for r in runs), default=0) >= MIN_LITERAL_RUN and " " in plain_text(
        check.parts).strip()


def record_key(check: CppCheck) -> str:
    fam = family_of(check)
    if fam is not None:
        return f"family\n{fam.name}"
    return f"{check.kind}\n{check.error_class or ''}\n{check.template}"


def record_id(key: str) -> str:
    return hashlib.sha256((ID_PREFIX + key).encode()).hexdigest()[:16]


_GROUP_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def message_pattern(parts: Sequence[str | Hole]) -> str:
    """Literal text escaped, each value a lazy group (the last greedy), named after its
    expression when that is a name (`num_tokens`, `x.size(0)` → `x`)."""
    items = list(parts)
    while items and isinstance(items[-1], str) and not items[-1].strip():
        items.pop()
    used: Counter[str] = Counter()
    out: list[str] = []
    for k, p in enumerate(items):
        if isinstance(p, str):
            first = p.split("\n", 1)[0] if k == 0 else p
            out.append(escape_literal(first.replace("{", "{{").replace("}", "}}")))
            if "\n" in p and k == 0:
                break
            continue
        body = ".+" if k == len(items) - 1 else ".+?"
        m = _GROUP_OK.match(p.expr)
        name = m.group() if m else None
        if name:
            used[name] += 1
            name = name if used[name] == 1 else f"{name}_{used[name]}"
            out.append(f"(?P<{name}>{body})")
        else:
            out.append(f"({body})")
    return "".join(out)


def frame_pattern(sites: Iterable[tuple[str, int]]) -> str | None:
    """`Exception raised from \\S+ at …/csrc/x.cu:(?:12|40)`, or None with too many sites."""
    by_file: dict[str, set[int]] = {}
    for path, line in sites:
        by_file.setdefault(path, set()).add(line)
    if not by_file or sum(len(v) for v in by_file.values()) > MAX_FRAME_SITES:
        return None
    alts = []
    for path in sorted(by_file):
        lines = "|".join(str(n) for n in sorted(by_file[path]))
        alts.append(f"{escape_literal(path)}:(?:{lines})")
    return (r"Exception raised from \S+ at (?:[^\s:]*/)?(?:" + "|".join(alts) + r")\b")


@dataclass(slots=True)
class _Merged:
    key: str
    check: CppCheck
    family: Family | None
    versions: set[str] = field(default_factory=set)
    places: dict[str, set[tuple[str, int, str]]] = field(default_factory=dict)
    newest: str = ""


# What a record says of its check: pattern, message, documentation, solutions, error class
# and slug.
_Described = tuple[str, str | None, str, list[str], str | None, str]


def _family_described(m: _Merged, where: str) -> _Described:
    """A check of a known family (`m.family`): the family's own words."""
    f = m.family
    assert f is not None
    documentation = (f"{f.documentation} Raised by sgl-kernel's argument checks "
                     f"(sgl-kernel {m.newest}: {where}).")
    solutions: list[str] = [f.solution] if f.solution else []
    return f.pattern, f.message, documentation, solutions, "RuntimeError", f"sgl-kernel-{f.name}"


def _check_described(m: _Merged, sites: Iterable[tuple[str, int]], where: str) -> _Described:
    """A check of its own: its message or its frame, and a remedy when its words have one."""
    c = m.check
    body = message_pattern(c.parts)
    head = r"(?<=^\s*(?:what\(\):\s+)?)" + body
    frame = frame_pattern(sites)
    pattern = f"(?:{head}|{frame})" if frame else head
    text = plain_text(c.parts)
    remedy = remedy_for(text)
    what = {"check": "a `TORCH_CHECK` failed", "op": "a `TORCH_CHECK_` comparison failed "
            "(c10's fatal check: the process aborts)", "throw": f"it threw "
            f"`std::{c.macro}`"}[c.kind]
    documentation = f"In sgl-kernel {m.newest}, {what} in {where}"
    if c.condition and c.condition != "false":
        documentation += f": `{c.condition}` did not hold"
    documentation += "."
    if remedy is not None:
        documentation += " " + remedy.documentation
    solutions = [remedy.solution] if remedy is not None else []
    return pattern, c.template, documentation, solutions, c.error_class, _slug(text)


def build_record(m: _Merged, order: Sequence[str]) -> dict[str, Any]:
    c = m.check
    rid = record_id(m.key)
    sites = {(p, line) for ps in m.places.values() for p, line, _ in ps}
    newest_sites = sorted(m.places[m.newest])
    where = ", ".join(f"`{fn}()` in {p}:{line}" if fn else f"{p}:{line}"
                      for p, line, fn in newest_sites[:4])
    if len(newest_sites) > 4:
        where += f" and {len(newest_sites) - 4} more"
    if m.family is not None:
        described = _family_described(m, where)
    else:
        described = _check_described(m, sites, where)
    pattern, message, documentation, solutions, error_class, slug = described
    record: dict[str, Any] = {
        "id": rid,
        "repo": "sgl-project/sglang",
        "slug": slug,
        "errorMessage": message,
        "messagePattern": pattern,
        "errorType": "check",
        "errorClass": error_class,
        "severity": "critical" if c.kind == "op" else "error",
        "filePath": f"sgl-kernel/{c.path}",
        "lineNumber": c.line,
        "githubUrl": None,
        "documentation": documentation,
        "solutions": solutions,
        "tags": ["sgl-kernel", "cpp", "generated", c.kind] + (
            ["family"] if m.family is not None else []),
        "sourcePackage": PACKAGE,
        "sourceVersions": compact_ranges(m.versions, order),
        "generator": GENERATOR,
        "sourceLocations": _locations(m, order),
        "schemaVersion": 2,
    }
    return record


def _locations(m: _Merged, order: Sequence[str]) -> list[dict[str, Any]]:
    by_places: dict[tuple[str, ...], list[str]] = {}
    for v in order:
        if v in m.places:
            spots = tuple(sorted(f"{p}:{line}" for p, line, _ in m.places[v]))
            by_places.setdefault(spots, []).append(v)
    out = []
    for spots, vs in by_places.items():
        for r in compact_ranges(vs, order):
            out.append({"versions": r, "sites": list(spots[:20]), "count": len(spots)})
    out.sort(key=lambda e: version_key(str(e["versions"]).split("..")[0]))
    return out


def _slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-") or "sgl-kernel-check"


@dataclass(slots=True)
class Result:
    records: list[dict[str, Any]]
    counts: Counter[str]
    releases: list[tuple[str, str]]


def extract(trees: Sequence[SourceTree], blobs: Blobs) -> Result:
    order = sort_versions(t.version for t in trees)
    merged: dict[str, _Merged] = {}
    counts: Counter[str] = Counter()
    memo: dict[tuple[str, str], list[CppCheck]] = {}
    for tree in sorted(trees, key=lambda t: version_key(t.version)):
        for c in tree_checks(tree, blobs, memo):
            counts[f"sites:{c.kind}"] += 1
            fam = family_of(c)
            if fam is None and not usable(c):
                counts["dropped: too little literal text"] += 1
                continue
            key = record_key(c)
            m = merged.get(key)
            if m is None:
                m = merged[key] = _Merged(key, c, fam)
            m.check, m.newest = c, tree.version
            m.versions.add(tree.version)
            m.places.setdefault(tree.version, set()).add((c.path, c.line, c.function))
    records = sorted((build_record(m, order) for m in merged.values()), key=lambda r: r["id"])
    counts["records"] = len(records)
    return Result(records, counts, [(t.version, t.commit) for t in trees])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m matcher.catalog.sgl_kernel", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", type=Path, required=True, help="a git clone of sgl-project/sglang")
    p.add_argument("--versions", nargs="*", metavar="V",
                   help="the releases to read (default: every one PyPI published)")
    p.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    args = p.parse_args(argv)
    published = args.versions if args.versions else published_versions()
    releases = release_commits(args.repo, published)
    if not releases:
        print(f"no sgl-kernel release found in {args.repo}", file=sys.stderr)
        return 2
    blobs = Blobs(args.repo)
    trees = [read_tree(args.repo, v, c) for v, c in releases]
    result = extract(trees, blobs)
    from matcher.catalog.router import check, write_jsonl

    problems = list(check(result.records))
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 1
    write_jsonl(result.records, args.output)
    stats = ["# sgl-kernel: what `python -m matcher.catalog.sgl_kernel` read and made", "",
             f"records = {result.counts['records']}"]
    stats += [f'"{k}" = {v}' for k, v in sorted(result.counts.items()) if k != "records"]
    stats += ["", "[releases]"] + [f'"{v}" = "{c}"' for v, c in result.releases]
    args.output.with_suffix(".stats.toml").write_text("\n".join(stats) + "\n")
    missing = [v for v in published if v not in dict(result.releases)]
    print(f"{len(result.records)} records from {len(releases)} releases "
          f"({releases[0][0]}..{releases[-1][0]}) → {args.output}"
          + (f"; not in this clone: {', '.join(missing)}" if missing else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
