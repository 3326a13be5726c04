"""NumPy's 1.x/2.x ABI break and protobuf's generated-code check: the curated records
(patterns/sglang/curated/families-abi.json) on what those packages printed here
(tests/fixtures/libs/: a package built for NumPy 1.x under numpy 2.2.6, an old `_pb2.py`
under protobuf 4.25.3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from generated_layer import engine_of, scan

from matcher.engine import Engine

RUN_HERE = Path(__file__).resolve().parent / "fixtures" / "libs"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return engine_of(tmp_path_factory.mktemp("curated"), ())


def known(engine: Engine, text: str) -> list[tuple[str, str]]:
    slugs = {r.id: r.slug for r in engine.records}
    return [(slugs[e["pattern_id"]], e["role"]) for e in scan(engine, text) if e["pattern_id"]]


def test_the_numpy_banner_is_the_cause_and_the_failed_imports_join_it(engine: Engine) -> None:
    text = (RUN_HERE / "numpy-2.2.6-scipy-1.11.4.log").read_text()
    events = [e for e in scan(engine, text) if e["pattern_id"]]
    assert [e["role"] for e in events] == ["cause"]
    assert "'numpy<2'" in events[0]["remediation"]["solutions"][1]
    assert events[0]["consequences"] == [
        "_ARRAY_API not found", "numpy.core.multiarray failed to import"]


def test_a_failed_numpy_import_alone_is_its_own_cause(engine: Engine) -> None:
    assert known(engine, "AttributeError: _ARRAY_API not found\n") == [
        ("numpy-array-api-not-found", "cause")]
    assert known(engine, "ImportError: numpy.core.multiarray failed to import\n") == [
        ("numpy-multiarray-failed-to-import", "cause")]


def test_cythons_size_check_is_numpys_abi_only_for_numpys_types(engine: Engine) -> None:
    text = (RUN_HERE / "numpy-2.2.6-pandas-1.5.3.log").read_text()
    events = [e for e in scan(engine, text) if e["pattern_id"]]
    assert len(events) == 1 and events[0]["captures"] == {
        "type": "numpy.dtype", "expected": "96", "got": "88"}
    assert "Expected 96, got 88" in events[0]["remediation"]["solutions"][1]
    assert known(engine, "ValueError: mypkg.Thing size changed, may indicate binary "
                         "incompatibility. Expected 32 from C header, got 40 from PyObject\n") == []


def test_an_old_generated_protobuf_module_is_told_to_upgrade_or_pin(engine: Engine) -> None:
    text = (RUN_HERE / "protobuf-4.25.3-googleapis-common-protos-1.52.0.log").read_text()
    assert known(engine, text) == [("protobuf-descriptors-cannot-be-created-directly", "cause")]
    # protobuf 3.20's wording of the same check (with its doubled "not")
    assert known(engine, "TypeError: Descriptors cannot not be created directly.\n") == [
        ("protobuf-descriptors-cannot-be-created-directly", "cause")]
