"""Records for native failures: the closed vocabularies of the GPU libraries, and the shapes of
native crash lines.

Two kinds of records, written to `patterns/sglang/generated/native.jsonl`:

- **One record per status string** of the CUDA runtime, HIP, NCCL, cuBLAS and cuDNN, and per
  NCCL `WARN` format and NVSHMEM transport failure, read from the libraries themselves
  (`native_vocab`, whose TSV is committed next to the catalog). A string's record matches it as
  the callers print it — torch's `CUDA error: <string>`, flashinfer's `… failed with error code
  <string>`, a `Cuda failure '<string>'`, `NCCL error in: <file:line>, <string>, NCCL version
  <v>`, `CUBLAS_STATUS_X when calling …` — and says which versions of the package print it
  (`sourceVersions`: the runs of the versions read that hold the string). What to do comes from
  `native_remedies`; a status with no known way out keeps empty `solutions`. A text HIP prints
  as CUDA does gets a second record for its `HIP error: <string>` line when ROCm's way out
  differs (`hip_twin`, `native_remedies.HIP_SHARED`).
- **One family record per native line shape**, with named groups, so any such line is recognized
  and its place captured: glog `E`/`F`/`W` lines (`E0521 12:34:56.789012 12345 file.cpp:877]
  msg`: `file`, `line`, `message`), `terminate called after throwing an instance of 'X'`,
  `Fatal Python error: …` (and one per signal faulthandler names), Rust's `thread 'x' panicked
  at file.rs:L:C:`, glibc's `prog: file.cpp:40: fn: Assertion \\`cond' failed.`, NVIDIA's
  `NVRM: Xid (PCI:…): N, …` (and one per Xid code NVIDIA documents), amdgpu page faults, and
  NVSHMEM's `file.cpp:L: non-zero status: N msg` (and its `NULL value` and
  `file:function:line:` lines), AITER's `[AITER] file:L fail to call … ---> [HIP error](…)`,
  Mooncake Store's `Batch RPC call failed: …`, yalantinglibs' easylog `… ERROR [tid] [file:L] msg`.

A status string that a curated record already recognizes is left to it (the curated record has
remediation written from real threads).

    python -m matcher.catalog.native [-o patterns/sglang/generated/native.jsonl]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from matcher.catalog import native_remedies as R
from matcher.catalog.native_vocab import Entry, read_tsv
from matcher.catalog.patterns import escape_literal
from matcher.catalog.versions import compact_ranges, sort_versions

GENERATOR = "matcher.catalog.native"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "native.vocab.tsv"
OUTPUT = GENERATED / "native.jsonl"
CURATED = GENERATED.parent / "curated"

# What a caller prints in front of a CUDA/HIP status string: torch's `CUDA error: `, `HIP error:
# `, `CUDA error (file:line): `, `Cuda failure 'x'`, `CUDA kernel failed : x`, triton's `Triton
# Error [CUDA]: `, flashinfer's and sgl-kernel's `… failed with error code x`.
# (The word boundary closes the word-ending leads only: after triton's `]` there is none.)
CUDA_LEAD = (r"(?:(?:\b(?:CUDA|Cuda|cuda|HIP|Hip|hip)[ _]?(?:[Ee]rror|ERROR|[Ff]ailure|kernel "
             r"failed)\b|Triton Error \[CUDA\])[^\n]{0,160}?[:\s]\s*['\"]?|failed with error "
             r"code:? ['\"]?)")
# sgl-kernel and others append where the check failed.
AT_FILE = r"(?: at (?P<file>[^\s:]+):(?P<line>\d+))?"
# A status string of this many words says by itself what failed; shorter ones (`invalid
# argument`, `out of memory`) are matched only behind a caller's lead.
DISTINCT_WORDS = 5


@dataclass(frozen=True, slots=True)
class Status:
    """One string of one library, with the versions and codes that print it."""

    family: str
    package: str
    text: str
    names: tuple[str, ...]
    codes: tuple[int, ...]
    versions: tuple[str, ...]  # ranges
    also: tuple[Entry, ...] = ()  # the same text in HIP, for a CUDA status


def record_id(key: str) -> str:
    return hashlib.sha256(f"sglang-matcher/native/{key}".encode()).hexdigest()[:16]


def statuses(entries: Sequence[Entry]) -> list[Status]:
    """The vocabulary merged: one `Status` per family and text. A CUDA text HIP prints too
    carries the HIP entries (`also`); HIP keeps only the texts CUDA does not print."""
    read: dict[str, list[str]] = {}
    for e in entries:
        read.setdefault(e.package, []).append(e.version)
    order = {p: sort_versions(set(vs)) for p, vs in read.items()}
    groups: dict[tuple[str, str], list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.family, e.text), []).append(e)
    cuda_texts = {text for family, text in groups if family == "cuda"}
    out = []
    for (family, text), group in sorted(groups.items()):
        if family == "hip" and text in cuda_texts:
            continue
        package = group[0].package
        also = tuple(groups.get(("hip", text), ())) if family == "cuda" else ()
        out.append(Status(
            family, package, text,
            tuple(sorted({e.name for e in group if e.name})),
            tuple(sorted({e.code for e in group if e.code >= 0})),
            tuple(compact_ranges({e.version for e in group}, order[package])), also))
    return out


# -- patterns ----------------------------------------------------------------------------------

def printf_pattern(fmt: str) -> str:
    """A printf format as a pattern: each conversion a group (`%s` lazy, the last greedy)."""
    parts = re.split(r"(%%|%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXsfegcp])", fmt)
    convs = [i for i, p in enumerate(parts) if p.startswith("%") and p != "%%"]
    out = []
    for i, p in enumerate(parts):
        if p == "%%":
            out.append("%")
        elif i in convs:
            if p.endswith("s"):
                out.append("(.*)" if i == convs[-1] else "(.*?)")
            elif p[-1] in "xXp":
                out.append(r"(\S+)")
            else:
                out.append(r"(-?\d+)")
        else:
            out.append(escape_literal(p))
    return "".join(out)


def status_pattern(s: Status) -> str:
    text = escape_literal(s.text)
    if s.family in ("cuda", "hip"):
        lead = f"(?:{CUDA_LEAD})?" if len(s.text.split()) >= DISTINCT_WORDS else CUDA_LEAD
        names = [*s.names, *(e.name for e in s.also)]
        by_name = "|".join(sorted({re.escape(n) for n in names if len(n) >= 8}))
        main = f"{lead}{text}{AT_FILE}"
        return f"(?:{main}|\\b(?:{by_name})\\b)" if by_name else main
    if s.family == "nccl":
        return (r"(?:NCCL error(?: in: (?P<location>[^\s,]+),)?:? )?" + text
                + r"(?:, NCCL version (?P<nccl_version>[\w.+-]+))?")
    if s.family == "cublas":
        return rf"\b{re.escape(s.names[0])}\b(?: when calling `(?P<call>[^`\n]*)`)?"
    if s.family == "cudnn":
        return rf"\b{re.escape(s.names[0])}\b"
    if s.family == "nccl-warn":
        return printf_pattern(s.text)
    if s.family == "nvshmem":
        return NVSHMEM_LEAD + text
    if s.family == "nvshmem-msg":
        return text
    raise ValueError(f"unknown family {s.family}")


NVSHMEM_FILE = r"(?P<file>[^\s:]+\.(?:cpp|cu|cc|c|h))"
NVSHMEM_LEAD = NVSHMEM_FILE + r":(?P<line>\d+): non-zero status: (?P<status>-?\d+) "


# -- records -----------------------------------------------------------------------------------

PACKAGES = {
    "cuda": "CUDA runtime", "hip": "HIP runtime (ROCm)", "nccl": "NCCL", "nccl-warn": "NCCL",
    "cublas": "cuBLAS", "cudnn": "cuDNN", "nvshmem": "NVSHMEM", "nvshmem-msg": "NVSHMEM",
}


def _remedy(s: Status) -> R.Remedy | None:
    if s.family == "cuda":
        return next((R.CUDA[n] for n in s.names if n in R.CUDA), None)
    if s.family == "hip":
        return next((R.HIP[n] for n in s.names if n in R.HIP), None)
    if s.family == "nccl":
        return next((R.NCCL[c] for c in s.codes if c in R.NCCL), None)
    if s.family == "nccl-warn":
        return next((r for head, r in R.NCCL_WARN.items() if s.text.startswith(head)), None)
    if s.family in ("nvshmem", "nvshmem-msg"):
        return R.NVSHMEM.get(s.text)
    if s.family in ("cublas", "cudnn"):
        return R.LIBRARY_STATUS.get(s.names[0])
    return None


def _what(s: Status) -> str:
    lib = PACKAGES[s.family]
    names = ", ".join(f"{n} ({c})" if len(s.codes) == 1 else n for n, c in
                      zip(s.names, s.codes or (0,) * len(s.names), strict=False))
    if s.family in ("cuda", "hip"):
        said = f"The {lib} returned {names or 'an error'}: “{s.text}”."
        if s.also:
            said += (" ROCm's HIP runtime prints the same text for "
                     f"{', '.join(sorted({e.name for e in s.also}))} (`HIP error: …`).")
        return said
    if s.family == "nccl":
        return f"An NCCL call returned result {s.codes[0] if s.codes else '?'}: “{s.text}”."
    if s.family in ("cublas", "cudnn"):
        return f"A {lib} call returned {s.names[0]}" + (
            f" (“{s.text}”)." if s.text != s.names[0] else ".")
    if s.family == "nccl-warn":
        return f"NCCL printed a WARN line: `{s.text}`."
    if s.family == "nvshmem-msg":
        return f"NVSHMEM said: “{s.text}”."
    return f"NVSHMEM's transport reported `{s.text}` (behind `FILE:LINE: non-zero status: N`)."


def _examples(s: Status) -> list[str]:
    """Lines exactly as the library's callers print the string: the string alone where the
    pattern takes it alone, torch's `CUDA error: ` / `HIP error: ` form, the enum name cuBLAS
    and cuDNN give."""
    if s.family == "cuda":
        return [f"CUDA error: {s.text}"] + (
            [f"HIP error: {s.text}"] if s.also and _hip_remedy(s) is None else [])
    if s.family == "hip":
        return [f"HIP error: {s.text}"]
    if s.family in ("nccl", "nvshmem-msg"):
        return [s.text]
    if s.family in ("cublas", "cudnn"):
        return [s.names[0]]
    return []


def status_record(s: Status) -> dict[str, Any]:
    remedy = _remedy(s)
    key = f"{s.family}\n{s.text}"
    slug_text = s.names[0] if s.family in ("cublas", "cudnn") else s.text
    doc = _what(s)
    if remedy is not None:
        doc += " " + remedy.documentation
    rec: dict[str, Any] = {
        "id": record_id(key),
        "slug": f"{s.family}-" + _slug(slug_text),
        "errorMessage": s.text,
        "messagePattern": status_pattern(s),
        "errorClass": None,
        "errorType": "native",
        "severity": remedy.severity if remedy else "error",
        "documentation": doc,
        "solutions": list(remedy.solutions) if remedy else [],
        "tags": ["native", s.family, *(["hip"] if s.also else []), *(remedy.tags if remedy else ())],
        "sourcePackage": s.package,
        "sourceVersions": list(s.versions),
        "generator": GENERATOR,
    }
    if remedy is not None and remedy.fix_actions:
        rec["fixActions"] = [list(way) for way in remedy.fix_actions]
    if s.also:
        rec["alsoIn"] = {"sourcePackage": s.also[0].package, "sourceVersions": compact_ranges(
            {e.version for e in s.also}, sort_versions({e.version for e in s.also}))}
    examples = _examples(s)
    if examples:
        rec["examples"] = {"match": examples}
    return rec


# What torch and ROCm's libraries print in front of a HIP status string (`HIP error: `,
# `HIP error (file:line): `, `[HIP error](…)`).
HIP_LEAD = r"\b(?:HIP|Hip|hip)[ _]?(?:[Ee]rror|ERROR|[Ff]ailure)\b\]?[^\n]{0,160}?[:\s(]\s*['\"]?"


# A status text that goes on with more words is another status (`unspecified launch failure in
# prior launch`), not this one.
_NO_LONGER_TEXT = r"(?![ \t]+[a-z])"


def _hip_remedy(s: Status) -> R.Remedy | None:
    """ROCm's way out for a CUDA text HIP prints too, where it differs from CUDA's."""
    if s.family != "cuda":
        return None
    return next((R.HIP_SHARED[e.name] for e in sorted(s.also) if e.name in R.HIP_SHARED), None)


def hip_twin(s: Status) -> dict[str, Any] | None:
    """For a CUDA text HIP prints too: a record of the line as ROCm prints it (`HIP error: …`),
    with ROCm's way out (`native_remedies.HIP_SHARED`). Its pattern holds more literal text than
    the CUDA record's (whose enum-name alternative is shorter), so a HIP line gets ROCm's tools,
    a CUDA line NVIDIA's."""
    remedy = _hip_remedy(s)
    if remedy is None:
        return None
    names = sorted({e.name for e in s.also})
    rec: dict[str, Any] = {
        "id": record_id(f"hip-led\n{s.text}"),
        "slug": "hip-" + _slug(s.text),
        "errorMessage": s.text,
        "messagePattern": f"{HIP_LEAD}{escape_literal(s.text)}{AT_FILE}{_NO_LONGER_TEXT}",
        "errorClass": None,
        "errorType": "native",
        "severity": remedy.severity,
        "documentation": (f"ROCm's HIP runtime returned {', '.join(names)}: “{s.text}” (the "
                          "text CUDA prints for the same failure). " + remedy.documentation),
        "solutions": list(remedy.solutions),
        "tags": ["native", "hip", "rocm"],
        "sourcePackage": s.also[0].package,
        "sourceVersions": compact_ranges({e.version for e in s.also},
                                         sort_versions({e.version for e in s.also})),
        "generator": GENERATOR,
        "examples": {"match": [f"HIP error: {s.text}"]},
    }
    if remedy.fix_actions:
        rec["fixActions"] = [list(way) for way in remedy.fix_actions]
    return rec


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:48].rstrip("-")


