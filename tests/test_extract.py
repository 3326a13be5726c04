"""`catalog extract`: sglang's raise, assert and logger sites become records recognizing its logs.

The constructs are shown on small snippets, each with the whole record it gives; a bare raise or
assert gives a frame record, whose `raisedIn` is checked against the traceback the real
interpreter prints for it. The real sglang 0.5.23 source enters through a verbatim copy of
`srt/arg_groups/mamba_hook.py` (the seed's check) and through the shipped catalog, which must
recognize every real launch log whose traceback ends at a raise or assert of sglang's — at that
very file and line.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import regex

from matcher.catalog import load_catalog, merge_layers
from matcher.catalog.check import frame_text
from matcher.catalog.extract import (
    DUPLICATE,
    DUPLICATE_FRAME,
    FAILURE,
    KEYWORD_ONLY,
    MOSTLY_HOLES,
    NOT_TEMPLATE,
    PARAMETER,
    RERAISE,
    VIA_HELPER,
    Stats,
    extract_module,
    record_id,
)
from matcher.catalog.load import load_paths, validate_record
from matcher.catalog.patterns import literal_cover
from matcher.catalog.releases import merge_releases
from matcher.catalog.schema import CatalogRecord
from matcher.commands.scan import cmd_scan
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.stored_form import EngineCache
from matcher.types import Chunk

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "sglang"
LAUNCH = FIXTURES / "launch"
GENERATED = REPO / "patterns" / "sglang" / "generated"
SHIPPED = GENERATED / "sglang.jsonl"
MODULE = "sglang/srt/foo.py"


def extract(source: str, path: str = MODULE):
    return extract_module(source, path, version="0.5.23")


def record(line: int, template: str, pattern: str, *, cls: str | None = "ValueError",
           kind: str = "raise", severity: str = "error", doc: str, path: str = MODULE,
           slug: str) -> dict:
    """The record a site of `sglang/srt/foo.py` must give, field by field."""
    module = path.removesuffix(".py").replace("/", ".")
    return {
        "id": record_id(module, cls or f"logger.{severity}", template),
        "repo": "sgl-project/sglang",
        "slug": slug,
        "errorMessage": template,
        "messagePattern": pattern,
        "errorType": kind,
        "errorClass": cls,
        "severity": severity,
        "filePath": f"python/{path}",
        "lineNumber": line,
        "githubUrl": f"https://github.com/sgl-project/sglang/blob/v0.5.23/python/{path}#L{line}",
        "documentation": doc,
        "tags": ["sglang", "generated", kind, *Path(path).parts[1:-1][:2]],
        "sglangVersions": ["0.5.23"],
        "schemaVersion": 2,
    }


A = r"(?<![\s\S])\s*"  # how a raise/assert pattern starts: at the start of the message


CONSTRUCTS = [
    ("f-string, attribute hole named after the attribute", '''
def check(cfg):
    if cfg.radix_cache_backend is not None:
        raise ValueError(
            "--enable-int8-mamba-checkpoint only supports the built-in mamba "
            f"radix cache; --radix-cache-backend={cfg.radix_cache_backend!r} "
            "is not int8-aware. Omit --radix-cache-backend."
        )
''', record(
        4,
        "--enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
        "--radix-cache-backend={cfg.radix_cache_backend!r} is not int8-aware. Omit "
        "--radix-cache-backend.",
        A + r"--enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
        r"--radix-cache-backend=(?P<radix_cache_backend>.+?) is not int8-aware\. Omit "
        r"--radix-cache-backend\.",
        slug="enable-int8-mamba-checkpoint-only-supports-the-b",
        doc="`check()` in sglang/srt/foo.py:4 raises ValueError with this message when "
            "`cfg.radix_cache_backend is not None`.")),
    ("% with a tuple: holes named after names, spec kept", '''
def f(n, name):
    raise ValueError("--tp-size must be positive, got %d (%s)" % (n, name))
''', record(
        3, "--tp-size must be positive, got {n:d} ({name})",
        A + r"--tp-size must be positive, got (?P<n>.+?) \((?P<name>.+?)\)",
        slug="tp-size-must-be-positive-got-n-d-name",
        doc="`f()` in sglang/srt/foo.py:3 raises ValueError with this message.")),
    ("% with a mapping and a literal %%", '''
def f(d):
    raise RuntimeError("usage %(pct)d%% is over the limit %(limit)r" % {"pct": d.p, "limit": 9})
''', record(
        3, "usage {d.p:d}% is over the limit {9!r}",
        A + r"usage (?P<pct>.+?)% is over the limit (?P<limit>.+)", cls="RuntimeError",
        slug="usage-d-p-d-is-over-the-limit-9-r",
        doc="`f()` in sglang/srt/foo.py:3 raises RuntimeError with this message.")),
    (".format() with positional and keyword fields", '''
def f(a, b):
    raise TypeError("expected {} tensors, got {got!r} for {}".format(a, b, got=len(b)))
''', record(
        3, "expected {a} tensors, got {len(b)!r} for {b}",
        A + r"expected (?P<a>.+?) tensors, got (?P<got>.+?) for (?P<b>.+)",
        cls="TypeError", slug="expected-a-tensors-got-len-b-r-for-b",
        doc="`f()` in sglang/srt/foo.py:3 raises TypeError with this message.")),
    ("a hole that opens a raise's message takes no whitespace", '''
class Scheduler:
    def __init__(self, beta_schedule):
        raise NotImplementedError(f"{beta_schedule} is not implemented for {self.__class__}")
''', record(
        4, "{beta_schedule} is not implemented for {self.__class__}",
        A + r"(?P<beta_schedule>\S+?) is not implemented for (?P<__class__>.+)",
        cls="NotImplementedError", slug="beta-schedule-is-not-implemented-for-self-class",
        doc="`Scheduler.__init__()` in sglang/srt/foo.py:4 raises NotImplementedError with this "
            "message.")),
    ("+ concatenation: a value that is not a template is a hole, unnamed when a call", '''
class Loader:
    def load(self, path):
        raise FileNotFoundError(
            "Cannot find the weights under " + str(path) + ", check --model-path")
''', record(
        4, "Cannot find the weights under {str(path)}, check --model-path",
        A + r"Cannot find the weights under (.+?), check --model-path", cls="FileNotFoundError",
        slug="cannot-find-the-weights-under-str-path-check-mod",
        doc="`Loader.load()` in sglang/srt/foo.py:4 raises FileNotFoundError with this message.")),
    ("a message built in a variable, with its unconditional appends", '''
def f(mem, frac):
    msg = "Not enough memory. "
    msg += f"Please try to increase --mem-fraction-static (now {frac})."
    if mem:
        msg += " It is below the minimum."
    raise RuntimeError(msg)
''', record(
        7, "Not enough memory. Please try to increase --mem-fraction-static (now {frac}).",
        A + r"Not enough memory\. Please try to increase --mem-fraction-static \(now "
        r"(?P<frac>.+?)\)\.", cls="RuntimeError",
        slug="not-enough-memory-please-try-to-increase-mem-fra",
        doc="`f()` in sglang/srt/foo.py:7 raises RuntimeError with this message.")),
    ("KeyError prints its message quoted", '''
def f(name):
    raise KeyError(f"no weights for layer {name} in checkpoint")
''', record(
        3, "'no weights for layer {name} in checkpoint'",
        A + r"'no weights for layer (?P<name>.+?) in checkpoint'", cls="KeyError",
        slug="no-weights-for-layer-name-in-checkpoint",
        doc="`f()` in sglang/srt/foo.py:3 raises KeyError with this message.")),
    ("assert: AssertionError, at its test's line, the test as the condition", '''
def f(view):
    assert view.page_size in (1, None), (
        f"no_buffer only supports page_size=1, got {view.page_size}."
    )
''', record(
        3, "no_buffer only supports page_size=1, got {view.page_size}.",
        A + r"no_buffer only supports page_size=1, got (?P<page_size>.+?)\.",
        cls="AssertionError", kind="assert",
        slug="no-buffer-only-supports-page-size-1-got-view-pag",
        doc="`f()` in sglang/srt/foo.py:3 asserts with this message: the assertion "
            "`view.page_size in (1, None)` failed.")),
    ("logger.warning with lazy % args: a warning, not anchored, first line only", '''
import logging
logger = logging.getLogger(__name__)
def f(size, chunk):
    logger.warning(
        "chunked_prefill_size=%s is smaller than mamba_cache_chunk_size=%s.\\nDetails follow.",
        size, chunk)
''', record(
        5, "chunked_prefill_size={size} is smaller than mamba_cache_chunk_size={chunk}.\nDetails "
        "follow.",
        r"chunked_prefill_size=(?P<size>.+?) is smaller than mamba_cache_chunk_size="
        r"(?P<chunk>.+?)\.", cls=None, kind="log", severity="warning",
        slug="chunked-prefill-size-size-is-smaller-than-mamba",
        doc="`f()` in sglang/srt/foo.py:5 logs at level warning with this message.")),
    ("logger.exception: severity error, holes of the same name told apart", '''
def f(self, e):
    if e:
        self.logger.exception(f"Scheduler {self.rank} failed to step: {e}; step {e}")
''', record(
        4, "Scheduler {self.rank} failed to step: {e}; step {e}",
        r"Scheduler (?P<rank>.+?) failed to step: (?P<e>.+?); step (?P<e_2>.+)", cls=None,
        kind="log", slug="scheduler-self-rank-failed-to-step-e-step-e",
        doc="`f()` in sglang/srt/foo.py:4 logs at level error with this message when `e`.")),
]


@pytest.mark.parametrize("name,source,expected", CONSTRUCTS, ids=[c[0] for c in CONSTRUCTS])
def test_each_construct_gives_its_whole_record(name, source, expected):
    """Every field of the record, for each way sglang builds a message (`guard`: its own
    test below)."""
    (got,) = extract(source).records
    got.pop("guard", None)
    assert got == expected


def test_records_pass_the_loader_and_match_what_python_prints():
    """A record made from a snippet recognizes the message the snippet really raises."""
    source = CONSTRUCTS[0][1]
    (raw,) = extract(source).records
    rec = validate_record(raw, "gen.jsonl", 0, "generated")
    assert not isinstance(rec, list), rec

    class Cfg:
        radix_cache_backend = "lru"

    namespace: dict = {}
    exec(compile(source, "foo.py", "exec"), namespace)  # noqa: S102 - our own snippet
    with pytest.raises(ValueError) as err:
        namespace["check"](Cfg())
    m = Engine([rec], cache=None).match(frame_text(f"ValueError: {err.value}")[0])
    assert (m.pattern.id, m.captures) == (raw["id"], {"radix_cache_backend": "'lru'"})


def test_sites_without_a_usable_message_are_counted_by_reason():
    source = '''
import logging
logger = logging.getLogger(__name__)
def f(e, msg, x):
    try:
        pass
    except ValueError:
        raise
    raise e
    raise ValueError()
    raise ValueError
    raise HTTPException(status_code=400, detail="bad request body")
    raise ValueError(msg)
    raise ValueError(f"{e}")
    raise ValueError(f"Error: {e}")
    raise ValueError(f"{x.shape=} {x.dtype=}")
    assert x
    logger.error(str(e))
    raise ValueError("the same message twice in one module")
    raise ValueError("the same message twice in one module")
'''
    ex = extract(source)
    # The bare `raise ValueError()`, `raise ValueError` and `assert x` are frame records.
    assert [(r["lineNumber"], "raisedIn" in r) for r in ex.records] == [
        (10, True), (11, True), (17, True), (19, False)]
    assert ex.records[3]["alsoAt"] == [20]
    assert ex.stats == Stats(
        files=1,
        sites={"raise": 11, "assert": 1, "log": 1},
        with_message={"raise": 6},
        covered={"raise": 2, "frame": 3},
        records={"raise": 1, "frame": 3},
        # `msg`, `f"{e}"` and `f"Error: {e}"` are made of f's parameters: read at the calls
        # when f raises what it is given (`index_helpers`), nowhere else
        skipped={RERAISE: 2, KEYWORD_ONLY: 1, NOT_TEMPLATE: 1, PARAMETER: 3, MOSTLY_HOLES: 1,
                 DUPLICATE: 1},
    )


def test_id_is_stable_across_line_moves_and_tells_class_message_and_module_apart():
    raise_ = '    raise ValueError("--tp-size must be a positive integer")\n'
    one = extract("def f():\n" + raise_)
    moved = extract("\n\n\ndef g():\n    x = 1\n" + raise_)
    other_module = extract("def f():\n" + raise_, "sglang/srt/bar.py")
    other_class = extract("def f():\n" + raise_.replace("ValueError", "TypeError"))
    ids = [x.records[0]["id"] for x in (one, moved, other_module, other_class)]
    assert ids[0] == ids[1]
    assert len(set(ids)) == 3


def test_syntax_errors_cost_the_file_only():
    assert extract("def f(:\n").stats == Stats(files=1, files_skipped={"syntax error": 1})


def test_a_byte_order_mark_is_no_syntax_error():
    """sglang 0.4.4.post2 to 0.5.19 ship `srt/models/qwen2_classification.py` with a UTF-8 BOM."""
    ex = extract('\ufeffdef f(n):\n    raise ValueError(f"--tp-size must be >= 1, got {n}")\n')
    assert (ex.stats.files_skipped, len(ex.records), ex.records[0]["lineNumber"]) == ({}, 1, 2)


# --- bare raise and assert: frame records ------------------------------------------------------

def frame_record(line: int, function: str, source: str, *, cls: str = "AssertionError",
                 kind: str = "assert", doc: str, slug: str, path: str = MODULE) -> dict:
    """The record a bare site of `sglang/srt/foo.py` must give: no message, its frame instead."""
    module = path.removesuffix(".py").replace("/", ".")
    return {
        "id": record_id(module, cls, f"frame:{function}:{source}"),
        "repo": "sgl-project/sglang",
        "slug": slug,
        "errorMessage": None,
        "messagePattern": "^$",
        "errorType": kind,
        "errorClass": cls,
        "severity": "error",
        "filePath": f"python/{path}",
        "lineNumber": line,
        "githubUrl": f"https://github.com/sgl-project/sglang/blob/v0.5.23/python/{path}#L{line}",
        "raisedIn": {"path": path, "function": function, "source": source},
        "documentation": doc,
        "tags": ["sglang", "generated", kind, "frame", *Path(path).parts[1:-1][:2]],
        "sglangVersions": ["0.5.23"],
        "schemaVersion": 2,
    }


FRAMED = " — the traceback's frame (raisedIn) tells the site."
NO_MESSAGE_PRINTED = ": the assertion failed, and Python printed no message" + FRAMED

FRAME_CONSTRUCTS = [
    ("bare assert in a method: the function's own name, not dotted with the class", '''
class Scheduler:
    def get_next_batch_to_run(self):
        assert self.req_to_token_pool is not None
''', frame_record(
        4, "get_next_batch_to_run", "assert self.req_to_token_pool is not None",
        slug="assert-self-req-to-token-pool-is-not-none",
        doc="`Scheduler.get_next_batch_to_run()` in sglang/srt/foo.py:4 asserts "
            "`self.req_to_token_pool is not None`" + NO_MESSAGE_PRINTED)),
    ("assert over lines: its last comparison's line, as 3.10 and 3.11 print it", '''
def check(view):
    assert (
        view.page_size is None
        or view.chunked_prefill_size % view.page_size == 0
    )
''', frame_record(
        5, "check", "or view.chunked_prefill_size % view.page_size == 0",
        slug="assert-view-page-size-is-none-or-view-chunked-pr",
        doc="`check()` in sglang/srt/foo.py:5 asserts `view.page_size is None or "
            "view.chunked_prefill_size % view.page_size == 0`" + NO_MESSAGE_PRINTED)),
    ("assert over lines without a comparison: `assert (`; the slug names the test", '''
def check(view):
    assert (
        view.disable_overlap_schedule
    )
''', frame_record(
        3, "check", "assert (", slug="assert-view-disable-overlap-schedule",
        doc="`check()` in sglang/srt/foo.py:3 asserts `view.disable_overlap_schedule`"
            + NO_MESSAGE_PRINTED)),
    ("raise of a bare class under an if", '''
def load(fmt):
    if fmt not in ("pt", "safetensors"):
        raise ValueError
''', frame_record(
        4, "load", "raise ValueError", cls="ValueError", kind="raise", slug="raise-valueerror",
        doc="`load()` in sglang/srt/foo.py:4 raises ValueError without a message when "
            "`fmt not in ('pt', 'safetensors')`" + FRAMED)),
    ("raise X() over two lines in a nested function: the innermost def, the raise's line", '''
def make_hook(cfg):
    def hook(module, inputs):
        raise NotImplementedError(
        )
    return hook
''', frame_record(
        4, "hook", "raise NotImplementedError(", cls="NotImplementedError", kind="raise",
        slug="raise-notimplementederror",
        doc="`make_hook.hook()` in sglang/srt/foo.py:4 raises NotImplementedError without a "
            "message" + FRAMED)),
    ("module-level assert: `<module>`, the line printed whole, comment and all", '''
import torch
assert torch.cuda.is_available()  # the server needs a GPU
''', frame_record(
        3, "<module>", "assert torch.cuda.is_available()  # the server needs a GPU",
        slug="assert-torch-cuda-is-available",
        doc="module-level code in sglang/srt/foo.py:3 asserts `torch.cuda.is_available()`"
            + NO_MESSAGE_PRINTED)),
]


@pytest.mark.parametrize("name,source,expected", FRAME_CONSTRUCTS,
                         ids=[c[0] for c in FRAME_CONSTRUCTS])
def test_each_bare_site_gives_its_whole_frame_record(name, source, expected):
    (got,) = extract(source).records
    got.pop("guard", None)
    assert got == expected


GUARDS = [
    ("an if's test, as written", """
