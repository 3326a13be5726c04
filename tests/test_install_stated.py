"""An exception whose message says what to install (`matcher.install_stated`): an unknown one is
an event of the family record `message-states-install`, with the install read from its message;
one a record knows keeps that record (a dependency's site, sglang's own), with the same install.

Every line is real: pasted in the public thread its fixture's README names (train split), or
sglang's own message as its source prints it (release beside it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import curated_with, engine_of, scan

from matcher.catalog.stated_install import of_the_family
from matcher.install_stated import RECORD_ID

FIXTURES = Path(__file__).parent / "fixtures" / "stated_install"
# sglang 0.4.6.post4..0.4.6.post5 (srt/layers/quantization/__init__.py): its own record
SGLANG_AWQ_NEEDS_VLLM = "80e0f2af1d5795d8"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    # the curated layer and the dependencies' sites
    return engine_of(tmp_path_factory.mktemp("catalog"), ("deps.jsonl",))


def _cause(engine, name: str) -> dict:
    [event] = [e for e in scan(engine, (FIXTURES / name).read_text(encoding="utf-8"))
               if e["pattern_id"] or "Error:" in e["message"]]
    return event


@pytest.mark.parametrize(("name", "installs"), [
    ("textgen-7007-awq-requires-autoawq.log", ["autoawq"]),
    ("bitsandbytes-815-4bit-requires-bitsandbytes.log", ["bitsandbytes>=0.39.0"]),
    ("tgi-1006-gptq-requires-optimum.log", ["optimum", "auto-gptq"]),
])
def test_an_unknown_exception_that_names_an_install_gets_it(engine, name: str,
                                                            installs: list[str]) -> None:
    event = _cause(engine, name)
    assert event["pattern_id"] == RECORD_ID
    remediation = event["remediation"]
    assert remediation["fix_actions"][0] == [{"op": "install", "value": installs[0]}]
    assert remediation["solutions"][0] == "Install what the message names: pip install " + " ".join(
        f"'{r}'" for r in installs)
    # the record names no site: the event's frame is the one its traceback shows, if any
    assert "/sglang/" not in event.get("raised_at", {"path": ""})["path"]


def test_the_site_that_raises_it_keeps_its_record_and_gets_the_install(engine) -> None:
    # transformers' quantizers/quantizer_awq.py: its own record (deps.jsonl), more specific
    event = _cause(engine, "langchain-chatchat-3794-awq-requires-autoawq.log")
    assert event["pattern_id"] not in (None, RECORD_ID)
    assert event["remediation"]["fix_actions"][0] == [{"op": "install", "value": "autoawq"}]


def test_a_quantizer_check_that_names_no_install_is_its_site(engine) -> None:
    # transformers' quantizers/quantizer_bnb_4bit.py validate_environment (scope `quantizers/`)
    event = _cause(engine, "joy-caption-batch-26-bnb-modules-dispatched-on-cpu.log")
    assert event["pattern_id"] not in (None, RECORD_ID)
    assert "transformers/quantizers/quantizer_bnb_" in event["remediation"]["documentation"]


def test_sglangs_own_message_keeps_sglangs_record(tmp_path: Path) -> None:
    from matcher.scan import scan_events

    catalog = curated_with(tmp_path, SGLANG_AWQ_NEEDS_VLLM)
    log = tmp_path / "x.log"
    # sglang 0.4.6.post4's message, its {quantization} being awq
    log.write_text("ValueError: awq quantization requires some operators from vllm. Please "
                   "install vllm by `pip install vllm==0.8.4`\n", encoding="utf-8")
    [event] = scan_events([str(log)], catalog).events
    assert event["pattern_id"] == SGLANG_AWQ_NEEDS_VLLM


@pytest.mark.parametrize(("error_class", "message", "is_stated"), [
    ("ImportError", "Loading an AWQ quantized model requires auto-awq library (pip install autoawq)",
     True),
    # the same words in a class packages do not raise these in
    ("KeyError", "Loading an AWQ quantized model requires auto-awq library (pip install autoawq)",
     False),
    # transformers' flash attention check: it names no install (a documentation page)
    ("ImportError", ("FlashAttention2 has been toggled on, but it cannot be used due to the "
     "following error: the package flash_attn seems to be not installed. Please refer to the "
     "documentation of https://huggingface.co/docs/transformers/perf_infer_gpu_one#"
     "flashattention-2 to install Flash Attention 2."), False),
])
def test_which_exceptions_are_the_familys(error_class: str, message: str, is_stated: bool) -> None:
    assert of_the_family(error_class, message) is is_stated