# -- line shapes -------------------------------------------------------------------------------

# glog: `E0521 12:34:56.789012 12345 transfer_metadata.cpp:877] msg` — the file's extension
# spelled out so that every line of this shape holds a literal the prefilter can look for.
_GLOG = (r"(?<!\S)(?P<severity>{letter})(?P<date>\d{{4}}) (?P<time>\d\d:\d\d:\d\d\.\d+) +"
         r"(?:(?P<thread>\d+) +)?(?=(?P<file>[^\s:\]]+):\d+\] )[^\s:\]]*?"
         r"(?:cpp:|cc:|cu:|cuh:|hpp:|cxx:|hh:|\.h:|\.c:|\.rs:)(?P<line>\d+)\] (?P<message>.*)")


@dataclass(frozen=True, slots=True)
class Shape:
    """A hand-made record for a native line shape."""

    key: str
    slug: str
    pattern: str
    package: str
    remedy: R.Remedy
    examples: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    # Keys of the shapes whose failure this line is part of (`consequenceOf`): printed after
    # one of them, it is that failure's end, not a failure of its own.
    follows: tuple[str, ...] = ()


_GLOG_DOC = ("A line logged with glog by a C++ component (Mooncake's transfer engine, NIXL, "
             "xgrammar and others): severity {what}, then the source file and line that logged "
             "it (`file`, `line`) and the message. What to do depends on the message; the "
             "component's documentation for `file` says what it checks there.")