def check(cfg):
    if cfg.enable_lmcache and cfg.enable_hierarchical_cache:
        raise ValueError("lmcache and hierarchical cache are exclusive")
""", "cfg.enable_lmcache and cfg.enable_hierarchical_cache"),
    ("an else branch: the test negated", """
def check(cfg):
    if cfg.device == "cuda":
        pass
    else:
        raise ValueError("this needs a CUDA device to run")
""", "not (cfg.device == 'cuda')"),
    ("an assert: its test negated (it fails when the test is false)", """
def check(cfg):
    assert cfg.tp_size % cfg.nnodes == 0, "tp_size must be divisible by number of nodes"
""", "not (cfg.tp_size % cfg.nnodes == 0)"),
    ("a local read through to the argument it holds (sglang 0.5.23 speculative_hook)", """
def check(cfg):
    if cfg.speculative_draft_window_size is not None:
        window_size = int(cfg.speculative_draft_window_size)
        if window_size <= 0:
            raise ValueError(f"--speculative-draft-window-size must be positive, got {window_size}.")
""", "int(cfg.speculative_draft_window_size) <= 0"),
    ("read through an `or` and a string method (sglang 0.5.23 validation_hook)", """
def check(cfg):
    method = (cfg.speculative_algorithm or "").upper()
    if method not in _AUX_HIDDEN_STATE_CAPTURE_METHODS:
        raise ValueError("--enable-return-aux-hidden-states needs --speculative-algorithm")
