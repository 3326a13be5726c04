"""The real command on real sglang 0.5.23 launch logs: the fix comes out, with the right exit code."""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from matcher.catalog import load_catalog as real_load_catalog
from matcher.commands.catalog.test import cmd_test

LAUNCH = Path(__file__).parent / "fixtures" / "sglang" / "launch"
SEED_ID = "4e2cdd4d6209ebbd"


def cli(*args, stdin=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "matcher", *args], capture_output=True, text=True,
                          input=stdin, cwd=cwd)


def test_scan_imports_no_yaml_and_compiles_no_redaction_pattern_at_start():
    """What `scan` does not need waits: yaml (the built-in catalog is JSON) until a YAML file is
    read, the redaction patterns until a text needs one (`matcher.redact`)."""
    code = ("import sys, matcher.cli, matcher.redact as r; "
            "print('yaml' in sys.modules, getattr(r, '_COMPILED', 'eager'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.split() == ["False", "{}"]


def test_seed_case_text_report_names_record_capture_and_solutions():
    run = cli("scan", str(LAUNCH / "int8_mamba_radix_lru.log"))
    assert run.returncode == 1, run.stderr
    out = run.stdout
    assert f"pattern {SEED_ID}" in out
    assert "captured: arg1 = 'lru'" in out
    assert "1. Remove --radix-cache-backend from the launch command" in out
    assert "2. Or remove --enable-int8-mamba-checkpoint" in out
    assert "--enable-int8-mamba-checkpoint --radix-cache-backend lru" in out  # example fix


def test_seed_case_json_is_one_event_in_the_event_schema():
    run = cli("scan", "--format", "json", str(LAUNCH / "int8_mamba_radix_lru.log"))
    assert run.returncode == 1
    (event,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert {k: event[k] for k in ("event", "pattern_id", "error_class", "severity", "captures",
                                  "ranks", "occurrences")} == {
        "event": "sglang_error", "pattern_id": SEED_ID, "error_class": "ValueError",
        "severity": "error", "captures": {"arg1": "'lru'"}, "ranks": [], "occurrences": 1}
    assert event["message"] == (
        "ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
        "--radix-cache-backend='lru' is not int8-aware. Omit --radix-cache-backend.")
    assert event["remediation"]["solutions"][0].startswith("Remove --radix-cache-backend")
    assert event["traceback"].startswith("Traceback (most recent call last):")
    assert event["traceback"].endswith("Omit --radix-cache-backend.")
    assert event["source"].endswith("int8_mamba_radix_lru.log")
    assert set(event) >= {"log_ts", "observed_ts", "catalog_version", "labels", "line"}


def test_stdin_is_scanned_like_a_file():
    text = (LAUNCH / "int8_mamba_radix_lru.log").read_text()
    run = cli("scan", "--format", "json", "-", stdin=text)
    assert run.returncode == 1
    assert json.loads(run.stdout)["source"] == "<stdin>"


def test_clean_log_exits_zero(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("[2026-01-01 12:00:00 TP0] Decode batch. #running-req: 1, #token: 20\n"
                   "[2026-01-01 12:00:01] INFO:     127.0.0.1:5000 - \"GET /health HTTP/1.1\" 200 OK\n")
    run = cli("scan", str(log))
    assert (run.returncode, run.stdout.splitlines()[-1]) == (0, "No sglang errors found.")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_reader_that_stops_reading_leaves_the_exit_code_to_what_was_found(fmt, tmp_path):
    """`scan LOG | head -1`: the pipe is closed before the report is written. The exit code
    is still the scan's verdict — 1, failures found (it was 0, "nothing wrong", which
    `set -o pipefail` scripts took at its word) — and nothing is said on stderr; a clean log
    still gives 0."""
    clean = tmp_path / "ok.log"
    clean.write_text("[2026-01-01 12:00:00 TP0] Decode batch. #running-req: 1, #token: 20\n")
    for log, verdict in ((LAUNCH / "int8_mamba_radix_lru.log", 1), (clean, 0)):
        proc = subprocess.Popen([sys.executable, "-m", "matcher", "scan", "--format", fmt,
                                 str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.close()  # (the reader gone long before the scan's report)
        err = proc.stderr.read()
        assert (proc.wait(timeout=60), err) == (verdict, b"")


@pytest.mark.parametrize("args", [("scan", str(LAUNCH / "int8_mamba_radix_lru.log")),
                                  ("scan", "--format", "json",
                                   str(LAUNCH / "int8_mamba_radix_lru.log")),
                                  ("explain", SEED_ID)])
def test_an_output_on_a_full_disk_is_said_and_exits_two(args):
    """`scan LOG > report.txt` on a full disk (`/dev/full`: ENOSPC at every write): the report
    is not there, so the exit code is 2 with a line saying why — it was a traceback and 1,
    which for `scan` reads "failures found" as if the report had been written."""
    with open("/dev/full", "w") as full:
        run = subprocess.run([sys.executable, "-m", "matcher", *args], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "No space left on device" in run.stderr and "Traceback" not in run.stderr


def test_unreadable_input_and_bad_usage_exit_two(tmp_path):
    run = cli("scan", str(tmp_path / "missing.log"))
    assert run.returncode == 2
    assert "cannot read" in run.stderr and "missing.log" in run.stderr
    assert cli("scan").returncode == 2
    assert cli("explain", "no-such-id").returncode == 2


def test_bad_user_catalog_exits_two_and_names_the_problem(tmp_path):
    bad = tmp_path / "mine.json"
    bad.write_text(json.dumps([{"id": "x1", "messagePattern": "oops (unclosed"}]))
    run = cli("scan", "--catalog", str(bad), str(LAUNCH / "int8_mamba_radix_lru.log"))
    assert run.returncode == 2
    assert f"{bad}: record 0 (id x1): field 'messagePattern': invalid regex" in run.stderr
    lint = cli("catalog", "lint", str(bad))
    assert lint.returncode == 2 and "invalid regex" in lint.stdout


def test_user_catalog_overrides_builtin_record(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps({"record": {
        "id": SEED_ID, "messagePattern": r"--radix-cache-backend=(?P<backend>'\w+') is not int8-aware",
        "errorClass": "ValueError", "severity": "critical", "solutions": ["Ask the platform team"]}}))
    # The curated layer holds the seed record; without the generated layer (`none`) this
    # one-off catalog compiles in a fraction of a second instead of 30.
    run = cli("scan", "--format", "json", "--sglang-version", "none", "--catalog", str(mine),
              str(LAUNCH / "int8_mamba_radix_lru.log"))
    event = json.loads(run.stdout)
    assert (event["severity"], event["captures"], event["remediation"]["solutions"]) == (
        "critical", {"backend": "'lru'"}, ["Ask the platform team"])


def test_explain_shows_remediation_and_source():
    run = cli("explain", SEED_ID)
    assert run.returncode == 0
    assert "How to fix:\n  1. Remove --radix-cache-backend" in run.stdout
    assert "python/sglang/srt/server_args.py:6818" in run.stdout


def test_explain_of_a_generated_record_gives_its_derived_fix_and_its_condition():
    """The record of a real launch failure (spec_window_size_zero.log): the fix derived from
    sglang 0.5.23's own check, the way `fix` applies, and the condition it was proven on."""
    scan = cli("scan", "--format", "json", str(LAUNCH / "spec_window_size_zero.log"))
    [event] = [json.loads(x) for x in scan.stdout.splitlines()]
    run = cli("explain", event["pattern_id"])
    assert run.returncode == 0, run.stderr
    assert "How to fix:\n  1. Set --speculative-draft-window-size to a value" in run.stdout
    assert "Ways out (`sglang-matcher fix --pattern ID --way N -- COMMAND…`):\n  1. set " \
           "--speculative-draft-window-size 1" in run.stdout
    assert "Fails when:\n  int(cfg.speculative_draft_window_size) <= 0" in run.stdout


def test_catalog_lint_and_test_pass_on_the_builtin_catalog():
    """Every curated record's real example lines are recognized by it (the catalog's own test)."""
    lint = cli("catalog", "lint")
    assert lint.returncode == 0, lint.stdout
    test = cli("catalog", "test")
    assert test.returncode == 0, test.stdout
    assert test.stdout.splitlines()[-1].endswith(", 0 failures")


def test_catalog_test_reports_an_example_taken_by_a_more_specific_record(tmp_path):
    cat = tmp_path / "c.jsonl"
    cat.write_text("\n".join(json.dumps(r) for r in [
        {"id": "general", "messagePattern": "NCCL error in", "examples": {"match": [
            "RuntimeError: NCCL error in: x.cpp:1, unhandled system error"]}},
        {"id": "specific", "messagePattern": "NCCL error in: .*unhandled system error",
         "examples": {"noMatch": ["RuntimeError: NCCL error in: x.cpp:1, unhandled cuda error"]}},
    ]))
    # `catalog test PATH` checks PATH's records against the built-in catalog plus PATH (a
    # built-in record may take an example too); the same check on PATH alone spares the suite a
    # 30-second compile of that one-off catalog. The command itself: the built-in test above.
    out = io.StringIO()
    without_builtin = lambda **kw: real_load_catalog(**{**kw, "builtin": False})  # noqa: E731
    with mock.patch("matcher.commands.common.load_catalog", without_builtin), \
            mock.patch("matcher.commands.catalog.test.load_catalog", without_builtin):
        assert cmd_test([cat], out) == 1
    assert "record 0 (id general): examples.match: taken by a more specific record: specific" in out.getvalue()


# Each real launch log of sglang 0.5.23 (tests/fixtures/sglang/launch/NAME.log, made by NAME.cmd)
# and the one root cause a person reading it names.
LAUNCH_ROOT_CAUSES = [
    ("argparse_invalid_choice_attention", "argparse-invalid-choice"),
    ("argparse_invalid_int", "argparse-invalid-typed-value"),
    ("argparse_missing_model_path", "argparse-required-model-path"),
    ("argparse_unrecognized", "argparse-unrecognized-arguments"),
    ("asr_max_buffer_seconds_zero", "asr-max-buffer-seconds-must-be-positive-got-cfg"),
    ("asr_max_concurrent_sessions_zero", "asr-max-concurrent-sessions-must-be-positive-got"),
    ("attn_dp_size_zero", "attn-dp-size-must-be-positive-got-cfg-attn-dp-si"),
    ("aux_hidden_states_dflash_layer_ids", "enable-return-aux-hidden-states-with-method-requ"),
    ("aux_hidden_states_without_spec", "enable-return-aux-hidden-states-needs-speculativ"),
    ("aux_layer_ids_without_flag", "return-aux-hidden-state-layer-ids-requires-enabl"),
    ("base_gpu_id_negative", "base-gpu-id-must-be-non-negative"),
    ("cpu_engine_no_sgl_kernel", "missing-python-module"),
    ("cuda_graph_padding_torch_compile", "disable-cuda-graph-padding-is-incompatible-with"),
    ("cuda_graph_prefill_max_context_zero", "cuda-graph-prefill-max-context-must-be-a-positiv"),
    ("dcp_replicate_q_proj_without_dcp", "dcp-replicate-q-proj-requires-dcp-size-1"),
    ("dcp_size_zero", "decode-context-parallel-size-dcp-size-decode-con"),
    ("decode_host_receive_threshold_range", "disaggregation-decode-host-receive-threshold-mus"),
    ("decode_offload_kvcache_non_decode", "the-argument-disaggregation-decode-enable-offloa"),
    ("deterministic_attention_backend", "deterministic-inference-attention-backend"),
    ("detokenizer_worker_num_zero", "detokenizer-worker-num-must-1"),
    ("dp_size_with_attn_dp", "dp-size-cfg-dp-size-with-attn-dp-size-cfg-attn-d"),
    ("dwdp_size_tp_mismatch", "dwdp-size-cfg-dwdp-size-must-equal-tp-size-cfg-t"),
    ("encoder_only_language_only", "cannot-set-encoder-only-and-language-only-togeth"),
    ("export_metrics_no_dir", "export-metrics-to-file-dir-is-required-when-expo"),
    ("fast_image_processor_backend_conflict", "disable-fast-image-processor-conflicts-with-imag"),
    ("flashinfer_attention_not_installed", "package-min-version-not-installed"),
    ("flex_attention_spec_ngram", "flex-attention-speculative-decoding"),
    ("gpu_id_step_zero", "gpu-id-step-must-be-positive"),
    ("grpc_port_api_key", "grpc-port-is-incompatible-with-api-key-admin-api"),
    ("grpc_port_equals_port", "grpc-port-cfg-grpc-port-must-differ-from-port-cf"),
    ("grpc_port_out_of_range", "grpc-port-sglang-grpc-port-cfg-grpc-port-must-be"),
    ("grpc_port_tokenizer_workers", "native-grpc-does-not-yet-support-tokenizer-worke"),
    ("grpc_response_timeout_zero", "grpc-response-timeout-secs-must-be-positive"),
    ("hicache_buffer_only_no_storage", "hicache-host-memory-mode-buffer-only-requires-a"),
    ("hicache_disable_radix", "hierarchical-cache-disable-radix-cache-exclusive"),
    ("hicache_host_memory_fraction", "hicache-host-memory-fraction-must-be-in-0-1"),
    ("hicache_minicpm_sala", "minicpm-sala-hierarchical-cache"),
    ("http2_granian_missing", "enable-http2-requires-the-granian-package-instal"),
    ("http2_max_streams_zero", "http2-max-concurrent-streams-must-be-between-1-a"),
    ("http_worker_reuseport_single_worker", "enable-http-worker-reuseport-requires-tokenizer"),
    ("instanttensor_cpu", "instanttensor-requires-a-cuda-compatible-device"),
    ("int8_mamba_hicache", "int8-mamba-checkpoint-hierarchical-cache"),
    ("int8_mamba_lmcache", "int8-mamba-checkpoint-lmcache"),
    ("int8_mamba_radix_lru", "enable-int8-mamba-checkpoint-only-supports-the-b"),
    ("kv_canary_sweep_without_canary", "kv-canary-sweep-interval-requires-kv-canary-in-l"),
    ("lmcache_hicache", "lmcache-hierarchical-cache-exclusive"),
    ("lmcache_spec", "lmcache-speculative-decoding"),
    ("lora_max_loaded_loras_below_batch", "max-loaded-loras-should-be-greater-than-or-equal"),
    ("lora_max_loras_per_batch_zero", "max-loras-per-batch-must-be-positive"),
    ("lora_target_modules_all_plus_other", "if-all-is-specified-in-lora-target-modules-it-sh"),
    ("lora_without_paths_or_rank", "when-no-initial-lora-paths-is-provided-you-need"),
    ("mamba_extra_buffer_cpu", "mamba-extra-buffer-platform-unsupported"),
    ("mamba_no_buffer_overlap", "mamba-no-buffer-overlap-schedule"),
    ("mamba_no_buffer_page_size", "mamba-no-buffer-page-size"),
    ("mamba_strategy_non_mamba", "mamba-radix-cache-strategy-non-mamba-model"),
    ("mm_io_worker_num_negative", "multimodal-i-o-worker-num-must-0"),
    ("mm_preprocess_cache_negative", "mm-preprocess-cache-size-mb-must-be-non-negative"),
    ("mm_processor_worker_num_negative", "multimodal-processor-worker-num-must-0"),
    ("model_impl_mindspore", "mindspore-model-impl-is-only-supported-on-ascend"),
    ("model_path_hf_repo_offline", "hf-hub-unreachable-model-not-cached"),
    ("model_path_missing_dir", "model-path-invalid-repo-id"),
    ("moe_dp_size_tp_indivisible", "tp-size-must-be-divisible-by-moe-dp-size"),
    ("no_accelerator", "no-accelerator-available"),
    ("pdmux_chunked_prefill", "pd-multiplexing-is-not-compatible-with-chunked-p"),
    ("ple_offload_cpu_offload", "ple-offload-embedding-cannot-be-combined-with-cp"),
    ("pp_max_micro_batch_size_zero", "pp-max-micro-batch-size-must-be-a-positive-integ"),
    ("pp_min_free_slots_delay", "min-free-slots-delay-is-not-supported-with-pipel"),
    ("prefill_cp_without_strategy", "cp-strategy-must-be-set-when-enable-prefill-cp-i"),
    ("prefill_decode_interval_min_bs_negative", "prefill-decode-interval-min-bs-must-be-non-negat"),
    ("prefill_decode_interval_negative", "prefill-decode-interval-must-be-non-negative"),
    ("prefill_only_disable_kv", "prefill-only-disable-kv-cache-requires-embedding"),
    ("prefix_mm_cache_without_encoder_only", "enable-prefix-mm-cache-requires-encoder-only-to"),
    ("priority_scheduling_policy", "to-use-priority-scheduling-schedule-policy-must"),
    ("prompt_tokens_buckets_tse", "arg-name-tse-rule-requires-exactly-4-parameters"),
    ("quant_communications_npu", "communications-quantization-is-only-supported-fo"),
    ("quant_communications_tp1", "communications-quantization-is-only-used-with-tp"),
    ("reasoning_parser_invalid", "reasoning-parser-invalid-choice"),
    ("response_store_disagg", "enable-response-store-is-not-supported-with-disa"),
    ("retraction_backup_host_pool_non_decode", "disaggregation-decode-retraction-backup-host-poo"),
    ("retraction_policy_priority", "retraction-policy-priority-requires-enable-prior"),
    ("sampling_mask_max_tokens_zero", "sampling-mask-max-tokens-must-be-positive-got-cf"),
    ("schedule_conservativeness_negative", "schedule-conservativeness-must-be-non-negative"),
    ("scheduler_vllm_missing_api_key", "missing-python-module"),
    ("served_model_name_colon", "served-model-name-cannot-contain-a-colon-charact"),
    ("shared_experts_tp_non_kimi", "shared-experts-tp-size-is-only-supported-for-kim"),
    ("sidecar_without_grpc_port", "sidecar-requires-grpc-port-or-sglang-grpc-port"),
    ("spec_block_verification_cpu", "speculative-use-block-verification-only-supports"),
    ("spec_block_verification_ngram", "speculative-block-verification-unsupported-algorithm"),
    ("spec_disagg_decode_radix", "disaggregation-decode-radix-cache-speculative"),
    ("spec_ngram_dp_attention", "ngram-speculative-dp-attention"),
    ("spec_ngram_mamba_no_nvidia_driver", "no-nvidia-driver"),
    ("spec_sink_size_negative", "speculative-draft-sink-size-must-be-non-negative"),
    ("spec_sink_without_window", "speculative-draft-sink-size-requires-window"),
    ("spec_window_size_zero", "speculative-draft-window-size-must-be-positive-g"),
    ("ssl_ca_certs_without_cert", "ssl-ca-certs-has-no-effect-without-ssl-certfile"),
    ("ssl_certfile_without_keyfile", "ssl-certfile-requires-ssl-keyfile-to-be-specifie"),
    ("ssl_keyfile_not_found", "ssl-key-file-not-found-cfg-ssl-keyfile-please-ch"),
    ("ssl_keyfile_password_without_cert", "ssl-keyfile-password-has-no-effect-without-ssl-c"),
    ("ssl_keyfile_without_certfile", "ssl-keyfile-requires-ssl-certfile-to-be-specifie"),
    ("ssl_refresh_without_cert", "enable-ssl-refresh-requires-ssl-certfile-and-ssl"),
    ("swa_ratio_out_of_range", "swa-full-tokens-ratio-out-of-range"),
    ("tokenizer_worker_num_zero", "tokenizer-worker-num-must-1"),
    ("trtllm_mha_cpu", "trtllm-mha-prefill-unsupported-gpu"),
    ("trtllm_mha_decode_cpu", "trtllm-mha-decode-unsupported-gpu"),
    ("two_batch_overlap_no_dp", "when-enabling-two-batch-overlap-without-an-ep-a2"),
    ("unsupported_architecture", "transformers-backend-model-class-not-found"),
    ("watermark_requires_cuda", "enable-watermark-requires-device-cuda-got-cfg-de"),
]


def test_every_real_launch_log_is_covered_by_the_table():
    assert sorted(p.stem for p in LAUNCH.glob("*.log")) == sorted(n for n, _ in LAUNCH_ROOT_CAUSES)


@pytest.mark.parametrize("name,slug", LAUNCH_ROOT_CAUSES, ids=[n for n, _ in LAUNCH_ROOT_CAUSES])
def test_real_launch_log_gives_exactly_its_root_cause(name, slug):
    """In this process, over one engine (the command's exit code: test_scan_of_a_real_launch_
    log_exits_1 below)."""
    from matcher.scan import scan_events

    catalog, engine = _builtin()
    events = scan_events([str(LAUNCH / f"{name}.log")], catalog, engine=engine).events
    failures = [e for e in events if e["role"] == "cause" and e["severity"] in ("error", "critical")]
    assert [catalog.by_id(e["pattern_id"]).slug for e in failures] == [slug]
    assert not [e for e in events if e["event"] == "sglang_unknown_error"]


@functools.lru_cache(maxsize=1)
def _builtin():
    from matcher.catalog import load_catalog
    from matcher.engine import Engine

    catalog = load_catalog()
    return catalog, Engine(catalog.records)


def test_scan_of_a_real_launch_log_exits_1_and_prints_its_root_cause():
    run = cli("scan", "--format", "json", str(LAUNCH / "spec_window_size_zero.log"))
    assert run.returncode == 1, run.stderr
    [event] = [json.loads(x) for x in run.stdout.splitlines()]
    assert event["message"].startswith(
        "ValueError: --speculative-draft-window-size must be positive")
    assert event["remediation"]["fix_actions"][0][0]["flag"] == \
        "--speculative-draft-window-size"


def test_hierarchical_cache_variant_has_its_own_record_with_solutions():
    run = cli("scan", str(LAUNCH / "int8_mamba_hicache.log"))
    assert run.returncode == 1
    assert SEED_ID not in run.stdout
    assert "--enable-hierarchical-cache" in run.stdout and "How to fix:" in run.stdout


def test_start_up_api_key_never_reaches_the_output():
    """The real log's `server_args={… 'api_key': 'sk-test-SECRET123' …}` dump stays secret."""
    log = LAUNCH / "scheduler_vllm_missing_api_key.log"
    assert "sk-test-SECRET123" in log.read_text()
    for fmt in ("text", "json"):
        assert "SECRET123" not in cli("scan", "--format", fmt, str(log)).stdout


def test_eight_rank_crash_is_one_error_reported_before_its_consequence():
    """TP0–TP7 print the same traceback, the parent prints sigquit twice: one root cause, ranks listed."""
    log = Path(__file__).parent / "fixtures" / "sglang" / "constructed" / "tp8_scheduler_crash.log"
    run = cli("scan", "--format", "json", str(log))
    events = [json.loads(x) for x in run.stdout.splitlines()]
    causes = [e for e in events if e["role"] == "cause"]
    assert [(e["error_class"], e["ranks"], e["occurrences"]) for e in causes] == [
        ("ValueError", [f"TP{i}" for i in range(8)], 8)]
    assert causes[0]["consequences"] == [
        "Received sigquit from a child process. It usually means the child failed."]
    text = cli("scan", str(log)).stdout
    assert text.index("ValueError: Cannot find model module") < text.index("Received sigquit")
    assert "ranks TP0, TP1, TP2, TP3, TP4, TP5, TP6, TP7" in text


# --- Errors: the subcommand's usage, "did you mean", one line, exit 2, never a traceback -----

def _usage_error(run, prog):
    """Exit 2, the usage of `prog` (not the top-level one), and one error line, no traceback."""
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr
    assert run.stderr.startswith(f"usage: {prog} "), run.stderr
    [line] = [x for x in run.stderr.splitlines() if ": error: " in x]
    assert line.startswith(f"{prog}: error: ")
    return line


@pytest.mark.parametrize("args,prog,hint", [
    (("scan", "--formt", "json", "x.log"), "sglang-matcher scan", "did you mean --format?"),
    (("watch", "--metrics-adr", "127.0.0.1:9464"), "sglang-matcher watch",
     "did you mean --metrics-addr?"),
    (("fix", "--pattren", "x", "--", "python"), "sglang-matcher fix", "did you mean --pattern?"),
    (("catalog", "stats", "--unevaluabel"), "sglang-matcher catalog stats",
     "did you mean --unevaluable?"),
    (("--verison",), "sglang-matcher", "did you mean --version?"),
])
def test_a_misspelled_subcommand_flag_gets_that_subcommands_usage_and_a_suggestion(args, prog, hint):
    line = _usage_error(cli(*args), prog)
    wrong = next(a for a in args if a.startswith("--") and a[2:4] in hint)
    assert "unrecognized arguments: " + wrong in line and hint in line


@pytest.mark.parametrize("args,prog,hint", [
    (("scna", "x.log"), "sglang-matcher", "did you mean scan?"),
    (("catalog", "lnt"), "sglang-matcher catalog", "did you mean lint?"),
    (("scan", "--format", "jsn", "x.log"), "sglang-matcher scan", "did you mean json?"),
])
def test_a_misspelled_subcommand_or_choice_gets_a_suggestion(args, prog, hint):
    line = _usage_error(cli(*args), prog)
    assert "invalid choice" in line and hint in line


@pytest.mark.parametrize("args,prog,needle", [
    (("fix", "--pattern", "x", "--way", "0", "--", "python"), "sglang-matcher fix",
     "argument --way: '0': give 1 or more"),
    (("catalog", "extract", "--installed", "--jobs", "0"), "sglang-matcher catalog extract",
     "argument --jobs: '0': give 1 or more"),
    (("watch", "--poll-interval", "soon"), "sglang-matcher watch",
     "argument --poll-interval: invalid float value: 'soon'"),
])
def test_a_bad_flag_value_names_the_flag(args, prog, needle):
    assert needle in _usage_error(cli(*args), prog)


def test_watch_format_chooses_how_events_are_written_and_names_the_log_formats_flag():
    line = _usage_error(cli("watch", "--format", "cri", "--check"), "sglang-matcher watch")
    assert "json" in line and "human" in line
    assert "--input-format" in cli("watch", "--help").stdout


def test_watch_input_format_is_scans_spelling():
    from matcher.commands import build_parser

    args = build_parser().parse_args(["watch", "--input-format", "cri", "x.log"])
    assert args.input_format == "cri"
    scan = build_parser().parse_args(["scan", "--input-format", "cri", "x.log"])
    assert scan.input_format == "cri" and scan.format == "text"


@pytest.mark.parametrize("label,needle", [
    ("foo", "'foo' is not NAME=VALUE"),
    ("=x", "'=x' is not NAME=VALUE"),
    ("bad-name=x", "'bad-name' is not a valid Prometheus label name"),
    ("9lives=x", "'9lives' is not a valid Prometheus label name"),
    ("__x=y", "'__x' is not a valid Prometheus label name"),
    ("pattern_id=x", "'pattern_id' is one the matcher's own metrics use"),
    ("error_class=x", "'error_class' is one the matcher's own metrics use"),
    ("source=x", "'source' is one the matcher's own metrics use"),
])
def test_a_bad_label_flag_is_one_line_naming_it_exit_2(label, needle):
    line = _usage_error(cli("watch", "--label", label, "--check"), "sglang-matcher watch")
    assert "argument --label" in line and needle in line


def test_a_bad_label_from_the_environment_is_a_config_error_exit_2():
    import os

    env = {**os.environ, "SGLANG_MATCHER_LABELS": "cluster=a,bad-name=x"}
    run = subprocess.run([sys.executable, "-m", "matcher", "watch", "--check"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip() == (
        "sglang-matcher: invalid configuration: setting 'labels': label name 'bad-name' is not a "
        "valid Prometheus label name: use letters, digits and _, not starting with a digit or "
        "with __")


@pytest.fixture
def small_catalog(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(json.dumps([
        {"id": "972a80aa00000001", "slug": "first-thing", "messagePattern": "first thing broke"},
        {"id": "972a80bb00000002", "slug": "second-thing", "messagePattern": "second thing broke"},
        {"id": "1234abcd00000003", "slug": "third-thing", "messagePattern": "third thing broke"},
    ]))
    return ("--no-builtin", "--sglang-version", "none", "--catalog", str(mine))


@pytest.mark.parametrize("given", ["972A80AA", "972a80b", "1234ABCD00000003", "1", "Third-Thing"])
def test_explain_takes_a_unique_id_prefix_in_any_case(small_catalog, given):
    run = cli("explain", *small_catalog, given)
    assert run.returncode == 0, run.stderr
    wanted = {"9": ("972a80aa00000001" if "aa" in given.lower() else "972a80bb00000002")}
    assert run.stdout.startswith(wanted.get(given[0], "1234abcd00000003"))


def test_explain_of_an_ambiguous_prefix_lists_the_candidates(small_catalog):
    run = cli("explain", *small_catalog, "972A80")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    [line] = run.stderr.splitlines()
    assert "'972A80' is the start of 2 record ids" in line
    assert "972a80aa00000001 (first-thing), 972a80bb00000002 (second-thing)" in line


@pytest.mark.parametrize("given,close", [("972a81", "972a80aa00000001"),
                                         ("secnd-thing", "second-thing")])
def test_explain_of_an_unknown_id_suggests_the_nearest(small_catalog, given, close):
    run = cli("explain", *small_catalog, given)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    [line] = run.stderr.splitlines()
    assert "no catalog record with id, id prefix or slug" in line and "did you mean" in line
    assert close in line


def test_fix_pattern_resolves_like_explain(small_catalog):
    run = cli("fix", *small_catalog, "--pattern", "972A80B", "--", "python", "-m", "sglang")
    assert run.returncode == 1, run.stderr  # the record has no fix: words only
    assert run.stdout.startswith("failure: 972a80bb00000002 (second-thing)")
    amb = cli("fix", *small_catalog, "--pattern", "972a80", "--", "python")
    assert amb.returncode == 2 and "is the start of 2 record ids" in amb.stderr


_EXIT_PROBE = """
import gc, sys
from matcher import cli

class Node:
    pass

def command(argv=None):
    # What a command leaves when it returns: objects in cycles, freed by the collector only
    # (a loaded precompiled catalog: its records point at their store, and it at them).
    held = []
    for _ in range(20_000):
        a, b = Node(), Node()
        a.other, b.other = b, a
        held.append(a)
    returned.append(True)
    return 0  # `held` goes: its cycles are garbage now

returned = []
gc.callbacks.append(lambda phase, info: returned and phase == "stop"
                    and print("collected", info["collected"], file=sys.stderr, flush=True))
cli.main = command
raise SystemExit(cli.run())
"""


def test_the_command_leaves_what_it_made_to_the_exit():
    """`sglang-matcher` returns without Python's exit collection walking what the command left
    (the catalog: 37 ms of a 0.43 s scan): the objects are frozen, and the exit frees them."""
    run = subprocess.run([sys.executable, "-c", _EXIT_PROBE], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    counts = [int(line.split()[1]) for line in run.stderr.splitlines()
              if line.startswith("collected ")]
    assert counts and sum(counts) < 1000, run.stderr  # without: the 40,000 objects


def test_scans_summary_counts_the_entries_it_lists():
    """sglang #4184: one warning printed twice is one entry (`seen 2×`): the summary says 1
    warning, not 2."""
    log = Path(__file__).parent / "fixtures" / "field" / "gpu" / \
        "4184-decode-oom-retract-deepseek-r1.log"
    done = cli("scan", str(log))
    first = done.stdout.splitlines()[0]
    assert "1 warning " in first and "seen 2×" in done.stdout, done.stdout[:600]


def test_watch_help_says_what_it_does_and_its_exit_codes_and_every_flag_has_help():
    """`watch --help`: a description, the exit codes (0, 1, 2 and --check's), and no flag
    without a line of help (--poll-interval had none)."""
    from matcher.commands import build_parser

    out = cli("watch", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert "The daemon: follow sglang's log files" in text
    assert ("exit status: 0 after SIGTERM or SIGINT; 1 when the reader of its events went away"
            in text and "2 on a bad config or catalog. With --check: 0 valid, 2 problems" in text)
    assert "--poll-interval SECONDS seconds between polls" in text
    [watch] = [p for a in build_parser()._subparsers._group_actions  # type: ignore[union-attr]
               for name, p in a.choices.items() if name == "watch"]
    silent = [a.option_strings for a in watch._actions if a.option_strings and not a.help]
    assert silent == []


@pytest.mark.parametrize("args", [
    ["--log", "x.log", "python", "-m", "sglang.launch_server", "--tp", "2"],
    ["--log", "x.log"],
])
def test_fix_without_the_double_dash_says_where_the_command_goes(args):
    """The launch command given without `--` (its options taken for fix's, or none at all): the
    usage error says to put it after --, not "did you mean --format?"."""
    out = cli("fix", *args)
    assert out.returncode == 2
    last = out.stderr.splitlines()[-1]
    assert last.endswith("— put the launch command after --, e.g. sglang-matcher fix --log "
                         "FILE -- python -m sglang.launch_server --model-path …"), last
    assert "did you mean" not in last
    mistyped = cli("fix", "--lgo", "x.log", "--", "python")
    assert mistyped.stderr.splitlines()[-1].endswith("did you mean --log?")


def test_watch_with_a_journal_unit_and_no_path_follows_the_journal_only(tmp_path):
    """The README's journal one-liner: no default /var/log/sglang/*.log beside the journal (it
    matched nothing and fired SglangMatcherFollowingNothing); a PATH given still adds files."""
    env = {"SGLANG_MATCHER_STATE_DIR": str(tmp_path / "state")}
    only = subprocess.run([sys.executable, "-m", "matcher", "watch", "--check", "--no-builtin",
                           "--journal-unit", "sglang.service"], capture_output=True, text=True,
                          env={**os.environ, **env})
    assert (only.returncode, only.stderr) == (0, "")
    assert only.stdout.startswith("configuration ok: 0 path patterns")
    both = subprocess.run([sys.executable, "-m", "matcher", "watch", "--check", "--no-builtin",
                           "--journal-unit", "sglang.service", str(tmp_path / "*.log")],
                          capture_output=True, text=True, env={**os.environ, **env})
    assert both.stdout.startswith("configuration ok: 1 path patterns"), both.stderr


def _commands(parser, path=()):
    """(words, parser) of every command and subcommand under `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def test_every_commands_help_says_what_it_does_its_exit_codes_and_each_flags_help():
    from matcher.commands import build_parser

    parser = build_parser()
    found = dict(_commands(parser))
    assert {("scan",), ("watch",), ("fix",), ("explain",), ("catalog", "lint"),
            ("catalog", "extract"), ("catalog", "export"), ("catalog", "precompile")} <= set(found)
    for words, sub in [((), parser), *found.items()]:
        assert sub.description, words
        assert sub.epilog and sub.epilog.startswith("exit status: "), words
        assert " ".join(sub.epilog.split()) in " ".join(sub.format_help().split()), words
        silent = [a.option_strings or a.dest for a in sub._actions
                  if not a.help and not isinstance(a, argparse._SubParsersAction)]
        assert silent == [], words
    # A command's function is what its parser sets: the dispatch has no list of names.
    args = parser.parse_args(["catalog", "lint"])
    assert args.func.__module__ == "matcher.commands.catalog.lint"
