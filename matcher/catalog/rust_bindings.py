r"""Python packages whose code is Rust — tokenizers and safetensors — and the exceptions their
bindings raise: records by rule from each release's sdist.

sglang reads every model through both: transformers loads `tokenizer.json` with tokenizers and
the weights with safetensors. Their exceptions are made in Rust and raised through pyo3, so no
Python source holds their text and `deps.py` (which reads Python) never sees it:

    safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge
    Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 2
    TypeError: TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]

`python -m matcher.catalog.rust_bindings --build` reads each release's sdist from PyPI and writes
the vocabulary `rust-bindings.vocab.tsv`, one row per site and release:

- `raise`: every `XError::new_err(…)` of the bindings crate (`bindings/python/src/`), found by
  `rust_source.sites` — the Python class (`PyTypeError` → `TypeError`, pyo3's `PyException` →
  `Exception`, a crate's own `create_exception!` class by its name) and the message template;
- `untagged`: the core crate's `#[serde(untagged)]` enums. serde words a value that fits none of
  their variants as `data did not match any variant of untagged enum NAME`, and the bindings
  raise it as `Exception: … at line L column C` (a `tokenizer.json` that a newer tokenizers wrote).

Without `--build` the records are made from the committed table alone (no network). What to do
comes from `REMEDIES`, chosen by the words of the message; a site no remedy speaks for gets a
record without solutions (recognized, and said to come from that package and release range).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matcher.catalog import status_table
from matcher.catalog.router import MIN_LITERAL_RUN, longest_literal, message_pattern
from matcher.catalog.rust_source import Hole, RustSite, sites
from matcher.catalog.versions import version_key

GENERATOR = "matcher.catalog.rust_bindings"
GENERATED = Path(__file__).resolve().parents[2] / "patterns" / "sglang" / "generated"
VOCAB = GENERATED / "rust-bindings.vocab.tsv"
OUTPUT = GENERATED / "rust-bindings.jsonl"
COLUMNS = ("package", "version", "kind", "class", "template", "site")

# The releases read: those sglang's releases pin or admit (tokenizers is pinned from 0.5.19 on;
# transformers 4.4x–5.x admit these), newest of each minor line.
RELEASES: dict[str, tuple[str, ...]] = {
    "tokenizers": ("0.19.1", "0.20.3", "0.21.1", "0.22.2", "0.23.2"),
    "safetensors": ("0.4.5", "0.5.3", "0.6.2", "0.7.0"),
}
# The module a traceback shows a crate's own exception class under.
CUSTOM_CLASS_MODULE = {"SafetensorError": "safetensors_rust"}


_NEW_ERR = re.compile(r"(?:exceptions::)?(\w+)::new_err")
# A format string read as a bare literal (its arguments not found): `{e}` shows as `{{e}}`.
_UNREAD_FORMAT = re.compile(r"\{\{\w*(?::\??)?\}\}")
_UNTAGGED = re.compile(r"#\[serde\(untagged\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?"
                       r"enum\s+(\w+)")
_UNTAGGED_TEXT = re.compile(r"data did not match any variant of untagged enum (\w+)")


# -- reading the sources ------------------------------------------------------------------------


def python_class(rust_class: str) -> str:
    """pyo3's `PyTypeError` → `TypeError`, `PyException` → `Exception`; a crate's own class
    keeps its name."""
    if rust_class.startswith("Py") and rust_class[2:3].isupper():
        return rust_class[2:]
    return rust_class


def vocabulary(package: str, version: str, files: Iterable[tuple[str, str]]) -> list[tuple[str, ...]]:
    """The rows of one release: `files` are (path inside the sdist, text) of its Rust sources."""
    rows: set[tuple[str, ...]] = set()
    for path, text in files:
        if "/bindings/python/src/" in f"/{path}":
            # `new_err(format!("… {e}"))` is found twice: as the format and as a bare literal
            # (braces then literal text); a site keeps the reading with the most holes.
            best: dict[int, RustSite] = {}
            for s in sites(text, path):
                if s.kind == "error" and s.macro == "new_err":
                    holes = sum(isinstance(p, Hole) for p in s.parts)
                    kept = best.get(s.line)
                    if kept is None or holes > sum(isinstance(p, Hole) for p in kept.parts):
                        best[s.line] = s
            for s in best.values():
                cls = s.py_class or (_NEW_ERR.search(s.source) or [None, ""])[1]
                if cls and not _UNREAD_FORMAT.search(s.template):
                    rows.add((package, version, "raise", python_class(cls), s.template,
                              f"{path}:{s.line}"))
        elif path.endswith(".rs") and "/src/" in f"/{path}":
            names = set(_UNTAGGED.findall(text)) | set(_UNTAGGED_TEXT.findall(text))
            rows.update((package, version, "untagged", "Exception", name, path) for name in names)
    return sorted(rows)


def read_sdist(data: bytes) -> list[tuple[str, str]]:
    """(path below the sdist's top folder, text) of every `.rs` file in an sdist."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if not (member.isfile() and member.name.endswith(".rs")):
                continue
            f = tar.extractfile(member)
            if f is not None:
                out.append((member.name.split("/", 1)[-1], f.read().decode("utf-8", "replace")))
    return out


def _sdist_url(package: str, version: str) -> str:
    with urllib.request.urlopen(f"https://pypi.org/simple/{package}/", timeout=60) as r:
        index = r.read().decode("utf-8")
    m = re.search(rf'href="([^"]*/{package}-{re.escape(version)}\.tar\.gz)[#"]', index)
    if m is None:
        raise SystemExit(f"PyPI has no sdist of {package}=={version}")
    return m.group(1)


def build() -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for package, versions in RELEASES.items():
        for version in versions:
            with urllib.request.urlopen(_sdist_url(package, version), timeout=120) as r:
                rows += vocabulary(package, version, read_sdist(r.read()))
    return rows


# -- what to do ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Remedy:
    package: str
    words: re.Pattern[str]  # searched in the message template
    documentation: str
    solutions: tuple[str, ...]


_REDOWNLOAD = (
    ("Find the damaged file: list the model folder's `*.safetensors` with their sizes (`ls -l`) "
    "and compare them with the sizes on the Hub; a file of about 130 bytes that starts with "
    "`version https://git-lfs` is a Git LFS pointer, not weights"),
    ("Fetch the real files: in a `git clone` of the model run `git lfs install && git lfs pull`; "
    "otherwise delete the damaged files (or the model's folder under "
    "`~/.cache/huggingface/hub/models--…`) and download again with "
    "`huggingface-cli download <repo> --local-dir <dir>`, which resumes and checks sizes"),
)

REMEDIES: tuple[Remedy, ...] = (
    Remedy("safetensors", re.compile(r"^Error while deserializing header"),
           "The first 8 bytes of a safetensors file give the length of its JSON header; a file "
           "that is not a whole safetensors file fails here — a Git LFS pointer left by a "
           "`git clone` without git-lfs (`HeaderTooLarge`), an HTML error page saved by a proxy, "
           "a download cut short or a full disk (`MetadataIncompleteBuffer`: incomplete "
           "metadata, file not fully covered).",
           _REDOWNLOAD),
    Remedy("safetensors", re.compile(r"^File does not contain tensor"),
           "The weight index (`model.safetensors.index.json`) names a tensor that its shard does "
           "not hold: shards of two revisions of the model mixed in one folder, or a shard "
           "replaced by another file.",
           (("Download the whole snapshot again into an empty folder "
            "(`huggingface-cli download <repo> --revision <rev> --local-dir <new dir>`) so that "
            "the index and every shard are of one revision"),)),
    Remedy("tokenizers", re.compile(r"^data did not match any variant of untagged enum"),
           "tokenizers could not read `tokenizer.json`: a part of it (the model, a normalizer, "
           "a pre-tokenizer, a decoder) is in a form the installed tokenizers does not know. "
           "The file was written by a newer tokenizers (tokenizers 0.20 writes BPE merges as "
           "pairs, which 0.19 and older reject), or it is damaged.",
           (("Upgrade tokenizers with the transformers that requires it: "
            "`pip install -U transformers tokenizers` (stay within what your sglang release "
            "pins: `pip check` names a conflict), or upgrade sglang to a release newer than "
            "the model"),
            ("If the versions are already new, the file may be damaged: download "
            "`tokenizer.json` again and check that it is valid JSON"))),
    Remedy("tokenizers", re.compile(r"^(?:TextEncodeInput|TextInputSequence|InputSequence)"
                                    r" must be"),
           "The tokenizer was given something that is not text: None, a number, a nested list, "
           "a dict — or a string holding lone UTF-16 surrogates, which cannot become UTF-8. In "
           "a server this is a request whose prompt is null or not a string, or a chat message "
           "whose content the template passed through as a list.",
           (("Find the request that failed and send text: `text`/`prompt` a string or a list of "
            "strings, chat `content` a string or a list of `{\"type\": \"text\", …}` parts the "
            "model's template accepts; drop null entries"),
            ("Clean text that comes from PDFs or other extraction of lone surrogates "
            "(`s.encode('utf-8', 'replace').decode('utf-8')`) before sending it"))),
)


def remedy_for(package: str, template: str) -> Remedy | None:
    return next((r for r in REMEDIES if r.package == package and r.words.search(template)), None)


# -- records ------------------------------------------------------------------------------------


_HOLE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def parts_of(template: str) -> tuple[str | Hole, ...]:
    """A format template back into literal text and holes (`RustSite.template`'s inverse)."""
    out: list[str | Hole] = []
    pos = 0
    text = ""
    for m in _HOLE.finditer(template):
        text += template[pos:m.start()]
        pos = m.end()
        if m.group(0) in ("{{", "}}"):
            text += m.group(0)[0]
            continue
        if text:
            out.append(text)
            text = ""
        expr, _, spec = m.group(1).partition(":")
        out.append(Hole(expr, spec))
    text += template[pos:]
    if text:
        out.append(text)
    return tuple(out)


def _usable(parts: Sequence[str | Hole]) -> bool:
    literal = " ".join(p.strip() for p in parts if isinstance(p, str)).strip()
    return longest_literal(parts) >= MIN_LITERAL_RUN and " " in literal


def _range(versions: Iterable[str]) -> str:
    vs = sorted(set(versions), key=version_key)
    return vs[0] if len(vs) == 1 else f"{vs[0]}..{vs[-1]}"


def _record(package: str, key: str, *, message: str, pattern: str, cls: str,
            versions: Sequence[str], documentation: str, site: str, remedy: Remedy | None,
            ) -> dict[str, Any]:
    shown = f"{CUSTOM_CLASS_MODULE[cls]}.{cls}" if cls in CUSTOM_CLASS_MODULE else cls
    doc = f"{package}'s Rust code raises {shown} with this message ({documentation}). " \
          f"Raised by {package} {_range(versions)}."
    if remedy is not None:
        doc += " " + remedy.documentation
    return {
        "id": hashlib.sha256(f"sglang-matcher/rust_bindings/{package}/{key}".encode())
        .hexdigest()[:16],
        "slug": f"{package}-" + (re.sub(r"[^a-z0-9]+", "-", message.lower()).strip("-")[:40]
                                 or "error"),
        "errorMessage": message, "messagePattern": pattern, "errorType": "raise",
        "errorClass": cls, "severity": "error", "filePath": site.split(":")[0],
        "documentation": doc, "solutions": list(remedy.solutions) if remedy else [],
        "tags": ["dependency", package, "rust", "generated"],
        "sourcePackage": package, "sourceVersions": [_range(versions)],
        "generator": GENERATOR, "schemaVersion": 2,
    }


def records(rows: Sequence[tuple[str, ...]]) -> list[dict[str, Any]]:
    """One record per (package, class, message) over releases, and one per package for its
    untagged enums."""
    raises: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
    untagged: dict[str, dict[str, set[str]]] = {}
    for package, version, kind, cls, template, site in rows:
        if kind == "raise":  # `{err:?}` in one release, `{e}` in the next: one message
            skeleton = _HOLE.sub(lambda m: m.group(0) if m.group(1) is None else "{}", template)
            raises.setdefault((package, cls, skeleton), []).append((version, site, template))
        elif kind == "untagged":
            untagged.setdefault(package, {}).setdefault(template, set()).add(version)
    out = []
    for (package, cls, skeleton), seen in sorted(raises.items()):
        newest = max(seen, key=lambda vs: version_key(vs[0]))
        template = newest[2]
        parts = parts_of(template)
        if not _usable(parts):
            continue
        out.append(_record(
            package, f"{cls}\n{skeleton}", message=template,
            pattern=message_pattern(parts, anchored=True), cls=cls,
            versions=[v for v, _, _ in seen], documentation=f"bindings/python, {newest[1]}",
            site=newest[1], remedy=remedy_for(package, template)))
    for package, names in sorted(untagged.items()):
        alternatives = "|".join(sorted(names))
        versions = sorted(set().union(*names.values()), key=version_key)
        message = "data did not match any variant of untagged enum {enum}"
        out.append(_record(
            package, "untagged", message=message,
            pattern=(r"(?<![\s\S])\s*data did not match any variant of untagged enum "
                     rf"(?P<enum>{alternatives})\b(?: at line (?P<line>\d+) column "
                     r"(?P<column>\d+))?"),
            cls="Exception", versions=versions,
            documentation="serde, reading an untagged enum of its JSON: "
            + ", ".join(sorted(names)), site="tokenizers/src",
            remedy=remedy_for(package, message)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    return status_table.main(argv, prog="python -m matcher.catalog.rust_bindings", doc=__doc__,
                             vocab=VOCAB, columns=COLUMNS, output=OUTPUT, build=build,
                             records=records)


if __name__ == "__main__":
    raise SystemExit(main())
