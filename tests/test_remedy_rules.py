"""Remediation derived by rule for families that were recognized without a fix: native crash
lines (`matcher.catalog.native_remedies`), sglang's start-up wrapper, the router's records
(`matcher.catalog.router_remedies`) and its Python launcher. Each test scans real text — train
excerpts of `tests/fixtures/field` (their threads are in its `index.json`) or the router
releases' own source — as `sglang-matcher scan` does with the built-in catalog, and checks that
the event carries a fix, that it is the fix of its family, and that a wrapper is not a cause."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from field_recall import is_pointer, scan  # noqa: E402

from matcher.catalog import Catalog, load_catalog  # noqa: E402
from matcher.catalog import router_remedies as RR  # noqa: E402
from matcher.engine import Engine  # noqa: E402

FIELD = ROOT / "tests" / "fixtures" / "field"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def engine(catalog: Catalog) -> Engine:
    return Engine(catalog.records)


def events(engine: Engine, catalog: Catalog, excerpt: str) -> list[dict[str, Any]]:
    return scan(engine, catalog, FIELD / excerpt)


def slug(catalog: Catalog, event: dict[str, Any]) -> str:
    record = catalog.by_id(event["pattern_id"])
    assert record is not None
    return record.slug


def fixes(event: dict[str, Any]) -> list[str]:
    return [s for s in event["remediation"]["solutions"] if not is_pointer(s)]


def test_xgrammar_abort_says_switch_the_grammar_backend_and_the_abort_is_its_end(engine, catalog):
    """sglang#7639 (train): xgrammar's RecursionGuard throws in a native thread; `terminate
    called …` then `Fatal Python error: Aborted`. One failure: the xgrammar record with the
    grammar-backend fix, the abort attached to it rather than an event of its own."""
    found = events(engine, catalog, "sglang-e/7639-xgrammar-recursion-guard-abort.log")
    causes = [e for e in found if e["pattern_id"] and e.get("role", "cause") == "cause"]
    xgr = [e for e in causes if slug(catalog, e) == "cpp-terminate-xgrammar-exception"]
    assert len(xgr) == 1
    assert any("--grammar-backend llguidance" in s for s in fixes(xgr[0]))
    assert not [e for e in causes if slug(catalog, e) == "python-fatal-error-aborted"]
    assert any("Fatal Python error: Aborted" in c for c in xgr[0]["consequences"])


def test_an_abort_alone_says_where_its_cause_is_and_what_to_check(engine, catalog):
    [event] = scan_text(engine, catalog, "Fatal Python error: Aborted\n")
    assert slug(catalog, event) == "python-fatal-error-aborted"
    said = " ".join(fixes(event))
    assert "terminate called after throwing" in said and "pip check" in said
    assert not event["remediation"].get("fix_actions")  # nothing on the command changes it


def scan_text(engine: Engine, catalog: Catalog, text: str) -> list[dict[str, Any]]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "excerpt.log"
        path.write_text(text)
        return scan(engine, catalog, path)


def test_ucx_segfault_in_nixl_names_the_ucx_build_and_the_other_backend(engine, catalog):
    """sglang#6694 (train): UCX's handler catches SIGSEGV in a NIXL transfer."""
    found = events(engine, catalog, "sglang-b/6694-nixl-ucx-segfault-tcp.log")
    [event] = [e for e in found if e["pattern_id"] and slug(catalog, e) == "ucx-caught-signal"]
    said = fixes(event)
    assert any("nixl" in s and "UCX" in s for s in said)
    assert any("--disaggregation-transfer-backend mooncake" in s for s in said)


def test_mooncake_transfer_timeout_names_the_rdma_device(engine, catalog):
    """Mooncake#1088 (train): HiCache's Mooncake store times out a transfer after 60 s."""
    found = events(engine, catalog, "projects/mooncake-1088-hicache-transfer-timeout.log")
    [event] = [e for e in found if e["pattern_id"]
               and slug(catalog, e) == "mooncake-transfer-timeout"]
    assert event["captures"]["seconds"] == "60"
    said = " ".join(fixes(event))
    assert "--disaggregation-ib-device" in said and "MOONCAKE_DEVICE" in said
    assert "ib_write_bw" in said


def test_the_startup_wrapper_alone_is_the_cause_and_says_where_the_real_one_is(engine, catalog):
    """xorbitsai/inference#3745 (train): xinference kept only sglang's wrapper exception. It
    follows no failure in that log, so it is the first fact known — the cause — and says how to
    see the scheduler's own error."""
    found = events(engine, catalog,
                   "projects/xinference-3745-sglang-runtime-init-failed-gemma3.log")
    [event] = [e for e in found if e["pattern_id"]
               and slug(catalog, e) == "initialization-failed-see-messages-above"]
    assert event["role"] == "cause"
    assert any("python -m sglang.launch_server" in s for s in fixes(event))


def test_the_startup_wrapper_after_a_scheduler_failure_joins_it(engine, catalog):
    """The scheduler logs its exception, then reports over the start-up pipe; the launcher
    raises the wrapper after it. Two real texts in that order — sglang#4253's scheduler failure
    (train: `Scheduler hit an exception`) and the wrapper line of xorbitsai/inference#3745 —
    give the scheduler's events, with the wrapper attached, never a cause of its own."""
    failure = (FIELD / "sglang-b" / "4253-deepseek-v2-import-error-gcc.log").read_text()
    wrapper = ("RuntimeError: [address=0.0.0.0:43399, pid=1793] Initialization failed. Please "
               "see the error messages above.\n")
    found = scan_text(engine, catalog, failure.rstrip("\n") + "\n" + wrapper)
    assert found
    wrappers = [e for e in found if e["pattern_id"]
                and slug(catalog, e) == "initialization-failed-see-messages-above"]
    assert not wrappers
    assert any("Initialization failed" in c for e in found for c in e["consequences"])


def test_the_router_launchers_argument_error_says_which_flag(engine, catalog):
    """sglang#2796 (train): `launch_router` without `--worker-urls` (sglang-router 0.1.1)."""
    [event] = events(engine, catalog, "sglang-b/2796-launch-router-without-worker-urls.log")
    assert slug(catalog, event) == "router-launch-argument-rejected"
    assert event["captures"]["argument"] == "worker_urls"
    assert any("--worker-urls" in s for s in fixes(event))


# --- the router's rules, on the shipped records (made from every release's sdist) ----------------

def router_records(catalog: Catalog) -> list[Any]:
    return [r for r in catalog.records if r.peek("generator") == "matcher.catalog.router"]


def test_router_panics_in_a_policy_name_another_policy(catalog):
    """Every panic in one policy's file offers another policy, by a flag the release has
    (`--policy` since 0.0.5: the releases before had one policy and no flag to choose it)."""
    from matcher.catalog.versions import version_key

    policy = [r for r in router_records(catalog) if r.error_type == "panic"
              and (r.file_path or "").removeprefix("sgl-router/") in RR.POLICY_FILES
              and version_key(r.source_versions[-1].rsplit("..", 1)[-1]) >= version_key("0.0.5")]
    assert len(policy) > 50
    for r in policy:
        assert any("--policy" in s and "load-balancing policy" in s for s in r.how_to_fix), r.id
    registry = [r for r in router_records(catalog)
                if (r.file_path or "").endswith("src/policies/registry.rs")]
    assert registry and not any("load-balancing policy" in s for r in registry
                                for s in r.how_to_fix)


def test_router_upgrade_is_offered_only_for_code_a_later_release_lacks(catalog):
    """An upgrade names the release after the record's last; the code of a panic that moved
    to another file (0.2.2's `src/tree.rs` → `src/policies/tree.rs`) gets no upgrade."""
    from matcher.catalog.versions import version_key

    newest = max((v.rsplit("..", 1)[-1] for r in router_records(catalog)
                  for v in r.source_versions), key=version_key)
    upgrades = 0
    for r in router_records(catalog):
        last = r.source_versions[-1].rsplit("..", 1)[-1]
        said = [s for s in r.how_to_fix if s.startswith("Upgrade sglang-router to ")]
        if last == newest or r.error_type != "panic":
            assert not said, r.id
        for s in said:
            upgrades += 1
            release = s.removeprefix("Upgrade sglang-router to ").split(" ", 1)[0]
            assert version_key(release) > version_key(last)
    assert upgrades > 100
    moved = catalog.by_id("1ba4922c2951b136")  # src/tree.rs 0.0.5..0.2.2, then policies/tree.rs
    assert moved is not None and not any(s.startswith("Upgrade") for s in moved.how_to_fix)


def test_router_messages_that_name_a_flag_say_to_change_it():
    flags = frozenset({"worker-urls", "queue-size", "chat-template"})
    assert RR.named_flags("OpenAI mode requires at least one --worker-urls entry", flags) \
        == ["worker-urls"]
    assert RR.named_flags("Must be > 0 when queue_size > 0", flags) == ["queue-size"]
    # a file name is not a config field
    assert RR.named_flags("Failed to parse chat_template.json: {e}", flags) == []


# --- the fix an sglang message states (`matcher.catalog.message_fix`) ----------------------------

def test_a_message_that_says_raise_or_lower_a_flag_gets_that_fix():
    """sglang's own wording (the templates of the shipped catalog, and the line of sglang#10408
    in the train split)."""
    from matcher.catalog.message_fix import stated_fix

    line = next(x for x in (FIELD / "gpu" / "10408-alloc-req-slots-oom.log").read_text()
                .splitlines() if "smaller number for" in x)
    _, ways = stated_fix(line)
    assert [w[0].flag for w in ways] == ["--max-running-requests"]
    assert ways[0][0].value == "<lower than the current value>"
    _, ways = stated_fix("Host pool must hold a retraction and a receive page; increase "
                         "--hicache-size or --hicache-ratio")
    assert [w[0].flag for w in ways] == ["--hicache-size", "--hicache-ratio"]
    # the direction belongs to the flag right after it
    _, ways = stated_fix("target {target_w}x{target_h} exceeds the SR result {width}x{height}; "
                         "pick a lower tier or a higher --resolution-scale for this source.")
    assert ways[0][0].value.startswith("<higher")
    assert stated_fix("Loaded weights leave no GPU memory for the KV cache under "
                      "--mem-fraction-static={x}.") is None


def test_every_stated_fix_names_a_numeric_flag_of_each_release_that_prints_it(catalog):
    """Checked against the argparse parsers of the 92 releases (`server-args.json.gz`): the
    flag exists in every release of the record's ranges that the table holds, and takes a
    number, so "higher" and "lower" mean something. (Messages of `multimodal_gen` name the
    diffusion server's flags, which that table does not hold.)"""
    from matcher.catalog.server_args import ServerArgsTable, default_path, flags_of
    from matcher.catalog.versions import in_ranges

    table = ServerArgsTable.load(default_path())
    stated = [r for r in catalog.records if r.layer == "generated" and r.peek("fix_actions")
              and any("as the message says" in s for s in r.how_to_fix)
              and "/multimodal_gen/" not in (r.file_path or "")]  # the diffusion CLI's flags
    assert len(stated) >= 40
    checked = 0
    for r in stated:
        for version in table.releases:
            if not in_ranges(version, r.sglang_versions):
                continue
            flags = flags_of(table.at(version).values())
            for way in r.fix_actions:
                spec = flags.get(way[0].flag or "")
                assert spec is not None, (r.id, version, way[0].flag)
                assert spec.type in ("int", "float"), \
                    (r.id, way[0].flag, spec.type)
                checked += 1
    assert checked > 100


def test_the_memory_message_of_the_newer_wording_raises_the_fraction(engine, catalog):
    """`fix` on the newer wording ("… Current value: …") raises `--mem-fraction-static` from
    the command's value and adds no quantization."""
    from matcher.fix import choose

    [r] = [r for r in catalog.records if r.layer == "generated" and (r.error_message or "")
           .startswith("Not enough memory. Please try to increase --mem-fraction-static. "
                       "Current value: self.server_args")][:1]
    _, fixed = choose(["python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.7"],
                      r.fix_actions)
    assert fixed.added == ("--mem-fraction-static 0.85",)
    assert not fixed.changes_model


# --- PD disaggregation's records (`matcher.catalog.area_remedies`) -------------------------------

def test_mooncake_engine_error_names_the_ib_device_and_the_rdma_checks(engine, catalog):
    """sglang#6548: the prefill's transfer thread, as pasted (its last frames)."""
    text = (
        '  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/mooncake/conn.py", line '
        '215, in process_layer\n'
        '    status = self.engine.transfer_sync(\n'
        '  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/mooncake/transfer_engine.'
        'py", line 70, in transfer_sync\n'
        '    raise RuntimeError("Mooncake Transfer Engine Return Error.")\n'
        'RuntimeError: Mooncake Transfer Engine Return Error.\n')
    found = [e for e in scan_text(engine, catalog, "Traceback (most recent call last):\n" + text)
             if e["pattern_id"]]
    assert found
    said = " ".join(fixes(found[-1]))
    assert "--disaggregation-ib-device" in said and "ibv_devices" in said
    assert "memlock" in said


def test_bootstrap_fetch_failure_says_where_the_bootstrap_server_is(engine, catalog):
    """kvcache-ai/Mooncake#1207: the decode side's error as the proxy returned it."""
    line = ("KVTransferError(bootstrap_room=6677116944225248479): Could not fetch prefill "
            "parallel info from bootstrap_addr: sglang-prefill-svc:30000\n")
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    said = " ".join(fixes(event))
    assert "--disaggregation-bootstrap-port" in said and "nvidia_peermem" in said


def test_ascend_engine_failure_names_the_mf_store_url(engine, catalog):
    """sglang#22840: PD disaggregation on Ascend NPU without ASCEND_MF_STORE_URL."""
    line = "RuntimeError: Ascend Transfer Engine initialization failed.\n"
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    said = " ".join(fixes(event))
    assert "ASCEND_MF_STORE_URL=tcp://" in said and "every prefill and decode server" in said


def test_a_401_from_the_api_key_middleware_says_which_header_to_send(engine, catalog):
    """sglang#25127: a server started with --api-key, the client's requests refused."""
    line = ('[2026-05-13 11:24:14] INFO:     192.168.100.67:58648 - "POST /v1/responses '
            'HTTP/1.1" 401 Unauthorized\n')
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    said = " ".join(fixes(event))
    assert "`Authorization` header, as the word `Bearer`" in said and "`--api-key`" in said


def test_a_rust_panic_says_to_upgrade_the_component_that_panicked(engine, catalog):
    """sglang#7619: the router's health check panicked inside tokio."""
    line = ("thread '<unnamed>' panicked at /home/router/.cargo/registry/src/index.crates.io-"
            "1949cf8c6b5b557f/tokio-1.45.1/src/runtime/blocking/shutdown.rs:51:21:\n")
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    said = " ".join(fixes(event))
    assert "pip install -U sglang-router" in said and "RUST_BACKTRACE=1" in said


def test_area_rules_leave_other_disaggregation_records_alone(catalog):
    """A PP-stage range error and a teardown's deregistration are not network failures."""
    from matcher.catalog import area_remedies

    assert area_remedies.rule_for({
        "filePath": "python/sglang/srt/disaggregation/mooncake/conn.py",
        "errorMessage": "Prefill transfer kvcache error, layers_current_pp_stage is out of "
                        "range: layers_current_pp_stage={x}"}) is None
    assert area_remedies.rule_for({
        "filePath": "python/sglang/srt/disaggregation/mooncake/transfer_engine.py",
        "errorMessage": "Mooncake memory deregistration failed."}) is None
    tagged = [r for r in catalog.records if area_remedies.AREA_TAG in r.tags]
    assert len(tagged) >= 25
    assert all("/srt/disaggregation/" in (r.file_path or "") for r in tagged)


# --- quantization's records (`matcher.catalog.quant_remedies`) -----------------------------------

def test_a_weight_that_does_not_split_into_blocks_says_lower_the_tp_size(engine, catalog):
    """sglang#10641: the error as its title pastes it (TP30 of a DP/TP launch)."""
    line = ("ValueError: The output_size of gate's and up's weight = 64 is not divisible by weight "
            "quantization block_n = 128.\n")
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    said = " ".join(fixes(event))
    assert "smaller `--tp-size`" in said


def test_quant_rules_name_the_gpu_capability_and_leave_other_checks_alone(catalog):
    from matcher.catalog import quant_remedies as Q

    def rule(path: str, message: str) -> str | None:
        got = area_rule(Q.RULES, path, message)
        return got.name if got else None

    # sglang's messages as its source writes them (0.5.23)
    assert rule("python/sglang/srt/model_loader/loader.py",
                "The quantization method {model_config.quantization} is not supported for the "
                "current GPU. Minimum capability: {quant_config.get_min_capability()}. Current "
                "capability: {capability}.") == "gpu-capability"
    assert rule("python/sglang/srt/layers/quantization/fp8.py",
                "Found static activation scheme for checkpoint that was not serialized fp8.") \
        is None
    tagged = [r for r in catalog.records if Q.QUANT_TAG in r.tags]
    assert len(tagged) >= 30


def area_rule(rules: Any, path: str, message: str) -> Any:
    from matcher.catalog import area_remedies

    return area_remedies.rule_for({"filePath": path, "errorMessage": message}, rules)


def test_a_message_that_names_its_install_gets_it(engine, catalog):
    """sglang 0.4.6.post2's message (srt/layers/quantization/__init__.py) for awq, as it prints
    it."""
    line = ("ValueError: awq quantization requires some operators from vllm. Please install vllm "
            "by `pip install vllm==0.8.4`\n")
    [event] = [e for e in scan_text(engine, catalog, line) if e["pattern_id"]]
    assert event["remediation"]["fix_actions"][0] == [{"op": "install", "value": "vllm==0.8.4"}]