_AUX_HIDDEN_STATE_CAPTURE_METHODS = ("EAGLE3", "DFLASH", "DSPARK")
""", "(cfg.speculative_algorithm or '').upper() not in ('EAGLE3', 'DFLASH', 'DSPARK')"),
    ("a local bound by a call is not read through (what it returns is not known)", """
def check(cfg):
    window_size = compute(cfg)
    if window_size <= 0:
        raise ValueError("the window size must be positive, it is not")
""", "window_size <= 0"),
    ("a local rebound in a loop is not read through", """
def check(cfg, xs):
    n = cfg.tp_size
    for n in xs:
        pass
    if n <= 0:
        raise ValueError("the size must be positive, it is not")
""", "n <= 0"),
]


@pytest.mark.parametrize("name,source,when", GUARDS, ids=[g[0] for g in GUARDS])
def test_guard_is_the_condition_the_site_fails_under(name, source, when):
    (got,) = extract(source).records
    assert got["guard"] == {"when": when}


def test_frame_records_pass_the_loader_with_their_frame():
    (raw,) = extract(FRAME_CONSTRUCTS[0][1]).records
    rec = validate_record(raw, "gen.jsonl", 0, "generated")
    assert isinstance(rec, CatalogRecord), rec
    assert (rec.raised_in.path, rec.raised_in.function, rec.raised_in.source) == (
        MODULE, "get_next_batch_to_run", "assert self.req_to_token_pool is not None")


def test_frame_records_are_one_per_function_and_line_counted_apart_from_messages():
    source = '''
def f(x):
    assert x is not None
    assert x is not None
    raise ValueError
def g(x):
    assert x is not None
    assert x, "x must be set before the scheduler starts"
'''
    ex = extract(source)
    assert [(r["lineNumber"], r.get("alsoAt"), r["raisedIn"]["function"] if "raisedIn" in r
             else None) for r in ex.records] == [
        (3, [4], "f"), (5, None, "f"), (7, None, "g"), (8, None, None)]
    assert ex.stats == Stats(
        files=1, sites={"assert": 4, "raise": 1}, with_message={"assert": 1},
        covered={"assert": 1, "frame": 4}, records={"assert": 1, "frame": 3},
        skipped={DUPLICATE_FRAME: 1})
    assert ex.stats.coverage == 1.0  # frame sites are not message sites: coverage is as before
    dropped = ex.without([ex.records[0]["id"]], "left out")
    assert (dropped.stats.records, dropped.stats.skipped["left out"]) == (
        {"assert": 1, "frame": 2}, 1)


def test_frame_id_is_stable_across_line_moves_and_tells_function_line_class_module_apart():
    def frame_id(source: str, path: str = MODULE) -> str:
        (rec,) = extract(source, path).records
        return rec["id"]

    one = frame_id("def f(x):\n    assert x is not None\n")
    assert one == frame_id("\n\n\ndef f(x):\n    y = x\n    assert x is not None\n")
    assert one == record_id("sglang.srt.foo", "AssertionError", "frame:f:assert x is not None")
    others = {frame_id("def g(x):\n    assert x is not None\n"),
              frame_id("def f(x):\n    assert x is None\n"),
              frame_id("def f(x):\n    assert x is not None\n", "sglang/srt/bar.py"),
              frame_id("def f(x):\n    raise ValueError\n"),
              frame_id("def f(x):\n    raise TypeError\n")}
    assert len(others) == 5 and one not in others


def test_merged_releases_carry_the_frame_with_their_ranges_and_locations():
    old = extract_module("def f(x):\n    assert x is not None\n", MODULE, version="0.5.22")
    new = extract_module("import os\n\ndef f(x):\n    assert x is not None\n", MODULE,
                         version="0.5.23")
    (merged,) = merge_releases({"0.5.22": old.records, "0.5.23": new.records})
    assert merged["raisedIn"] == {"path": MODULE, "function": "f",
                                  "source": "assert x is not None"}
    assert (merged["sglangVersions"], merged["lineNumber"]) == (["0.5.22..0.5.23"], 4)
    assert [(x["versions"], x["lineNumber"]) for x in merged["sglangLocations"]] == [
        ("0.5.22", 2), ("0.5.23", 4)]
    assert list(merged)[-1] == "schemaVersion"


# What the real interpreter prints for a bare site, against the record's `raisedIn`: each snippet
# is `sglang/srt/foo.py` in a temporary directory, imported (and called) by this `python3`. The
# multi-line asserts hold for 3.10 and 3.11 (`extract.assert_line`): 3.12 and 3.13 print another
# line of them.
TRACEBACK_CASES = [
    ("one-line assert", '''
class Scheduler:
    req_to_token_pool = None

    def get_next_batch_to_run(self):
        assert self.req_to_token_pool is not None
''', "Scheduler().get_next_batch_to_run()"),
    ("multi-line assert: its last comparison's line, though the first one failed", '''
def check(page_size, chunk):
    assert (
        page_size == 1
        or chunk % page_size == 0
    )
''', "check(16, 100)"),
    ("multi-line assert without a comparison: its first line", '''
def check(view):
    assert (
        isinstance(view, int)
        and not view
    )
''', "check('x')"),
    ("multi-line assert continued with a backslash, after a form feed line", '''
\f
def check(page_size):
    assert \\
        page_size > 0
''', "check(0)"),
    ("raise ValueError without a message", '''
def load(fmt):
    if fmt not in ("pt", "safetensors"):
        raise ValueError
''', "load('gguf')"),
    ("raise ValueError() over lines", '''
def load(fmt):
    raise ValueError(
    )
''', "load('gguf')"),
    ("assert in a class body", '''
class Config:
    assert __name__ == "__main__"
''', ""),
]
_LAST_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)\n'
                         r'    (?P<source>.*)$', re.MULTILINE)


@pytest.mark.parametrize("name,source,call", TRACEBACK_CASES, ids=[c[0] for c in TRACEBACK_CASES])
def test_raised_in_is_the_frame_python_prints(tmp_path, name, source, call):
    """The function, the source line and the line number of the last frame, as printed; and the
    printed `Class` alone, which `^$` matches after it."""
    if "multi-line" in name and sys.version_info[:2] not in ((3, 10), (3, 11)):
        pytest.skip("3.12 prints the statement's first line, 3.13 the test's (assert_line)")
    (tmp_path / "sglang" / "srt").mkdir(parents=True)
    (tmp_path / "sglang" / "srt" / "foo.py").write_text(source)
    (raw,) = [r for r in extract(source).records if "raisedIn" in r]
    run = subprocess.run([sys.executable, "-c", f"from sglang.srt.foo import *\n{call}"],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stderr
    *_, last = _LAST_FRAME.finditer(run.stderr)
    printed_class, _, message = run.stderr.rstrip("\n").splitlines()[-1].partition(": ")
    assert last["path"].endswith("/" + raw["raisedIn"]["path"]), run.stderr
    assert (last["function"], last["source"], int(last["line"])) == (
        raw["raisedIn"]["function"], raw["raisedIn"]["source"], raw["lineNumber"]), run.stderr
    assert printed_class == raw["errorClass"]
    assert re.search(raw["messagePattern"], message), run.stderr


# --- the real source: sglang 0.5.23's srt/arg_groups/mamba_hook.py, copied verbatim ----------

MAMBA_HOOK = FIXTURES / "source" / "mamba_hook.py"
SEED_FILE = REPO / "patterns" / "sglang" / "curated" / "000_seed_int8_mamba_radix_cache.json"
SEED = json.loads(SEED_FILE.read_text())["record"]


def test_seed_message_comes_out_of_mamba_hook_with_a_named_capture():
    """The seed's check moved from server_args.py to mamba_hook.py; its message is found there."""
    ex = extract_module(MAMBA_HOOK.read_text(), "sglang/srt/arg_groups/mamba_hook.py",
                        version="0.5.23")
    (seed,) = [r for r in ex.records if r["errorMessage"] == SEED["errorMessage"]]
    assert seed.pop("guard") == {"when": "cfg.radix_cache_backend is not None"}
    assert seed == {
        "id": "7cf606f9ad6d2bbf",
        "repo": "sgl-project/sglang",
        "slug": "enable-int8-mamba-checkpoint-only-supports-the-b",
        "errorMessage": SEED["errorMessage"],
        "messagePattern": A + r"--enable-int8-mamba-checkpoint only supports the built-in mamba "
                              r"radix cache; --radix-cache-backend=(?P<radix_cache_backend>.+?) is "
                              r"not int8-aware\. Omit --radix-cache-backend\.",
        "errorType": "raise",
        "errorClass": "ValueError",
        "severity": "error",
        "filePath": "python/sglang/srt/arg_groups/mamba_hook.py",
        "lineNumber": 90,
        "githubUrl": "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/"
                     "arg_groups/mamba_hook.py#L90",
        "documentation": "`handle_int8_mamba_checkpoint()` in "
                         "sglang/srt/arg_groups/mamba_hook.py:90 raises ValueError with this "
                         "message when `cfg.radix_cache_backend is not None`.",
        "tags": ["sglang", "generated", "raise", "srt", "arg_groups"],
        "sglangVersions": ["0.5.23"],
        "schemaVersion": 2,
    }
    rec = validate_record(seed, "gen", 0, "generated")
    m = Engine([rec], cache=None).match(frame_text(
        (LAUNCH / "int8_mamba_radix_lru.log").read_text())[-1])
    assert m.captures == {"radix_cache_backend": "'lru'"}


