"""Which release wrote a log: sets of releases, frames, and what a source learns."""

from __future__ import annotations

from pathlib import Path

from matcher.framing import Framer
from matcher.release import Releases, Span, Tracker, frames
from matcher.types import Line

REPO = Path(__file__).resolve().parents[1]


def test_ranges_are_read_and_compared_in_release_order():
    """`0.5.10` comes after `0.5.9`, `.post2` after its release; a bound at the catalog's
    oldest or newest release is left open (an unseen release may raise the same line)."""
    r = Releases.of(["0.5.9..0.5.10", "0.4.3.post2"], oldest="0.4.0", newest="0.5.23")
    assert r.spans == (Span("0.4.3.post2", "0.4.3.post2"), Span("0.5.9", "0.5.10"))
    assert [r.contains(v) for v in ("0.4.3.post2", "0.4.3", "0.5.9", "0.5.10", "0.5.11")] == \
        [True, False, True, True, False]
    open_ended = Releases.of(["0.5.20..0.5.23"], oldest="0.4.0", newest="0.5.23")
    assert open_ended.label() == "0.5.20.." and open_ended.contains("0.6.0")
    assert Releases.of(["0.4.0..0.5.23"], oldest="0.4.0", newest="0.5.23").label() == ""


def test_intersection_narrows_and_can_be_empty():
    a = Releases.of(["0.4.0..0.5.4"])
    b = Releases.of(["0.5.2..0.5.23"])
    assert a.intersect(b).label() == "0.5.2..0.5.4"
    assert not Releases.of(["0.4.0..0.4.9"]).intersect(b)
    assert Releases.of(["0.5.2"]).intersect(b).label() == "0.5.2"


def test_a_source_learns_by_intersection_and_starts_over_on_a_contradiction():
    """Two failures narrow what a log's server runs; a failure no release in that set can have
    written means the server changed (an upgrade writing to the same file)."""
    t = Tracker()
    t.learn("server.log", Releases.of(["0.4.0..0.5.4"]))
    t.learn("server.log", Releases.of(["0.5.2..0.5.23"]))
    assert t.known("server.log").label() == "0.5.2..0.5.4"
    t.learn("server.log", Releases.of(["0.5.20..0.5.23"]))
    assert t.known("server.log").label() == "0.5.20..0.5.23"
    assert t.known("other.log") is None


def test_frames_of_a_real_traceback():
    """The frames of a real sglang 0.5.23 launch failure, outermost first, the raise last."""
    framer = Framer()
    path = REPO / "examples/logs/int8-mamba-radix-cache.log"
    records = []
    offset = 0
    for text in path.read_text().splitlines():
        line = Line(text, "x", offset, offset + len(text) + 1)
        offset += len(text) + 1
        records += framer.feed(line, 0.0)
    records += framer.finish()
    [tb] = [r for r in records if r.kind == "traceback"]
    got = frames(tb)
    assert got[-1][0].endswith("sglang/srt/arg_groups/mamba_hook.py") and got[-1][1] == 90
    assert len(got) == len([t for t in tb.lines if t.lstrip().startswith('File "')])
