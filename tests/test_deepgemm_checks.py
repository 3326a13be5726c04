"""DeepGEMM's host-side checks (`DG_HOST_ASSERT`, raised as RuntimeError): the curated record
(patterns/sglang/curated/kernels.json, slug deepgemm-host-assertion) on the lines users pasted
(tests/fixtures/deepgemm/host-assertions.txt, each with its thread), in both of DeepGEMM's
spellings, and not on another library's check of the same shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.engine import Engine

LINES = [line for line in (Path(__file__).resolve().parent / "fixtures" / "deepgemm"
                           / "host-assertions.txt").read_text().splitlines()
         if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def causes(engine: Engine, text: str) -> list[dict]:
    slugs = {r.id: r.slug for r in engine.records}
    return [e for e in scan(engine, text)
            if e["pattern_id"] and slugs[e["pattern_id"]] == "deepgemm-host-assertion"]


@pytest.mark.parametrize("line", LINES)
def test_each_pasted_check_is_a_deepgemm_event_with_its_condition(engine: Engine,
                                                                   line: str) -> None:
    events = causes(engine, line + "\n")
    assert len(events) == 1 and events[0]["role"] == "cause"
    captures = events[0]["captures"]
    assert captures["condition"] in line and captures["file"].endswith(".hpp")
    assert "SGLANG_ENABLE_JIT_DEEPGEMM=0" in events[0]["remediation"]["solutions"][0]


def test_the_unsupported_architecture_check_names_the_gpus_deepgemm_has_kernels_for(
        engine: Engine) -> None:
    (event,) = causes(engine, LINES[0] + "\n")
    assert event["captures"] == {"file": "csrc/apis/attention.hpp", "line": "211",
                                 "condition": "Unsupported architecture"}
    assert "SM90" in event["remediation"]["solutions"][1]


def test_deepeps_check_of_the_same_shape_is_not_deepgemms(engine: Engine) -> None:
    # DeepEP's EPException spells its checks the same way (deepseek-ai/DeepEP#125)
    assert causes(engine, "RuntimeError: Failed: Assertion error /***/csrc/deep_ep.cpp:629 "
                          "'num_tokens_per_rdma_rank.has_value()'\n") == []
