"""Huawei Ascend NPU status codes: one record per ACL return code (`aclError`, the runtime's
`ACL_ERROR_RT_*`) and per HCCL result (`HcclResult`, `HCCL_E_*`), read from the `torch-npu`
wheels on PyPI.

The wheel ships CANN's headers and its own table of what each code means:

- `torch_npu/include/acl/acl_base_rt.h` (`static const int ACL_ERROR_X = 100000;`) and
  `torch_npu/include/acl/error_codes/rt_error_codes.h` (`#define ACL_ERROR_RT_X 507033 // …`)
  name the ACL codes;
- `torch_npu/include/torch_npu/csrc/core/npu/NPUErrorCodes.h` (`AclErrorCode::error_code_map`)
  gives for each code the sentence torch_npu prints under `[Error]:` and the advice under it;
- `torch_npu/include/third_party/hccl/inc/hccl/hccl_types.h` names the HCCL results.

torch_npu raises `NPU function error: <call>, error code is <N>` (`OPS function error: …` for an
operator, `HCCL function error: <hccl call>, error code is <N>` for a collective) and CANN's own
lines say `runtime result = <N>`; a record matches those forms with its number, or its name.
What to do is torch_npu's advice, and for the codes whose way out is known (the device cannot
be reached, device memory ran out, an operator faulted, the HCCL link failed) `REMEDIES`.

    python -m matcher.catalog.ascend --build   # read the wheels, write ascend.vocab.tsv
    python -m matcher.catalog.ascend           # write ascend.jsonl from it
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matcher.catalog import status_table
from matcher.catalog.ascend_remedies import GENERIC as GENERIC_ADVICE_SOURCE
from matcher.catalog.ascend_remedies import GENERIC_ADVICE, REMEDIES

GENERATOR = "matcher.catalog.ascend"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "ascend.vocab.tsv"
OUTPUT = GENERATED / "ascend.jsonl"
COLUMNS = ("package", "version", "kind", "code", "name", "text", "advice")
# torch-npu releases sglang's Ascend images used (2.6.0, 2.8.0) and the newest when written.
VERSIONS = ("2.6.0", "2.8.0", "2.14.0")
INCLUDE = "torch_npu/include/"
# Newer wheels ship CANN's headers under include/acl/, older ones under third_party/acl/inc/acl/.
ACL_NAMES = tuple(root + name for root in ("acl/", "third_party/acl/inc/acl/")
                  for name in ("acl_base_rt.h", "acl_base.h", "error_codes/rt_error_codes.h"))
ACL_TEXTS = "torch_npu/csrc/core/npu/NPUErrorCodes.h"
HCCL_TYPES = "third_party/hccl/inc/hccl/hccl_types.h"

_CONST = re.compile(r"\bstatic\s+const\s+int\s+(ACL_ERROR_\w+)\s*=\s*(\d+)\s*;")
_DEFINE = re.compile(r"^#define\s+(ACL_ERROR_\w+)\s+(\d+)\s*(?://\s*(.*))?$", re.MULTILINE)
# A C string literal; a backslash may escape the line's end (the map's texts go on over lines).
_ENTRY = re.compile(r"\{\s*(\d+)\s*,\s*((?:\"(?:[^\"\\]|\\[\s\S])*\"\s*)+)\}")
_LITERAL = re.compile(r"\"((?:[^\"\\]|\\[\s\S])*)\"")
_HCCL = re.compile(r"^\s*(HCCL_E_\w+)\s*=\s*(\d+)\s*,\s*/\*\*<\s*(.*?)\s*\*/", re.MULTILINE)
_SPACE = re.compile(r"\s+")


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def acl_names(headers: Sequence[str]) -> dict[int, tuple[str, str]]:
    """code -> (name, the header's comment) for each ACL error code the headers define."""
    found: dict[int, tuple[str, str]] = {}
    for text in headers:
        for name, code in _CONST.findall(text):
            found.setdefault(int(code), (name, ""))
        for m in _DEFINE.finditer(text):
            found.setdefault(int(m[2]), (m[1], _clean(m[3] or "")))
    return found


def acl_texts(source: str) -> dict[int, tuple[str, str]]:
    """code -> (meaning, advice) from torch_npu's `error_code_map`: the first line of an entry
    says what happened, the lines after it what to check."""
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.DOTALL)
    out: dict[int, tuple[str, str]] = {}
    for m in _ENTRY.finditer(source):
        body = "".join(_LITERAL.findall(m[2])).replace("\\\n", "")
        lines = [_clean(part) for part in body.split("\\n")]
        lines = [line for line in lines if line]
        if lines:
            out[int(m[1])] = (lines[0], " ".join(lines[1:]))
    return out


