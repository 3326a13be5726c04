"""Messages that flow: written at a call, raised or logged by a helper of the release.

The sources are verbatim cuts of real sglang wheels (`fixtures/sglang/flow/README.md` says which
lines of which release); the log lines are real: a traceback a user pasted in sglang's PR #16067
(`fixtures/field/model-runtime/16067-mamba-memory-leak.log`, a train thread) and the launches of
`fixtures/sglang/launch/` (sglang 0.5.23, run for real).
"""

from __future__ import annotations

import re
from pathlib import Path

from matcher.catalog.check import frame_text
from matcher.catalog.extract import (
    FAILURE,
    IMPORT_FIX,
    PARAMETER,
    VIA_HELPER,
    extract_files,
    index_helpers,
    selected,
)
from matcher.catalog.load import validate_record
from matcher.catalog.schema import CatalogRecord
from matcher.engine import Engine

FIXTURES = Path(__file__).parent / "fixtures"
FLOW = FIXTURES / "sglang" / "flow"
LAUNCH = FIXTURES / "sglang" / "launch"
FIELD_LEAK = FIXTURES / "field" / "model-runtime" / "16067-mamba-memory-leak.log"

MIXIN_056 = [
    ("sglang/srt/utils/common.py", (FLOW / "raise_error_or_warn-0.5.6.py").read_text()),
    ("sglang/srt/managers/scheduler_runtime_checker_mixin.py",
     (FLOW / "scheduler_runtime_checker_mixin-0.5.6.py").read_text()),
]
FLUX3 = [("sglang/multimodal_gen/runtime/pipelines/flux3_image_package.py",
          (FLOW / "flux3_check-0.5.23.py").read_text())]


def engine_of(records: list[dict]) -> Engine:
    validated = [validate_record(r, "<flow>", i, "generated") for i, r in enumerate(records)]
    assert all(isinstance(r, CatalogRecord) for r in validated), validated
    return Engine(validated, use_hyperscan=False, cache=None)  # type: ignore[arg-type]


def matched(engine: Engine, text: str) -> list:
    return [m for m in map(engine.match, frame_text(text)) if m is not None]


def by_message(records: list[dict], message: str) -> list[dict]:
    return [r for r in records if r["errorMessage"] == message]


# --- helpers found in the release's own code -----------------------------------------------

def test_raise_error_or_warn_is_a_helper_that_raises_and_warns_its_message():
    index = index_helpers(MIXIN_056)
    helper = index.helpers["sglang.srt.utils.common"]["raise_error_or_warn"]
    assert helper.positional == ("obj", "strict", "counter_name", "message", "log_interval")
    assert {(s.kind, s.error_class, s.severity) for s in helper.sinks} == {
        ("raise", "ValueError", "error"), ("log", None, "warning")}
    # the mixin imports it by name from sglang.srt.utils (re-exported from common there is
    # not in these files): the name alone, unique in the release, finds it
    assert index.lookup("sglang.srt.managers.scheduler_runtime_checker_mixin",
                        __import__("ast").parse("raise_error_or_warn(x)").body[0].value.func,
                        "SchedulerRuntimeCheckerMixin.check_memory", None) == (
        "sglang.srt.utils.common", "raise_error_or_warn")


def test_the_leak_message_passed_to_raise_error_or_warn_recognizes_the_pasted_traceback():
    records = list(extract_files(MIXIN_056, version="0.5.6").records)
    leak = [r for r in by_message(records, "token_to_kv_pool_allocator memory leak detected! "
                                           "{token_msg}") if r["errorClass"] == "ValueError"]
    assert len(leak) == 1
    rec = leak[0]
    assert VIA_HELPER in rec["tags"]
    assert rec["filePath"] == "python/sglang/srt/managers/scheduler_runtime_checker_mixin.py"
    assert "raise_error_or_warn()" in rec["documentation"]
    # the same message as a warning, for a server that does not run the strict check
    assert [r["severity"] for r in by_message(records, rec["errorMessage"])
            if r["errorType"] == "log"] == ["warning"]
    text = FIELD_LEAK.read_text()
    found = matched(engine_of([rec]), text)
    assert [m.pattern.id for m in found] == [rec["id"]]
    assert found[0].captures["token_msg"].startswith("full_available_size=6016, ")


def test_without_the_flow_analysis_the_leak_is_not_recognized():
    records = list(extract_files(MIXIN_056, version="0.5.6", flow=False).records)
    assert not by_message(records, "token_to_kv_pool_allocator memory leak detected! "
                                   "{token_msg}")
    stats = extract_files(MIXIN_056, version="0.5.6").stats
    assert stats.skipped.get(PARAMETER, 0) >= 1  # raise ValueError(message) itself


def test_a_local_check_helper_gives_each_caller_its_message_at_the_call():
    records = list(extract_files(FLUX3, version="0.5.23").records)
    steps = by_message(records, "sampler.steps must be positive")
    assert len(steps) == 1
    assert steps[0]["errorClass"] == "Flux3ImagePackageError"
    source = FLUX3[0][1].splitlines()
    assert source[steps[0]["lineNumber"] - 1].strip() == "_check("  # the call, not the raise
    assert "`_check() (sglang/multimodal_gen" in steps[0]["documentation"]
    assert re.search(steps[0]["messagePattern"], "sampler.steps must be positive")
    # every `_check(cond, "literal")` of the function is a record
    calls = len(re.findall(r"_check\(", FLUX3[0][1])) - 1  # its own def
    assert len([r for r in records if VIA_HELPER in r["tags"]]) >= calls - 5