SHAPES: tuple[Shape, ...] = (
    Shape("glog E", "glog-error-line", _GLOG.format(letter="E"), "glog", R.Remedy(
        _GLOG_DOC.format(what="E (error)")),
        # https://github.com/vllm-project/vllm-ascend/issues/4866 (train)
        (("E1210 03:24:54.778028 2548307 ascend_direct_transport.cpp:820] Failed to connect to "
         "target: 172.16.100.99:25389, status: 103900"),)),
    Shape("glog F", "glog-fatal-line", _GLOG.format(letter="F"), "glog", R.Remedy(
        _GLOG_DOC.format(what="F (fatal: the process aborts right after)"),
        severity="critical")),
    Shape("glog W", "glog-warning-line", _GLOG.format(letter="W"), "glog", R.Remedy(
        _GLOG_DOC.format(what="W (warning)"), severity="warning")),
    Shape("terminate", "cpp-terminate-uncaught-exception",
          r"terminate called after throwing an instance of '(?P<exception>[^'\n]+)'", "libstdc++",
          R.Remedy("A C++ exception of the class named was thrown and not caught: the process "
                   "aborts (SIGABRT). The `what():` line after it is the exception's message, "
                   "which says what failed.", severity="critical"),
          # https://github.com/sgl-project/sglang/issues/1693 (train)
          ("terminate called after throwing an instance of 'c10::DistBackendError'",)),
    Shape("terminate xgrammar", "cpp-terminate-xgrammar-exception",
          r"terminate called after throwing an instance of '(?P<exception>xgrammar::[^'\n]+)'",
          "xgrammar", R.XGRAMMAR_ABORT,
          # https://github.com/sgl-project/sglang/issues/7639 (train)
          ("terminate called after throwing an instance of 'xgrammar::LoggingError'",)),
    Shape("mooncake transfer timeout", "mooncake-transfer-timeout",
          r"Failed to complete transfers after (?P<seconds>\d+) seconds(?: for batch "
          r"(?P<batch>\d+))?", "mooncake-transfer-engine", R.MOONCAKE_TRANSFER_TIMEOUT,
          # https://github.com/kvcache-ai/Mooncake/issues/1088 (train)
          (("E1120 11:10:27.133715 203020 transfer_task.cpp:305] Failed to complete transfers "
            "after 60 seconds for batch 2586731328"),)),
    Shape("terminate recursively", "cpp-terminate-called-recursively",
          r"terminate called recursively", "libstdc++",
          R.Remedy("A second C++ exception escaped while the process was already terminating "
                   "after a first one: the first `terminate called …` line is the cause.",
                   severity="warning")),
    Shape("terminate no exception", "cpp-terminate-without-active-exception",
          r"terminate called without an active exception", "libstdc++",
          R.Remedy("std::terminate was called with no exception in flight: most often a "
                   "std::thread destroyed while still joinable, during a shutdown.",
                   severity="critical")),
    Shape("fatal python error", "python-fatal-error", r"Fatal Python error: (?P<message>.+)",
          "cpython", R.Remedy(
              "The interpreter died on a fatal error (a signal, a broken interpreter state). "
              "faulthandler prints each thread's Python stack after it, the current thread "
              "last.", severity="critical")),
    Shape("rust panic", "rust-thread-panicked",
          r"thread '(?P<thread>[^'\n]*)'(?: \(\d+\))? panicked at (?P<file>[^\s:'][^\s:]*)"
          r":(?P<line>\d+):(?P<column>\d+)(?::(?: (?P<message>.+))?)?", "rust",
          R.Remedy("A Rust thread panicked (sglang's router and gateway, tokenizers, and other "
                   "Rust components): `file:line:column` is where, and the line after it (or "
                   "the rest of this one) the panic's message. With RUST_BACKTRACE=1 the panic "
                   "prints its stack.", solutions=R.RUST_PANIC, severity="critical"),
          # https://github.com/aarroyoc/scryer-playground/issues/45 (train). Newer Rust puts
          # the thread's id after its name: its only real line here (sglang-router 0.3.2,
          # tests/fixtures/router-runs/0.3.2/prometheus-port-in-use.log) is a panic a curated
          # record knows by its frame, so tests/test_native.py holds it, not the examples.
          ("thread 'main' panicked at src/machine/system_calls.rs:4033:26:",)),
    Shape("rust panic old", "rust-thread-panicked-message-first",
          r"thread '(?P<thread>[^'\n]*)' panicked at '(?P<message>.*)', (?P<file>[^\s:]+):"
          r"(?P<line>\d+)(?::(?P<column>\d+))?", "rust",
          R.Remedy("A Rust thread panicked (Rust before 1.73 prints the message first): "
                   "`file:line` is where.", severity="critical")),
    Shape("c assert", "c-assertion-failed",
          r"(?:(?P<program>[^\s:]+): )?(?P<file>[^\s:]+):(?P<line>\d+): (?P<function>.*?): "
          r"Assertion [`'](?P<condition>.+)' failed\.", "glibc",
          R.Remedy("A C/C++ `assert` failed in native code (`file:line`, in `function`): the "
                   "process aborts (SIGABRT). The condition says what the code expected.",
                   severity="critical")),
    Shape("nvshmem", "nvshmem-non-zero-status", NVSHMEM_LEAD + r"(?P<message>\S.*)", "nvshmem",
          R.Remedy("NVSHMEM reported a failed call at `file:line` with a non-zero status (an "
                   "errno value or an NVSHMEM code) and what failed.")),
    # NVSHMEM's other error macros (`src/include/non_abi/nvshmemx_error.h`): `NULL_ERROR_JMP`
    # prints `%s:%d: NULL value ` and its message; `ERROR_PRINT`/`ERROR_EXIT` print
    # `%s:%s:%d: ` (file, function, line) — a shape kept to paths under an `nvshmem/` folder.
    Shape("nvshmem null", "nvshmem-null-value",
          NVSHMEM_FILE + r":(?P<line>\d+): NULL value (?P<message>\S.*)", "nvshmem",
          R.Remedy("NVSHMEM got no object back from a call it needed at `file:line` (`NULL "
                   "value`, then what it could not create or allocate) and gave up the step: "
                   "the NVSHMEM lines after it are that failure going up, and the process that "
                   "started NVSHMEM (DeepEP's buffer, for sglang's `--moe-a2a-backend deepep`) "
                   "fails with it."),
          # https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/5050 (train)
          (("/dvs/p4/build/sw/rel/gpgpu/toolkit/r13.0/main_nvshmem/src/modules/transport/ibgda/"
            "ibgda.cpp:2234: NULL value Unable to create ah."),)),
    Shape("nvshmem error", "nvshmem-error-line",
          r"(?P<file>[^\s:]*nvshmem[\w.-]*/[^\s:]*\.(?:cpp|cu|cc|c|h)):(?P<function>\w+):"
          r"(?P<line>\d+): (?P<message>\S.*)", "nvshmem",
          R.Remedy("NVSHMEM reported an error at `file:function:line` (its `NVSHMEMI_ERROR_PRINT`) "
                   "and what failed; the first such line of a run is the cause, those after it "
                   "the failure going up."),
          # https://github.com/deepseek-ai/DeepEP/issues/55 (train): NVSHMEM built from its
          # source tarball (`nvshmem_src/`)
          (("/workspace/nvshmem_src/src/host/transport/transport.cpp:nvshmemi_transport_init:287: "
            "Unable to initialize any transports. returning error."),)),
    Shape("memfabric error", "memfabric-error-line",
          r"(?<!\S)\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ error (?P<tid>\d+) pid\[(?P<pid>\d+)\] "
          r"\[(?P<module>[A-Z]+) (?P<file>[^\s:\]]+):(?P<line>\d+)\] (?P<message>.+)",
          "memfabric-hybrid", R.Remedy(
              "An error logged by MemFabric Hybrid (`memfabric_hybrid`), the memory fabric under "
              "sglang's Ascend transfer engine (PD disaggregation on NPUs), at `file:line` of "
              "one of its modules (`BM`, `SMEM`, `ADAPTER` its Python binding). Its first error "
              "line is the cause of sglang's `Ascend Transfer Engine initialization failed.`"),
          # https://github.com/sgl-project/sglang/issues/10748 (train)
          (("2025-09-22 20:20:40.102319 error 12789 pid[12789] [BM devmm_ioctl.cpp:122] svm "
            "advise failed:-1 : 3 : No such process"),)),
    # AITER's `HIP_CALL` (`csrc/include/aiter_hip_common.h`): `[AITER] %s:%d fail to call %s
    # ---> [HIP error](%s)`, then `exit(0)`; the same macro under other tags (`[TOPK]`).
    Shape("aiter hip call", "aiter-hip-call-failed",
          r"(?:\[(?P<tag>[A-Z]+)\] (?P<file>[^\s:]+):(?P<line>\d+) )?fail to call (?P<call>.+?) "
          r"---> \[HIP error\]\((?P<hip_error>[^)\n]*)\)", "aiter",
          R.Remedy("A call to the HIP runtime from AITER (AMD's kernel library, sglang's "
                   "attention and MoE kernels on ROCm) failed with the HIP error in brackets "
                   "(`hipGetErrorString`), at AITER's `file:line` (often a module it built "
                   "just in time, under `aiter/jit/build/`); AITER exits the process right "
                   "after, so the schedulers die without a Python traceback."),
          # https://github.com/ROCm/aiter/issues/1220 (train)
          (("fail to call hipModuleLaunchKernel( kernel_func, gdx, gdy, gdz, bdx, 1, 1, 0, "
            "stream, nullptr, (void**)&config) ---> [HIP error](invalid argument)"),)),
    # yalantinglibs' easylog (coro_rpc, the RPC under Mooncake Store): `date time LEVEL [tid]
    # [file:line] msg`, the level padded to eight characters.
    Shape("easylog error", "easylog-error-line",
          r"(?<!\S)\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ (?P<level>ERROR|CRITICAL) +"
          r"\[(?P<thread>\d+)\] \[(?P<file>[^\s:\]]+\.(?:hpp|cpp|h|cc)):(?P<line>\d+)\] "
          r"(?P<message>.+)", "yalantinglibs",
          R.Remedy("An error logged with easylog by yalantinglibs (coro_rpc, coro_io: the RPC "
                   "library under Mooncake Store's client and master) at `file:line`, with what "
                   "failed — in coro_rpc mostly a connection to the other end (`mooncake_master` "
                   "or a peer) that closed or could not be made. Mooncake's own lines around it "
                   "say which call it broke."),
          # https://github.com/kvcache-ai/Mooncake/issues/456 (train)
          (("2025-06-06 09:39:00.285457 ERROR    [382] [coro_rpc_client.hpp:923] client has "
            "been closed, please re-connect"),)),
    # Mooncake Store's master client (`LOG(ERROR) << "Batch RPC call failed: " << msg`).
    Shape("mooncake batch rpc", "mooncake-store-batch-rpc-failed",
          r"Batch RPC call failed: (?P<message>\S.*)", "mooncake", R.MOONCAKE_BATCH_RPC,
          # https://github.com/sgl-project/sglang/issues/24018 (train)
          ("Batch RPC call failed: Expected DiskDescriptor",)),
    Shape("ucx caught signal", "ucx-caught-signal",
          r"\] Caught signal (?P<signal>\d+) \((?P<reason>[^)\n]*)\)", "ucx", R.UCX_SIGNAL,
          # https://github.com/sgl-project/sglang/issues/6694 (train)
          (("[ubuntu-GPU-L40S-4802111:12796:1:13303] Caught signal 11 (Segmentation fault: "
           "invalid permissions for mapped object at address 0x7fbd60001400)"),)),
    Shape("xid", "nvidia-xid", r"(?:NVRM: )?Xid \((?P<pci>[^)\n]*)\): (?P<xid>\d+)\b,? ?(?P<detail>.*)",
          "nvidia-driver", R.Remedy(
              "The NVIDIA driver logged an Xid event (a GPU error) in the kernel log, for the "
              "GPU at the PCI address shown. NVIDIA's Xid catalog explains each code.",
              severity="critical")),
    Shape("amdgpu page fault", "amdgpu-page-fault",
          r"amdgpu[^\n]*?\[(?P<hub>\w+)\] (?:(?:no-)?retry )?page fault \(", "amdgpu",
          R.AMDGPU_FAULT,
          # https://github.com/ROCm/amdgpu/issues/172 (train)
          (("[ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 "
           "ring:24 vmid:3 pasid:32769)"),)),
    Shape("amdgpu protection fault", "amdgpu-vm-l2-protection-fault",
          r"(?P<register>(?:GC)?VM_L2_PROTECTION_FAULT_STATUS):(?P<status>0x[0-9A-Fa-f]+)",
          "amdgpu", R.AMDGPU_FAULT,
          ("[ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031",)),
)