def hccl_results(source: str) -> dict[int, tuple[str, str]]:
    return {int(code): (name, _clean(said)) for name, code, said in _HCCL.findall(source)}


def vocabulary(files: dict[str, str]) -> list[tuple[str, str, str, str, str]]:
    """(kind, code, name, text, advice) of each failing status the wheel's headers spell out."""
    names = acl_names([files.get(INCLUDE + p, "") for p in ACL_NAMES])
    texts = acl_texts(files.get(INCLUDE + ACL_TEXTS, ""))
    rows = []
    for code, (name, comment) in sorted(names.items()):
        if code == 0:
            continue
        meaning, advice = texts.get(code, (comment, ""))
        rows.append(("acl", str(code), name, meaning or comment, advice))
    for code, (name, said) in sorted(hccl_results(files.get(INCLUDE + HCCL_TYPES, "")).items()):
        if code != 0:
            rows.append(("hccl", str(code), name, said, ""))
    return rows


def build() -> list[tuple[str, ...]]:
    from matcher.catalog import soname_sources as S

    wanted = [INCLUDE + p for p in (*ACL_NAMES, ACL_TEXTS, HCCL_TYPES)]
    rows: list[tuple[str, ...]] = []
    for version in VERSIONS:
        url = S.wheel_url("torch-npu", version)
        if url is None:
            raise SystemExit(f"no wheel of torch-npu=={version}")
        with zipfile.ZipFile(S.RangeFile(url)) as z:
            present = set(z.namelist())
            files = {p: z.read(p).decode("utf-8", "replace") for p in wanted if p in present}
        rows += [("torch-npu", version, *row) for row in vocabulary(files)]
    return rows


def _pattern(kind: str, code: str, name: str) -> str:
    if kind == "hccl":
        said = r"HCCL function error\b"
    else:
        said = r"(?:NPU|OPS) function error\b"
    return (rf"(?:\b{name}\b|{said}[^\n]{{0,400}}?, error code is {code}\b"
            + (rf"|\bruntime result = {code}\b)" if kind == "acl" else ")"))


def _solutions(name: str, advice: str) -> list[str]:
    out = list(REMEDIES.get(name, ()))
    if advice.startswith(GENERIC_ADVICE_SOURCE):
        out.append(GENERIC_ADVICE)
    elif advice:
        out.append(f"torch_npu's advice: {advice}")
    return out


def records(rows: Sequence[tuple[str, ...]]) -> list[dict[str, Any]]:
    by_name: dict[str, list[tuple[str, ...]]] = {}
    for row in rows:
        by_name.setdefault(row[4], []).append(row)
    out = []
    for name, group in sorted(by_name.items(), key=lambda kv: (kv[1][0][2], int(kv[1][0][3]))):
        _, _, kind, code, _, text, advice = group[-1]
        library = "HCCL (the collective library)" if kind == "hccl" else "CANN's ACL runtime"
        solutions = _solutions(name, advice)
        out.append({
            "id": hashlib.sha256(f"sglang-matcher/ascend/{name}".encode()).hexdigest()[:16],
            "slug": "ascend-" + name.lower().replace("_", "-"),
            "errorMessage": name, "messagePattern": _pattern(kind, code, name),
            "errorClass": None, "errorType": "native",
            "severity": "critical" if name in REMEDIES else "error",
            "documentation": f"On an Ascend NPU, {library} returned {name} ({code}): “{text}”. "
                             "torch_npu raises it as `… function error: <call>, error code is "
                             f"{code}`; sglang runs on Ascend through torch_npu (--device npu).",
            "solutions": solutions, "tags": ["native", "ascend", "npu", kind],
            "sourcePackage": "torch-npu",
            "sourceVersions": sorted({r[1] for r in group}), "generator": GENERATOR,
            "examples": {"match": [name]}})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return status_table.main(argv, prog="python -m matcher.catalog.ascend", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT, build=build,
                             records=records)


if __name__ == "__main__":
    raise SystemExit(main())