def test_every_raise_and_assert_with_a_message_in_mamba_hook_gives_a_record():
    """…and each of its three bare asserts (lines 133, 135, 140) a frame record."""
    ex = extract_module(MAMBA_HOOK.read_text(), "sglang/srt/arg_groups/mamba_hook.py",
                        version="0.5.23")
    assert (ex.stats.with_message, ex.stats.covered, ex.stats.coverage) == (
        {"raise": 10, "assert": 6, "log": 1}, {"raise": 10, "assert": 6, "frame": 3, "log": 1},
        1.0)
    assert [(r["lineNumber"], r["raisedIn"]["source"]) for r in ex.records if "raisedIn" in r] == [
        (133, "assert view.mamba_track_interval >= view.speculative_num_draft_tokens"),
        (135, "assert view.mamba_track_interval % view.page_size == 0"),
        (140, "assert mamba_cache_chunk_size is not None")]


# --- the shipped catalog ---------------------------------------------------------------------

def shipped_stats(directory: Path = GENERATED) -> dict:
    return tomllib.loads((directory / "sglang.stats.toml").read_text())


def test_shipped_catalog_covers_at_least_90_percent_of_string_message_sites():
    """The extractor's own counts on every release, kept next to the catalog they describe."""
    stats = shipped_stats()
    assert len(stats["releases"]) >= 140
    assert stats["releases"][0] == "0.1.3" and stats["releases"][-1] == "0.5.23"
    for version, release in stats["release"].items():
        sites = sum(release["sites_with_string_message"].get(k, 0) for k in ("raise", "assert"))
        covered = sum(release["sites_covered"].get(k, 0) for k in ("raise", "assert"))
        assert covered / sites >= 0.9, version
        assert release["coverage"] == round(covered / sites, 4)
    assert stats["release"]["0.5.23"]["records_in_catalog"] > 11_000
    lines = SHIPPED.read_text().splitlines()
    assert len(lines) == stats["records"] > 15_000
    records = [json.loads(x) for x in lines]
    assert {r["severity"] for r in records} == {"error", "warning"}
    # a warning is kept only when it reports a failure (`--severity failure`)
    assert all(FAILURE in r["tags"] for r in records if r["severity"] == "warning")
    assert any(VIA_HELPER in r["tags"] for r in records)  # messages followed into helpers


