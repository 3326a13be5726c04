"""The curated family records of `patterns/sglang/curated/families.json`: each is one rule for a
whole message family (named groups for the values, a fix that says what to do), written from the
train split of the field corpus. Here every train excerpt a family was written from is scanned as
`sglang-matcher scan` scans it, and its root-cause line must be that family's event, with at least
one solution that is not a pointer (`bench/field_recall.py`'s rule). The excerpts are real pastes
(`tests/fixtures/field/*/index.json` names each thread)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import corpus, is_pointer, is_root_cause, scan
from field_split import TRAIN_DIR

from matcher.catalog import load_catalog
from matcher.engine import Engine

FAMILIES = Path(__file__).resolve().parents[1] / "patterns" / "sglang" / "curated" / "families.json"

# excerpt (under tests/fixtures/field) -> the family record that must recognize its root cause
EXPECTED = {
    "sglang-a/2468-warmup-502-killed.log": "warmup-request-http-error",
    "projects/diffusionnft-21-warmup-403-forbidden.log": "warmup-request-http-error",
    "projects/xinference-2126-sglang-warmup-jsondecodeerror.log": "warmup-model-info-not-json",
    "projects/mooncake-851-decode-transfer-failed-unknown-reason.log": "pd-kv-transfer-failed",
    "sglang-b/12688-mooncake-decode-transfer-aborted.log": "pd-kv-transfer-failed",
    "sglang-b/29725-pd-follow-bootstrap-room-dp-conflict.log": "pd-kv-transfer-failed",
    "sglang-a/27811-piecewise-graph-forward-context-num-tokens-amd.log": "piecewise-cuda-graph-failed",
    "sglang-a/23351-pcg-nsa-tensor-match-failed-store-index.log": "piecewise-cuda-graph-failed",
    "sglang-a/4814-custom-allreduce-4090-peer-access.log": "cuda-peer-access-not-supported",
    "sglang-a/1509-custom-allreduce-peer-access-bench-latency.log": "cuda-peer-access-not-supported",
    "model-runtime/299-tokenizer-manager-no-executor.log": "attribute-missing-version-skew",
    "projects/88-runtime-no-cache-prefix.log": "attribute-missing-version-skew",
    "sglang-b/1241-schedulebatch-no-attr-sample-bench-latency.log": "attribute-missing-version-skew",
    "sglang-b/15784-kimi-linear-modelconfig-no-scaling.log": "attribute-missing-version-skew",
    "sglang-b/5424-fp8-update-weights-no-weight-loader.log": "attribute-missing-version-skew",
    "sglang-b/6836-mooncake-store-no-is-batch-exist.log": "attribute-missing-version-skew",
    "model-runtime/36444-torch-native-spec-nonetype-shape.log": "attribute-of-none",
    "sglang-e/29277-filter-batch-output-ids-none.log": "attribute-of-none",
    "sglang-e/20700-chat-template-tojson-undefined.log": "chat-template-variable-undefined",
    "sglang-e/ascend-sglang-86-torch-npu-not-defined.log": "optional-kernel-name-undefined",
    "sglang-e/3582-nextn-sgl-build-tree-kernel-undefined.log": "optional-kernel-name-undefined",
    "projects/1065-deepseek-v2-forward-missing-attn-metadata.log": "call-signature-version-skew",
    "projects/ascend-sglang-135-deepseek-v32-npu-dsa-missing-v.log": "call-signature-version-skew",
    "sglang-b/9625-tiktoken-apply-chat-template-reasoning-effort.log": "call-signature-version-skew",
    "sglang-a/l0-31-sglang-flashinfer-decode-plan-missing-arg.log": "torch-op-schema-version-skew",
    "projects/fastchat-3373-serverargs-multiple-log-level.log": "call-argument-given-twice",
    "projects/478-runtime-log-evel-typo-fastchat.log": "call-argument-given-twice",
    "sglang-b/5871-qwen3-moe-fp8-fp8e4nv-a10.log": "fp8-unsupported-gpu-arch",
    "sglang-b/skypilot-4723-sglang-deepseek-r1-fp8e4nv-a100.log": "fp8-unsupported-gpu-arch",
    "projects/282-flashinfer-003-multinomial-nan.log": "sampling-probabilities-nan",
    "sglang-a/39079-mimov2-flashinfer-trtllm-no-deepep-fused-func.log": "moe-runner-no-fused-func",
    "sglang-a/30426-flashinfer-mxfp4-pure-tp-fused-func-missing.log": "moe-runner-no-fused-func",
    "projects/llava-next-164-onevision-no-preprocessor-config.log": "hf-repo-file-missing",
    "sglang-a/14075-b300-triton-ptxas-sm103a.log": "triton-ptxas-gpu-arch-failed",
    "projects/1814-update-weights-invalid-object-dp2.log": "dp-controller-invalid-object",
    "projects/gpustack-3848-flux-scheduler-dead-exit-9.log": "scheduler-dead-without-traceback",
    "sglang-a/vllm-ascend-3046-sglang-910c-aclnnarange-561103.log": "ascend-aclnn-op-failed",
    "sglang-b/105-kv-cache-pool-leak-awq-a40.log": "kv-pool-leak-idle-check",
    "sglang-b/105-kv-cache-pool-leak-openchat-a10g.log": "kv-pool-leak-idle-check",
    "projects/qwen3-vl-embedding-84-rerank-messages-undefined.log": "chat-template-variable-undefined",
    "sglang-b/11417-qwen3-vl-rotary-embedding-shape.log": "torch-compile-traced-error",
    "projects/angelslim-39-eagle3-draft-qkv-keyerror.log": "weight-name-not-in-model",
    "sglang-b/16550-qwen3-next-lora-in-proj-qkvz.log": "lora-module-unsupported",
    "model-runtime/4048-max-new-tokens-none-typeerror.log": "none-in-numeric-operation",
    "projects/areal-177-weight-update-group-nccl-invalid-argument.log": "weights-update-group-init-failed",
    "sglang-b/2796-launch-router-without-worker-urls.log": "router-launch-argument-rejected",
    "sglang-i/4300-fc-parse-json-400.log": "tool-call-output-unparsable",
    "sglang-i/flashinfer-1048-encoder-head-dim-32-invalid-configuration.log":
        "flashinfer-attention-invalid-configuration",
    "sglang-i/1109-triton-decode-head-dim-80-assert.log": "triton-attention-head-dim-unsupported",
}


def curated_id(slug: str) -> str:
    return hashlib.sha256(("sglang-matcher/curated/" + slug).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def outcomes() -> dict[str, tuple[str | None, list[str]]]:
    """Per excerpt: the pattern id of the event that is its root cause, and that event's solutions."""
    catalog = load_catalog()
    engine = Engine(catalog.records)
    found: dict[str, tuple[str | None, list[str]]] = {}
    for ex in corpus(TRAIN_DIR):
        name = ex.path.relative_to(TRAIN_DIR).as_posix()
        if name not in EXPECTED:
            continue
        hit = next((e for e in scan(engine, catalog, ex.path) if is_root_cause(e, ex.root_cause)), None)
        found[name] = (hit.get("pattern_id"), (hit.get("remediation") or {}).get("solutions") or []) \
            if hit else (None, [])
    return found


def test_every_family_record_is_in_the_file_and_named_by_its_slug():
    records = json.loads(FAMILIES.read_text(encoding="utf-8"))
    slugs = {r["slug"]: r["id"] for r in records}
    assert set(EXPECTED.values()) <= set(slugs)
    assert all(curated_id(s) == i for s, i in slugs.items())


@pytest.mark.parametrize("excerpt", sorted(EXPECTED))
def test_the_family_recognizes_its_train_excerpt_with_a_fix(outcomes, excerpt):
    pattern_id, solutions = outcomes[excerpt]
    assert pattern_id == curated_id(EXPECTED[excerpt])
    assert any(not is_pointer(s) for s in solutions)