# --- warnings that report a failure ---------------------------------------------------------

def test_a_caught_import_error_printed_as_a_warning_is_a_failure_with_what_to_install():
    files = [("sglang/srt/models/registry.py", (FLOW / "registry-0.5.23.py").read_text())]
    records = list(extract_files(files, version="0.5.23").records)
    rec = by_message(records, "Ignore import error when loading {name}: {e}")
    assert len(rec) == 1
    assert rec[0]["severity"] == "warning"
    assert FAILURE in rec[0]["tags"] and "import-error" in rec[0]["tags"]
    assert rec[0]["solutions"] == list(IMPORT_FIX)
    assert selected(rec[0], ["error", "failure"]) and not selected(rec[0], ["error"])
    line = next(x for x in (LAUNCH / "unsupported_architecture.log").read_text().splitlines()
                if "No module named 'torchaudio'" in x)
    found = matched(engine_of(rec), line)
    assert [m.pattern.id for m in found] == [rec[0]["id"]]


def test_a_best_effort_setting_of_the_process_is_no_failure():
    files = [("sglang/srt/utils/common.py", (FLOW / "set_ulimit-0.5.23.py").read_text())]
    records = list(extract_files(files, version="0.5.23").records)
    rlimit = by_message(records, "Fail to set RLIMIT_NOFILE: {e}")
    assert len(rlimit) == 1 and FAILURE not in rlimit[0]["tags"]
    assert not selected(rlimit[0], ["error", "failure"])


def test_a_warning_that_gave_up_after_retries_is_a_failure():
    files = [("sglang/srt/utils/hf_transformers/tokenizer.py",
              (FLOW / "resolve_tokenizers_backend-0.5.23.py").read_text())]
    records = list(extract_files(files, version="0.5.23").records)
    failures = [r for r in records if FAILURE in r["tags"]]
    assert [r["errorMessage"] for r in failures] == [(
        "Tokenizer for {tokenizer_name} is still TokenizersBackend after retries with "
        "--trust-remote-code. Model-specific tokenizer attributes may be missing.")]


def test_no_healthy_start_up_line_of_a_real_launch_is_a_failure_warning():
    """Of the failure warnings of these files, only a caught import error is in the launches
    (every launch here prints four: optional model modules whose dependencies are absent);
    `Fail to set RLIMIT_NOFILE: …`, printed by each, is not one."""
    files = [("sglang/srt/models/registry.py", (FLOW / "registry-0.5.23.py").read_text()),
             ("sglang/srt/utils/common.py", (FLOW / "set_ulimit-0.5.23.py").read_text())]
    failures = [r for r in extract_files(files, version="0.5.23").records
                if FAILURE in r["tags"]]
    engine = engine_of(failures)
    seen = 0
    for log in sorted([*LAUNCH.glob("*.log"), *(FIXTURES.parent.parent / "examples" / "logs")
                       .glob("*.log")]):
        for m in matched(engine, log.read_text()):
            seen += 1
            assert m.message.startswith("Ignore import error when loading sglang.srt.models."), (
                log.name, m.message)
    assert seen > 0


# --- fixed in: the release that no longer has the message ----------------------------------

OLD_LAUNCH = FIXTURES / "sglang" / "releases-launch" / "0.4.6.post1" / "dp_attention_dp_size_1.log"
REPO = FIXTURES.parents[1]


def _scan(*args: str) -> list[dict]:
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "json", *args],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_an_old_release_s_failure_says_which_release_no_longer_has_it():
    """A real sglang 0.4.6.post1 launch (`--enable-dp-attention` with dp-size 1): `auto` learns
    0.4.6.post1 from its frame; the assert that fails (`Please set a dp-size > 1. …`) is in
    every release up to 0.5.1.post3 and gone from 0.5.2 on (0.5.2's server_args.py has no such
    check): upgrading to 0.5.2 is a way out, and the event says so, with the compare view of
    the file."""
    import hashlib

    events = _scan(str(OLD_LAUNCH))
    # the launch had no GPU driver: its `Failed to import from vllm._C with ImportError(
    # 'libcuda.so.1: …')` is a failure warning of its own, ahead of the assert
    assert [x["event"] for x in events] == ["sglang_warning", "sglang_error"]
    assert "libcuda.so.1" in events[0]["message"]
    e = events[1]
    assert e["sglang_version"] == "0.4.6.post1"
    anchor = hashlib.sha256(b"python/sglang/srt/server_args.py").hexdigest()
    assert e["fixed_in"] == {
        "release": "0.5.2", "last_release": "0.5.1.post3",
        "compare_url": "https://github.com/sgl-project/sglang/compare/v0.5.1.post3...v0.5.2"
                       f"#diff-{anchor}"}
    assert e["remediation"]["solutions"][-1].startswith("Upgrade sglang to 0.5.2 or later: ")


def test_a_failure_of_the_newest_release_has_no_fixed_in():
    """A real 0.5.23 launch failure raised at a generated record's site: nothing newer."""
    [e] = [x for x in _scan(str(FIXTURES / "sglang" / "releases-launch" / "0.5.23"
                                / "moe_dense_tp_size.log")) if x.get("pattern_id")][:1]
    assert e["sglang_version"] == "0.5.23.." and "fixed_in" not in e


def test_the_report_prints_the_release_to_upgrade_to():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "matcher", "scan", "--format", "text",
                          str(OLD_LAUNCH)], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert "    Fixed in: sglang 0.5.2 (last in 0.5.1.post3)  https://github.com/" in out.stdout