def test_shipped_catalog_is_one_record_per_id_sorted_with_ranges():
    ids = []
    releases = shipped_stats()["releases"]
    for line in SHIPPED.read_text().splitlines():
        rec = json.loads(line)
        ids.append(rec["id"])
        for text in rec["sglangVersions"]:
            lo, _, hi = text.partition("..")
            assert lo in releases and (hi or lo) in releases, text
    assert ids == sorted(set(ids))


def test_readme_gives_the_command_that_made_the_shipped_file():
    readme = (GENERATED / "README.md").read_text()
    command = shipped_stats()["command"]
    assert "--severity error --severity failure" in command
    assert "--versions 0.1.0..0.5.23" in command
    assert f"{command} -o patterns/sglang/generated/sglang.jsonl" in readme.replace("\\\n", "")


@pytest.fixture(scope="module")
def generated_subset(tmp_path_factory) -> Path:
    """The generated files' records that can match a line of the real launch logs, as the
    files hold them (one JSONL file): all but those whose pattern has a literal cover
    (`literal_cover`, what the daemon's prefilter skips lines by) none of whose literals occurs
    in the logs, in any case. For these logs an engine of them matches as one of the whole
    generated catalog does — whose load alone (45,000 records checked) took minutes here."""
    text = "".join(p.read_text() for p in sorted(LAUNCH.glob("*.log"))).lower()
    subset = tmp_path_factory.mktemp("generated") / "generated-subset.jsonl"
    kept = total = 0
    with subset.open("w") as out:
        for path in sorted(GENERATED.glob("*.jsonl")):
            for line in path.open():
                total += 1
                cover = literal_cover(json.loads(line)["messagePattern"])
                if cover is None or any(literal.lower() in text for literal in cover):
                    out.write(line)
                    kept += 1
    assert 0 < kept < total // 3
    return subset


@pytest.fixture(scope="module")
def generated_alone(generated_subset):
    """The generated catalog alone, as `scan --no-builtin --catalog patterns/sglang/generated`
    loads it (`generated_subset` of it), and its engine."""
    catalog = load_catalog(builtin=False, user_paths=[generated_subset])
    assert catalog.issues == ()
    return catalog, Engine(catalog.records)


def test_no_generated_record_matches_the_empty_string_but_at_its_frame():
    """A message record needs text; a frame record matches the bare exception (`^$`), and only
    at its frame — whose three parts it must have."""
    frames = 0
    for line in SHIPPED.read_text().splitlines():
        rec = json.loads(line)
        if "raisedIn" in rec:
            frames += 1
            assert rec["messagePattern"] == "^$" and all(rec["raisedIn"].values()), rec
            assert rec["raisedIn"]["path"] == rec["filePath"].removeprefix("python/"), rec
        else:
            assert regex.compile(rec["messagePattern"]).search("") is None, rec
    assert frames > 0


# Real launch logs whose traceback does not end at a raise or assert of sglang's own: nothing
# extracted from sglang's source can be their record (the curated catalog has them).
NOT_SGLANG_RAISE = {
    "argparse_invalid_choice_attention": "argparse prints usage and exits: no traceback",
    "argparse_invalid_int": "argparse prints usage and exits: no traceback",
    "argparse_missing_model_path": "argparse prints usage and exits: no traceback",
    "argparse_unrecognized": "argparse prints usage and exits: no traceback",
    "reasoning_parser_invalid": "argparse prints usage and exits: no traceback",
    "cpu_engine_no_sgl_kernel": "Python's import fails inside sglang: ModuleNotFoundError",
    "scheduler_vllm_missing_api_key": "Python's import fails inside sglang: ModuleNotFoundError",
    "model_path_hf_repo_offline": "transformers raises; sglang's last frame is a call",
    "model_path_missing_dir": "transformers raises (last frame in transformers)",
    "spec_ngram_mamba_no_nvidia_driver": "torch raises (last frame in torch.cuda)",
}
_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line (?P<line>\d+), in .*\n(?P<code>.*)$',
                    re.MULTILINE)


def raise_site(log: str) -> tuple[str, int] | None:
    """The last frame of the log, when it is a raise or assert in sglang's package."""
    frames = list(_FRAME.finditer(log))
    if not frames:
        return None
    last = frames[-1]
    path = last["path"]
    if "/site-packages/sglang/" not in path or not last["code"].lstrip().startswith(
            ("raise", "assert")):
        return None
    return "python/sglang/" + path.split("/site-packages/sglang/", 1)[1], int(last["line"])


def test_launch_logs_without_an_sglang_raise_site_are_the_listed_ones():
    logs = {p.stem: p.read_text() for p in LAUNCH.glob("*.log")}
    without = {name for name, text in logs.items() if raise_site(text) is None}
    assert without == set(NOT_SGLANG_RAISE)
    assert len(logs) - len(NOT_SGLANG_RAISE) >= 10


