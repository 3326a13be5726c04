"""An event's source link shows the release the log was written by and the line its traceback
shows (`release.agreeing_url`, `release.release_in_paths`), not the newest release's copy."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from field_recall import corpus, scan

from matcher.catalog import load_catalog
from matcher.engine import Engine

FIELD = Path(__file__).parent / "fixtures" / "field"
LAUNCHES = Path(__file__).parent / "fixtures" / "sglang"
BLOB = re.compile(r"https://github\.com/sgl-project/sglang/blob/v([^/]+)/")


@pytest.fixture(scope="module")
def engine_and_catalog():
    catalog = load_catalog()
    return Engine(catalog.records), catalog


def test_a_log_of_an_unpacked_release_links_that_release_at_the_frames_line(engine_and_catalog):
    """sglang #7139: the traceback runs `/hy-tmp/sglang-0.4.7/python/sglang/…`; the scheduler's
    `Scheduler hit an exception:` record links sglang 0.5.23's `scheduler.py#L6372`, a line
    0.4.7's traceback does not show (it shows `run_scheduler_process`, line 2506)."""
    engine, catalog = engine_and_catalog
    log = FIELD / "sglang-b" / "7139-eagle3-index-select-assert.log"
    [header] = [e for e in scan(engine, catalog, log) if e["pattern_id"] == "0712139d4ca779ce"]
    assert header["sglang_version"] == "0.4.7"
    url = ("https://github.com/sgl-project/sglang/blob/v0.4.7/python/sglang/srt/managers/"
           "scheduler.py#L2506")
    assert header["remediation"]["url"] == url
    assert header["raised_at"]["url"] == url


def test_every_link_of_a_known_release_is_at_that_release(engine_and_catalog):
    """Over the field corpus (train) and the launches run here: an event whose release is known
    exactly links sglang's source at that release."""
    engine, catalog = engine_and_catalog
    logs = [ex.path for ex in corpus()] + sorted(LAUNCHES.glob("launch/*.log")) \
        + sorted(LAUNCHES.glob("releases-launch/*.log"))
    wrong = []
    for log in logs:
        for e in scan(engine, catalog, log):
            version = e.get("sglang_version") or ""
            url = (e.get("remediation") or {}).get("url") or ""
            m = BLOB.match(url)
            if m and version and not re.search(r"[.][.]|,", version) and m[1] != version:
                wrong.append((log.name, e["pattern_id"], version, url))
    assert wrong == []