# The lines native code prints before it calls abort(): faulthandler's `Fatal Python error:
# Aborted` after one of them ends that failure.
_ABORTING = {"Aborted": ("terminate", "terminate xgrammar", "terminate recursively",
                         "terminate no exception", "c assert", "glog F")}


def _shapes() -> list[Shape]:
    """The families, and one record per signal and per documented Xid code."""
    out = list(SHAPES)
    for name, remedy in R.FATAL_SIGNALS.items():
        out.append(Shape(f"fatal python error {name}", "python-fatal-error-" + _slug(name),
                         rf"Fatal Python error: {re.escape(name)}", "cpython", remedy,
                         (f"Fatal Python error: {name}",), follows=_ABORTING.get(name, ())))
    for code, remedy in R.XID.items():
        ex: tuple[str, ...] = ()
        if code == 79:  # https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 (train)
            ex = ("NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",)
        if code == 63:  # NVIDIA's debug notes, as quoted by stas00/ml-engineering's debug.md
            ex = (("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
                  "remapping, reset gpu to activate."),)
        out.append(Shape(f"xid {code}", f"nvidia-xid-{code}",
                         rf"(?:NVRM: )?Xid \((?P<pci>[^)\n]*)\): (?P<xid>{code}),? ?(?P<detail>.*)",
                         "nvidia-driver", remedy, ex))
    return out