@pytest.mark.parametrize("log", sorted(p.stem for p in LAUNCH.glob("*.log")
                                       if p.stem not in NOT_SGLANG_RAISE))
def test_generated_catalog_alone_recognizes_each_real_launch_failure_at_its_site(
        generated_alone, log):
    """`--no-builtin --catalog patterns/sglang/generated --sglang-version 0.5.23` (the launch
    logs are 0.5.23's): the event's record is the traceback's raise, at 0.5.23's file and line —
    though older releases' wordings of the same message are in the catalog too."""
    catalog, engine = generated_alone
    data = (LAUNCH / f"{log}.log").read_bytes()
    site = raise_site(data.decode())
    final = [r for r in frame_text(data.decode()) if r.exceptions][-1]
    pipeline = Pipeline(engine, sglang_version="0.5.23")
    events = pipeline.feed(Chunk(data, log, len(data))).events + pipeline.finish()
    # a failure warning ahead of the traceback (an optional model module's import error) is an
    # event of its own: the traceback's is the first error
    found = [e for e in events if e.pattern_id and e.severity != "warning"]
    assert found, final.exceptions[-1]
    (record,) = [r for r in catalog.records if r.id == found[0].pattern_id]  # the first: its cause
    assert found[0].sglang_version == "0.5.23" and record.in_version("0.5.23")
    assert (*record.location_for("0.5.23")[:2], record.error_class) == (
        site[0], site[1], final.exceptions[-1].error_class)


def test_cli_scan_with_generated_catalog_alone_names_the_site(generated_subset):
    """`scan --no-builtin --catalog FILE` with the generated records (`generated_subset`)."""
    subset = generated_subset
    run = cli("scan", "--format", "json", "--no-builtin", "--catalog", str(subset),
              str(LAUNCH / "mamba_no_buffer_page_size.log"))
    assert run.returncode == 1, run.stderr
    (event,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert (event["pattern_id"], event["error_class"], event["remediation"]["url"]) == (
        "70367cb67f97f13b", "AssertionError",
        ("https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/"
         "mamba_hook.py#L157"))


def scan_events(catalog, logs: list[Path]) -> list[tuple[str, str, str]]:
    out = io.StringIO()
    cmd_scan([str(log) for log in logs], "json", catalog, out, err=io.StringIO())
    events = [json.loads(x) for x in out.getvalue().splitlines()]
    return [(Path(e["source"]).name, e["pattern_id"], e["severity"])
            for e in events if e["event"] == "sglang_error"]


def test_curated_records_take_over_the_sites_they_describe():
    """With both layers, no generated record keeps a curated record's template, and every real
    launch log gives exactly the events the curated catalog alone gives: one line, one record."""
    both, curated = load_catalog(), load_catalog(generated=False)
    templates = {r.error_message for r in curated.records if r.error_message}
    assert [r.id for r in both.records if r.layer == "generated" and r.error_message in templates] \
        == []
    assert len(both.records) > 11_000
    logs = sorted(LAUNCH.glob("*.log"))
    events = scan_events(both, logs)
    # where the whole catalog names a curated record, the curated layer alone says the same;
    # the rest are argument checks only the generated layer knows
    known = {source for source, pid, _ in events if both.by_id(pid).layer == "curated"}
    assert len(known) >= 30
    assert [e for e in events if e[0] in known] == scan_events(
        curated, [log for log in logs if log.name in known])
    assert {source for source, _, _ in events} == {log.name for log in logs}


def test_template_override_holds_for_every_record_of_a_template_and_through_an_id_override():
    def rec(rid, layer, message):
        r = validate_record({"id": rid, "errorMessage": message}, "t", 0, layer)
        assert not isinstance(r, list)
        return r

    raised = rec("g-raise", "generated", "Decode out of memory. Try to lower your batch size.")
    logged = rec("g-log", "generated", "Decode out of memory. Try to lower your batch size.")
    other = rec("g-other", "generated", "Prefill out of memory. Try to lower your batch size.")
    curated = rec("c1", "curated", "Decode out of memory. Try to lower your batch size.")
    user = validate_record({"id": "c1", "messagePattern": "Decode out of memory"}, "u", 0, "user")
    assert [r.id for r in merge_layers([raised, logged, other, curated])] == ["g-other", "c1"]
    assert [(r.id, r.layer) for r in merge_layers([raised, logged, other, curated, user])] == [
        ("g-other", "generated"), ("c1", "user")]


# --- the command ----------------------------------------------------------------------------

def fake_sglang(root: Path) -> Path:
    pkg = root / "python" / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "test").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text("__version__ = version = '9.9.1'\n")
    (pkg / "srt" / "args.py").write_text(
        'def f(n):\n    if n < 1:\n        raise ValueError(f"--tp-size must be >= 1, got {n}")\n'
        '    raise ValueError(n)\n')
    (pkg / "test" / "test_args.py").write_text('raise ValueError("a test, not the server")\n')
    return root


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "matcher", *args], capture_output=True,
                          text=True, check=False)


def test_extract_command_prints_its_counts_and_writes_records_and_stats(tmp_path):
    out = tmp_path / "cat.jsonl"
    run = cli("catalog", "extract", "--sglang-source", str(fake_sglang(tmp_path / "src")),
              "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        (f"sglang 9.9.1 (--sglang-source {tmp_path / 'src'}): 3 modules read, "
         "1 files skipped: tests and benchmarks"),
        "sites seen:            2 (raise 2, assert 0, log 0)",
        "with a string message: 2 (raise 2, assert 0, log 0)",
        "records made:          1 (raise 1, assert 0, log 0)",
        "coverage: 1 of 2 raise/assert sites with a string message are recognized (50.00%)",
        "skipped, by reason:",
        f"       1  {PARAMETER}",  # `raise ValueError(n)`: read at f's calls, were f a helper
        f"wrote {out} (1 records) and {tmp_path / 'cat.stats.toml'}",
    ]
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert (rec["filePath"], rec["lineNumber"], rec["githubUrl"]) == (
        "python/sglang/srt/args.py", 3,
        "https://github.com/sgl-project/sglang/blob/v9.9.1/python/sglang/srt/args.py#L3")
    stats = tomllib.loads((tmp_path / "cat.stats.toml").read_text())
    assert (stats["sglang_version"], stats["records"], stats["files_skipped"]) == (
        "9.9.1", {"raise": 1}, {"tests and benchmarks": 1})
    assert cli("catalog", "lint", str(out)).returncode == 0


