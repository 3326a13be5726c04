"""Native libraries' lines as users pasted them (tests/fixtures/nativelines/README.md names the
train-split threads): the line shapes of `matcher.catalog.native` recognize them, a record of an
sglang site does not claim a C++ file's glog line (`engine`), and Mooncake's lines say what to do
(`matcher.catalog.native_components`), with the full built-in catalog."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from field_recall import scan  # noqa: E402

from matcher import pipeline  # noqa: E402
from matcher.catalog import Catalog, native, native_components  # noqa: E402
from matcher.engine import Engine  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "nativelines"


@pytest.fixture(scope="module")
def catalog(loaded: tuple[Catalog, Engine]) -> Catalog:
    return loaded[0]


@pytest.fixture(scope="module")
def engine(loaded: tuple[Catalog, Engine]) -> Engine:
    return loaded[1]


def events_of(engine: Engine, catalog: Catalog, name: str) -> list[dict[str, Any]]:
    return scan(engine, catalog, FIXTURES / name)


def slug_of(catalog: Catalog, event: dict[str, Any]) -> str:
    return next(r.slug for r in catalog.records if r.id == event["pattern_id"])


def test_the_pipeline_asks_for_the_glog_shapes_captures() -> None:
    shape = next(s for s in native.SHAPES if s.slug == "glog-error-line")
    for name in pipeline._NATIVE_LINE:
        assert f"(?P<{name}>" in shape.pattern


def test_a_glog_line_pasted_without_its_thread_id(engine: Engine, catalog: Catalog) -> None:
    [event] = events_of(engine, catalog, "nixl-31295.log")
    assert slug_of(catalog, event) == "glog-error-line"
    assert event["captures"]["file"] == "nixl_agent.cpp"
    assert event["captures"]["message"].startswith("prepXferDlist: failed to prepare")
    # nothing in NIXL's vocabulary: recognized, with no made-up fix
    assert event["remediation"]["solutions"] == []


def test_mooncakes_rdma_line_is_the_glog_record_with_the_rdma_checks(engine: Engine,
                                                                      catalog: Catalog) -> None:
    events = events_of(engine, catalog, "mooncake-rdma-6753.log")
    assert [e["captures"]["file"] for e in events] == ["rdma_context.cpp", "rdma_context.cpp"]
    for event in events:
        # not sglang's NIXL storage backend's `Failed to register {desc}: {e}`
        assert slug_of(catalog, event) == "glog-error-line"
        [first, *_] = event["remediation"]["solutions"]
        assert "nvidia_peermem" in first and "ibv_devices" in first


def test_mooncake_stores_rpc_fail_says_where_its_master_is(engine: Engine,
                                                          catalog: Catalog) -> None:
    events = events_of(engine, catalog, "mooncake-store-456.log")
    answered = [e for e in events if e["remediation"]["solutions"]]
    assert [e["captures"]["file"] for e in answered] == ["client.cpp", "store_py.cpp"]
    assert all("mooncake_master" in e["remediation"]["solutions"][0] for e in answered)
    # the first line names no error code: no answer
    assert events[0]["captures"]["file"] == "master_client.cpp"
    assert events[0]["remediation"]["solutions"] == []
    # coro_rpc's own easylog line between them is recognized, with where it was logged
    [easylog] = [e for e in events if slug_of(catalog, e) == "easylog-error-line"]
    assert easylog["captures"]["file"] == "coro_rpc_client.hpp"
    assert easylog["captures"]["message"] == "client has been closed, please re-connect"


def test_a_glog_line_outside_the_vocabularies_keeps_no_fix(engine: Engine,
                                                           catalog: Catalog) -> None:
    [event] = events_of(engine, catalog, "mooncake-tcp-602.log")
    assert event["captures"]["file"] == "tcp_transport.cpp"
    assert event["remediation"]["solutions"] == []
    assert native_components.answer("context.cpp", "Failed to register memory") is None


def test_nvshmems_null_value_line_is_recognized(engine: Engine, catalog: Catalog) -> None:
    first, second = events_of(engine, catalog, "nvshmem-null-5050.log")
    assert slug_of(catalog, first) == "nvshmem-null-value"
    assert first["captures"]["line"] == "2234"
    assert first["captures"]["message"] == "Unable to create ah."
    assert slug_of(catalog, second) == "nvshmem-non-zero-status"


def test_aiters_hip_call_line_is_recognized(engine: Engine, catalog: Catalog) -> None:
    [event] = events_of(engine, catalog, "aiter-1220.log")
    assert slug_of(catalog, event) == "aiter-hip-call-failed"
    assert event["captures"]["hip_error"] == "invalid argument"
    assert event["captures"]["call"].startswith("hipModuleLaunchKernel(")


def test_mooncake_stores_batch_rpc_failure_says_both_ways_out(engine: Engine,
                                                              catalog: Catalog) -> None:
    [event] = events_of(engine, catalog, "mooncake-batch-rpc-24018.log")
    assert slug_of(catalog, event) == "mooncake-store-batch-rpc-failed"
    assert event["captures"]["message"] == "Expected DiskDescriptor"
    lost_master, own_fault = event["remediation"]["solutions"]
    assert "mooncake_master" in lost_master
    assert "Expected DiskDescriptor" in own_fault and ">=0.3.11" in own_fault