def shape_record(s: Shape) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": record_id("shape\n" + s.key),
        "slug": s.slug,
        "errorMessage": None,
        "messagePattern": s.pattern,
        "errorClass": None,
        "errorType": "native",
        "severity": s.remedy.severity,
        "documentation": s.remedy.documentation,
        "solutions": list(s.remedy.solutions),
        "tags": ["native", s.package, "family"],
        "sourcePackage": s.package,
        "sourceVersions": list(s.versions),
        "generator": GENERATOR,
    }
    if s.remedy.fix_actions:
        rec["fixActions"] = [list(way) for way in s.remedy.fix_actions]
    if s.follows:
        rec["consequenceOf"] = [record_id("shape\n" + key) for key in s.follows]
    if s.examples:
        rec["examples"] = {"match": list(s.examples)}
    return rec


# -- curated precedence ------------------------------------------------------------------------

def curated_patterns(folder: Path = CURATED) -> list[regex.Pattern[str]]:
    out = []
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        for item in doc if isinstance(doc, list) else [doc]:
            rec = item.get("record", item) if isinstance(item, dict) else {}
            pattern = rec.get("messagePattern")
            if isinstance(pattern, str):
                out.append(regex.compile(pattern))
    return out


def taken_by_curated(record: dict[str, Any], curated: Sequence[regex.Pattern[str]]) -> bool:
    """A curated record already recognizes this status's lines."""
    lines = record.get("examples", {}).get("match", []) or [record["errorMessage"] or ""]
    return any(p.search(line) for line in lines for p in curated if line)


