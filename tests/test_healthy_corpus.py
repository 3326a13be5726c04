"""The healthy corpus (`tests/fixtures/healthy/`): real text sglang and the libraries it loads
printed while nothing was wrong — start-up, serving, shutdown, with the warnings users see —
from public threads (the part before anything went wrong) and from the real launches in
`tests/fixtures/sglang/`. Issue 36: none of it may raise an alarm; every excerpt, scanned with
the built-in catalog as `sglang-matcher scan` scans a file, gives no event of severity error or
critical."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
HEALTHY = FIXTURES / "healthy"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import scan  # noqa: E402
from field_split import seen_threads, split_of  # noqa: E402
from test_wrappers import WRAPPERS  # noqa: E402

from matcher.catalog import load_catalog  # noqa: E402
from matcher.engine import Engine  # noqa: E402

ALARMS = frozenset({"error", "critical"})
_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|discussions)/(\d+)")
_LAUNCH = "launch:"


def _index() -> list[dict[str, Any]]:
    return list(json.loads((HEALTHY / "index.json").read_text(encoding="utf-8")))


def _launch_source(url: str) -> Path:
    """`launch:X.log` is `tests/fixtures/sglang/launch/X.log`; `launch:releases-launch/V/X.log`
    names its folder under `tests/fixtures/sglang/`."""
    name = url[len(_LAUNCH):]
    return FIXTURES / "sglang" / (name if "/" in name else f"launch/{name}")


def test_the_index_names_every_excerpt_with_its_source():
    entries = _index()
    assert len(entries) >= 30
    files = [e["file"] for e in entries]
    assert len(files) == len(set(files))
    assert set(files) == {p.name for p in HEALTHY.glob("*.log")}
    seen = seen_threads()
    for e in entries:
        assert set(e) == {"file", "url", "sglang_version", "what"}, e["file"]
        assert e["what"].strip().endswith("."), e["file"]
        text = (HEALTHY / e["file"]).read_text(encoding="utf-8")
        assert text.endswith("\n") and text.strip(), e["file"]
        if e["url"].startswith(_LAUNCH):
            source = _launch_source(e["url"])
            # The start-up part of a real launch, unedited: the log begins with the excerpt.
            assert source.read_text(encoding="utf-8").startswith(text), e["file"]
            assert e["file"].startswith("launch-") and e["sglang_version"], e["file"]
        else:
            m = _URL.fullmatch(e["url"])
            assert m, e["url"]
            assert m.group(2) in e["file"].split("-"), e["file"]  # `<source>-<N>-<slug>`
            # Never from a thread of the held-out test split of the field corpus.
            assert split_of(e["url"], seen) == "train", e["url"]


def test_the_corpus_spans_threads_launches_and_releases():
    entries = _index()
    threads = [e for e in entries if not e["url"].startswith(_LAUNCH)]
    sglang_threads = {e["url"] for e in threads if "/sgl-project/sglang/" in e["url"]}
    launches = [e for e in entries if e["url"].startswith(_LAUNCH)]
    assert len(threads) >= 20 and len(sglang_threads) >= 15 and len(launches) >= 10
    releases = {e["sglang_version"] for e in entries if e["sglang_version"]}
    assert {v.split(".")[1] for v in releases} >= {"4", "5"}, releases


@pytest.fixture(scope="module")
def builtin():
    catalog = load_catalog()
    return Engine(catalog.records), catalog


def _alarms(builtin, path: Path) -> list[str]:
    engine, catalog = builtin
    return [f"{e.get('severity')} {e.get('pattern_id') or 'unknown'} {e.get('error_class')}: "
            f"{(e.get('message') or '')[:160]!r}"
            for e in scan(engine, catalog, path) if e.get("severity") in ALARMS]


@pytest.mark.parametrize("entry", _index(), ids=lambda e: e["file"])
def test_a_healthy_excerpt_raises_no_alarm(builtin, entry):
    alarms = _alarms(builtin, HEALTHY / entry["file"])
    assert not alarms, "\n".join(alarms)


def test_a_healthy_excerpt_behind_a_wrapper_raises_no_alarm(builtin, tmp_path):
    """As the logs reach us: each excerpt behind one of the wrappers of `test_wrappers.py` (in
    turn, so that every wrapper carries several), some of which put `ERROR` in front of a line."""
    names = sorted(WRAPPERS)
    found = []
    for i, entry in enumerate(_index()):
        wrap = WRAPPERS[names[i % len(names)]]
        lines = (HEALTHY / entry["file"]).read_text(encoding="utf-8").splitlines()
        log = tmp_path / entry["file"]
        log.write_text("".join(wrap(n) + line + "\n" for n, line in enumerate(lines)),
                       encoding="utf-8")
        found += [f"{entry['file']} ({names[i % len(names)]}): {a}" for a in _alarms(builtin, log)]
    assert not found, "\n".join(found)