def test_extract_reads_a_wheel_without_unpacking_it(tmp_path):
    src = fake_sglang(tmp_path / "src") / "python"
    wheel = tmp_path / "sglang-9.9.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for p in src.rglob("*.py"):
            zf.write(p, p.relative_to(src).as_posix())
        zf.writestr("sglang-9.9.2.dist-info/METADATA", "Name: sglang\nVersion: 9.9.2\n")
    run = cli("catalog", "extract", "--wheel", str(wheel))
    assert run.returncode == 0, run.stderr
    (rec,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert rec["sglangVersions"] == ["9.9.2"]
    assert "records made:          1" in run.stderr


def test_extract_usage_errors_exit_two(tmp_path):
    assert cli("catalog", "extract").returncode == 2
    run = cli("catalog", "extract", "--sglang-source", str(tmp_path))
    assert (run.returncode, "no sglang package" in run.stderr) == (2, True)
    (tmp_path / "bad.whl").write_bytes(b"not a zip")
    assert cli("catalog", "extract", "--wheel", str(tmp_path / "bad.whl")).returncode == 2


def test_catalog_stats_counts_by_layer_severity_and_class(tmp_path):
    source = fake_sglang(tmp_path / "src") / "python" / "sglang" / "srt" / "args.py"
    source.write_text(source.read_text() + (
        "import logging\nlogger = logging.getLogger(__name__)\n"
        "logger.warning('--tp-size %s is larger than the GPUs here', 8)\n"
        "assert 1, 'the scheduler lost its way home'\n"))
    out = tmp_path / "cat.jsonl"
    assert cli("catalog", "extract", "--sglang-source", str(tmp_path / "src"), "-o",
               str(out)).returncode == 0
    run = cli("catalog", "stats", str(out))
    assert run.returncode == 0
    assert run.stdout.splitlines()[1:] == [
        "3 records, 3 with remediation",
        "  layer:      user 3",
        "  severity:   error 2, warning 1",
        "  errorType:  assert 1, log 1, raise 1",
        "  class:      (plain log line) 1, AssertionError 1, ValueError 1",
        ("how to fix (flags: fixActions proven on the guard condition; unevaluable: reads "
        "server arguments, no proven change):"),
        "  user:       words 3",
        "records per source (sourcePackage, the versions its records cover):",
        "  sglang        3  -",
        "records per generator:",
        "  (none: written by hand or before the field)        3",
        "  versions:   9.9.1 3",
    ]


# --- the compiled form, cached ---------------------------------------------------------------

def small_catalog():
    return load_paths([REPO / "patterns" / "sglang" / "curated"], "curated").records


def test_engine_cache_is_written_once_then_read_and_matches_the_same(tmp_path):
    records = small_catalog()
    line = frame_text((LAUNCH / "int8_mamba_radix_lru.log").read_text())[-1]
    built = Engine(records, cache=EngineCache(tmp_path))
    loaded = Engine(records, cache=EngineCache(tmp_path))
    assert (built.stats.cache, loaded.stats.cache) == ("miss", "hit")
    assert [(m.pattern.id, m.captures) for m in loaded.match_all(line)] == [
        (m.pattern.id, m.captures) for m in built.match_all(line)]
    assert loaded.prefilter == built.prefilter


def test_a_cached_pattern_is_loaded_compiled_not_parsed_again(tmp_path, monkeypatch):
    """The cache keeps each pattern's compiled program (`compile.freeze`): an engine from it
    confirms a match without compiling the pattern again."""
    from matcher import engine as engine_module

    records = small_catalog()
    line = frame_text((LAUNCH / "int8_mamba_radix_lru.log").read_text())[-1]
    built = Engine(records, cache=EngineCache(tmp_path))
    compiled: list[str] = []
    real = engine_module.regex.compile

    def counting(pattern, *args, **kwargs):
        compiled.append(pattern)
        return real(pattern, *args, **kwargs)

    monkeypatch.setattr(engine_module.regex, "compile", counting)
    loaded = Engine(records, cache=EngineCache(tmp_path))
    assert loaded.stats.cache == "hit"
    found = loaded.match_all(line)
    assert found and [(m.pattern.id, m.captures) for m in found] == [
        (m.pattern.id, m.captures) for m in built.match_all(line)]
    assert not {m.pattern.message_pattern for m in found} & set(compiled)


def test_a_cache_file_gone_after_loading_costs_only_compiling(tmp_path):
    """A pattern's compiled program is read from the cache file when the pattern is first
    confirmed; a file pruned or replaced by then gives nothing, and the pattern compiles."""
    records = small_catalog()
    line = frame_text((LAUNCH / "int8_mamba_radix_lru.log").read_text())[-1]
    built = Engine(records, cache=EngineCache(tmp_path))
    loaded = Engine(records, cache=EngineCache(tmp_path))
    assert loaded.stats.cache == "hit"
    for entry in tmp_path.glob("engine-*.bin"):
        entry.write_bytes(b"another file now")
    found = loaded.match_all(line)
    assert found and [(m.pattern.id, m.captures) for m in found] == [
        (m.pattern.id, m.captures) for m in built.match_all(line)]


def test_a_compiled_program_is_only_ever_that_of_its_pattern():
    """`thaw` loads `regex`'s own pickle of the pattern it is asked for, or nothing: a cache
    file is data, and anything else in it is compiled from the pattern instead."""
    import os
    import pickle

    from matcher.compile import freeze, thaw

    kept = freeze(regex.compile(r"Cannot (?P<what>\w+) now"))
    assert thaw(kept, r"Cannot (?P<what>\w+) now").search("Cannot go now")["what"] == "go"
    assert thaw(kept, r"Cannot (?P<what>\w+) later") is None  # another pattern's
    assert thaw(kept[:-5], r"Cannot (?P<what>\w+) now") is None  # truncated
    assert thaw(pickle.dumps(os.getcwd), "x") is None  # no other callable comes out
    assert thaw(pickle.dumps("Cannot (?P<what>\\w+) now"), "Cannot (?P<what>\\w+) now") is None


def _user_layer(tmp_path, records):
    """A user's catalog on top of `records`: one record of its own and, in the second result,
    one that also takes a built-in record's message template (the built-in one gives way)."""
    taken = next(r for r in records if r.error_message and r.raised_in is None)
    own = {"id": "user-own", "messagePattern": r"a failure of the user's own: (?P<what>\w+)",
           "errorClass": "RuntimeError"}
    template = {"id": "user-template", "errorMessage": taken.error_message,
                "errorClass": taken.error_class}
    loaded = []
    for i, user in enumerate(([own], [own, template])):
        path = tmp_path / f"user-{i}.json"
        path.write_text(json.dumps(user))
        loaded.append(merge_layers([*records, *load_paths([path], "user").records]))
    return loaded


def test_a_user_layer_without_a_precompiled_catalog_compiles_only_its_own_part(
        tmp_path, monkeypatch):
    """Where no precompiled catalog fits (a checkout), the built-in records come from the
    cache as a part of their own, and a user catalog on top compiles only its records; one that
    replaces built-in records compiles both parts. Either matches as one part compiled whole."""
    from matcher import engine as engine_module

    records = small_catalog()
    own, replacing = _user_layer(tmp_path, records)
    cache = EngineCache(tmp_path / "cache")
    assert Engine(records, cache=cache).stats.cache == "miss"
    compiled: list[int] = []
    real = engine_module.compile_form

    def counting(part, *args, **kwargs):
        compiled.append(len(part))
        return real(part, *args, **kwargs)

    monkeypatch.setattr(engine_module, "compile_form", counting)
    split = Engine(own, cache=cache)
    assert (split.stats.cache, compiled) == ("hit+miss", [1])
    compiled.clear()
    split_replacing = Engine(replacing, cache=cache)
    assert split_replacing.stats.cache == "miss+miss"
    searched = [r for r in records if r.raised_in is None]  # framed records are looked up
    assert compiled == [len(searched) - 1, 2]
    assert len(split.patterns) == len(split_replacing.patterns) == len(searched) + 1

    # Progress runs through both parts, to all of them, as over one.
    reported: list[tuple[int, int]] = []
    Engine(replacing, cache=EngineCache(tmp_path / "cold"),
           progress=lambda done, total: reported.append((done, total)))
    assert reported == sorted(reported) and reported[-1] == (len(searched) + 1,) * 2
    assert {total for _, total in reported} == {len(searched) + 1}
    assert (len(searched) - 1, len(searched) + 1) in reported  # the built-in part's end

    monkeypatch.setattr(engine_module, "_by_origin", lambda rest: [rest])
    lines = [frame_text(log.read_text())[-1] for log in sorted(LAUNCH.glob("*.log"))]
    lines += frame_text("RuntimeError: a failure of the user's own: gpus")
    for catalog, engine in ((own, split), (replacing, split_replacing)):
        whole = Engine(catalog, cache=None)
        assert len(whole.patterns) == len(engine.patterns)
        got = [[(m.pattern.id, m.captures) for m in engine.match_all(line)] for line in lines]
        assert got == [[(m.pattern.id, m.captures) for m in whole.match_all(line)]
                       for line in lines]
        assert sum(bool(g) for g in got) >= 20  # the comparison is not of empty results
        assert [("user-own", {"what": "gpus"})] in got


def test_a_cache_entry_head_is_plain_data_with_each_value_once(tmp_path):
    """The head (literals, heads, capture names, covers) comes back as compiled, each equal
    value one object (a pattern's head its literal's string, equal capture names one list); a
    head that names anything to call is damage, and the catalog is compiled again."""
    import os
    import pickle
    import struct

    from matcher.compile import compile_form
    from matcher.stored_form import MAGIC, decode_form

    records = small_catalog()
    Engine(records, cache=EngineCache(tmp_path))
    (entry,) = tmp_path.glob("engine-*.bin")
    searched = [r for r in records if r.raised_in is None]
    form, compiled = decode_form(entry, None, len(searched)), compile_form(searched, True)
    assert (form.literal, form.names, form.heads, form.covers) == (
        compiled.literal, compiled.names, compiled.heads, compiled.covers)
    same = [(lit, head) for lit, head in zip(form.literal, form.heads, strict=True)
            if lit is not None and lit == head]
    assert same and all(lit is head for lit, head in same)
    empty = [names for names in form.names if not names]
    assert len(empty) > 1 and all(names is empty[0] for names in empty)

    data = entry.read_bytes()
    (size,) = struct.unpack_from("<Q", data, len(MAGIC))
    calling = pickle.dumps(os.getcwd)
    entry.write_bytes(MAGIC + struct.pack("<Q", len(calling)) + calling
                      + data[len(MAGIC) + 8 + size:])
    with pytest.raises(ValueError, match="not an engine cache file"):
        decode_form(entry, None, len(searched))
    assert Engine(records, cache=EngineCache(tmp_path)).stats.cache == "rebuilt"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped byte"])
def test_a_damaged_cache_entry_is_ignored_and_rebuilt(tmp_path, damage):
    records = small_catalog()
    Engine(records, cache=EngineCache(tmp_path))
    (entry,) = tmp_path.glob("engine-*.bin")
    data = entry.read_bytes()
    flipped = data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:]
    entry.write_bytes({"garbage": b"\x00" * 64, "truncated": data[: len(data) // 2],
                       "flipped byte": flipped}[damage])
    again = Engine(records, cache=EngineCache(tmp_path))
    assert again.stats.cache == "rebuilt"
    line = frame_text((LAUNCH / "hicache_disable_radix.log").read_text())[-1]
    assert again.match(line).pattern.slug == "hierarchical-cache-disable-radix-cache-exclusive"
    assert Engine(records, cache=EngineCache(tmp_path)).stats.cache == "hit"


def test_the_cache_keeps_the_entries_used_last(tmp_path):
    """Entries are pruned by last use, not by when they were written: the built-in part a
    checkout loads at every start outlives the many user catalogs compiled on top of it."""
    from matcher.stored_form import KEEP_ENTRIES

    records = small_catalog()
    cache = EngineCache(tmp_path)
    assert Engine(records, cache=cache).stats.cache == "miss"
    searched = [r for r in records if r.raised_in is None]
    for i in range(2 * KEEP_ENTRIES):
        assert Engine(searched[i:i + 1], cache=cache).stats.cache == "miss"
        assert Engine(records, cache=cache).stats.cache == "hit"
    assert len(list(tmp_path.glob("engine-*.bin"))) == KEEP_ENTRIES
    assert Engine(searched[0:1], cache=cache).stats.cache == "miss"  # long pruned


def test_cache_dir_comes_from_the_environment_through_the_application(monkeypatch, tmp_path):
    from matcher import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SGLANG_MATCHER_CACHE_DIR", raising=False)
    assert cache.default_cache_dir() == tmp_path / "xdg" / "sglang-matcher"
    monkeypatch.setenv("SGLANG_MATCHER_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.default_cache_dir() == tmp_path / "mine"
    previous = cache.directory()
    try:
        cache.use(cache.default_cache_dir())  # what `sglang-matcher` does at start
        assert EngineCache.default().directory == tmp_path / "mine"
        cache.use(None)
        assert EngineCache.default() is None
    finally:
        cache.use(previous)


def test_an_unwritable_cache_dir_costs_only_speed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    engine = Engine(small_catalog(), cache=EngineCache(blocker / "cache"))
    assert engine.stats.cache == "unwritable"
    line = frame_text((LAUNCH / "lmcache_hicache.log").read_text())[-1]
    assert engine.match(line).pattern.slug == "lmcache-hierarchical-cache-exclusive"


def test_checked_patterns_are_remembered_and_a_damaged_memory_is_ignored(tmp_path, monkeypatch,
                                                                        cache_dir):
    """Loading reuses earlier pattern checks (4 s for the full catalog), keyed by the code."""
    from matcher.catalog.load import PatternFactsCache

    curated = REPO / "patterns" / "sglang" / "curated"
    first = load_catalog(builtin=False, user_paths=[curated])
    facts = PatternFactsCache.default().load()
    # A frame record's pattern is checked at its frame only (`^$`): it is not remembered.
    assert facts == {r.message_pattern: r.literal_length for r in first.records
                     if r.raised_in is None}
    assert any(r.raised_in is not None for r in first.records)
    assert load_catalog(builtin=False, user_paths=[curated]).records == first.records
    PatternFactsCache.default().path.write_text("{not json")
    assert PatternFactsCache.default().load() == {}
    assert load_catalog(builtin=False, user_paths=[curated]).records == first.records
    # A small layer's checks join what is remembered, not replace it.
    seed = first.by_id("4e2cdd4d6209ebbd")
    record = json.loads(SEED_FILE.read_text())
    inner = record.get("record", record)
    inner["id"], inner["messagePattern"] = "0000000000000001", "a pattern checked once more"
    one = tmp_path / "one.json"
    one.write_text(json.dumps(record))
    load_catalog(builtin=False, user_paths=[one])
    assert PatternFactsCache.default().load() == {**facts, "a pattern checked once more": 27}
    # What is remembered is used: a (planted) wrong length shows the check was skipped.
    (rec,) = load_paths([SEED_FILE], "curated", known={seed.message_pattern: 9}).records
    assert rec.literal_length == 9