def build(vocab: Path = VOCAB, curated: Path | None = CURATED) -> tuple[list[dict[str, Any]],
                                                                      list[str]]:
    """The records, and the status strings left to curated records."""
    patterns = curated_patterns(curated) if curated is not None else []
    records: list[dict[str, Any]] = []
    left: list[str] = []
    for s in statuses(read_tsv(vocab)):
        for family, rec in ((s.family, status_record(s)), ("hip", hip_twin(s))):
            if rec is None:
                continue
            if taken_by_curated(rec, patterns):
                left.append(f"{family}: {s.text}")
                continue
            records.append(rec)
    if curated is not None:
        stealing = _taking_curated_lines(records, curated)
        left += [f"{r['slug']} (takes a curated record's line)" for r in records
                 if r["id"] in stealing]
        records = [r for r in records if r["id"] not in stealing]
    records += [shape_record(s) for s in _shapes()]
    ids = [r["id"] for r in records]
    if len(ids) != len(set(ids)):
        raise ValueError("two native records share an id")
    return records, left


def _taking_curated_lines(records: Sequence[dict[str, Any]], folder: Path) -> set[str]:
    """The ids of status records that the engine would choose over a curated record on a line
    that record is proven on (`catalog test` would fail): the curated record says more."""
    from matcher.catalog.check import frame_text
    from matcher.catalog.load import load_paths, validate_record
    from matcher.engine import Engine

    curated = load_paths([folder], "curated").records
    ours = [v for i, r in enumerate(records)
            if not isinstance(v := validate_record(r, "native.jsonl", i, "generated"), list)]
    taken: set[str] = set()
    while True:
        kept = [r for r in ours if r.id not in taken]
        engine = Engine([*curated, *kept])
        native_ids = {r.id for r in kept}
        found = set()
        for rec in curated:
            for example in rec.examples_match:
                winners = {m.pattern.id for f in frame_text(example)
                           if (m := engine.match(f)) is not None}
                if rec.id not in winners:
                    found |= winners & native_ids
        if not found:
            return taken
        taken |= found


def write(records: Sequence[dict[str, Any]], path: Path) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m matcher.catalog.native",
                                description="write the native failures' records")
    p.add_argument("--vocab", type=Path, default=VOCAB)
    p.add_argument("--curated", type=Path, default=CURATED,
                   help="curated records: a status they recognize is left to them")
    p.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = p.parse_args(argv)
    records, left = build(args.vocab, args.curated)
    write(records, args.output)
    print(f"{args.output}: {len(records)} records; {len(left)} status strings left to curated "
          f"records: " + "; ".join(left))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
