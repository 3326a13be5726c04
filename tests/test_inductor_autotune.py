"""inductor's max-autotune logs a candidate kernel it drops (`torch/_inductor/select_algorithm.py`)
with the same words triton raises when sglang's own kernel does not fit: the log line is a
warning with nothing to fix, the exception a failure. Real lines from train-split threads."""

from __future__ import annotations

import pytest
from generated_layer import engine_of, scan

from matcher.engine import Engine

# https://github.com/sgl-project/sglang/issues/2040 (sglang --enable-torch-compile on L40; the
# server started)
AUTOTUNE_WARNING = (
    "SingleProcess AUTOTUNE benchmarking takes 1.9692 seconds and 0.0000 seconds precompiling. "
    "[rank2]:W1115 11:42:22.079000 139954085840704 torch/_inductor/select_algorithm.py:1469] "
    "[16/384] out of resource: shared memory, Required: 122880, Hardware limit: 101376. Reducing "
    "block sizes or num_stages may help.\n")
# https://github.com/pytorch/pytorch/issues/150980
AUTOTUNE_ERROR = (
    "SingleProcess AUTOTUNE benchmarking takes 0.5421 seconds and 5.2288 seconds precompiling "
    "for 18 choices\n"
    "[rank0]:E0410 07:53:10.590000 255947 torch/_inductor/select_algorithm.py:1905] [16/4] "
    "Exception No valid triton configs\n")
# https://github.com/sgl-project/sglang/issues/8513
TRITON_RAISED = (
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, "
    "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def slugs_and_severities(engine: Engine, text: str) -> list[tuple[str, str]]:
    by_id = {r.id: r.slug for r in engine.records}
    return [(by_id.get(e["pattern_id"], e["pattern_id"]), e["severity"])
            for e in scan(engine, text)]


@pytest.mark.parametrize("text", [AUTOTUNE_WARNING, AUTOTUNE_ERROR])
def test_a_dropped_autotune_candidate_is_a_warning_not_a_triton_failure(engine, text) -> None:
    assert slugs_and_severities(engine, text) == [("inductor-autotune-choice-dropped", "warning")]


def test_the_exception_triton_raises_stays_a_triton_failure(engine) -> None:
    assert slugs_and_severities(engine, TRITON_RAISED) == [("triton-out-of-resources", "critical")]
