"""The pipeline's checkpoint: never past a line still held, at the end once everything is out."""

from __future__ import annotations

from matcher.catalog.load import validate_record
from matcher.engine import Engine
from matcher.pipeline import Pipeline
from matcher.redact import Redactor
from matcher.sinks.events import event_dict
from matcher.types import Chunk, Line

VALUE = {"id": "value-test", "messagePattern": r"Cannot find model module",
         "errorClass": "ValueError", "severity": "error"}

INIT = b"[2026-12-02 14:35:45 TP0] Init parallel begin.\n"
HEADER = (b"[2026-12-02 14:35:46 TP0] Scheduler hit an exception: "
          b"Traceback (most recent call last):\n")
FRAME = b'  File "/sgl/scheduler.py", line 6362, in run_scheduler_process\n'
EXC = b"ValueError: Cannot find model module.\n"
NEXT = b"[2026-12-02 14:35:47 TP0] Load weight end.\n"
PARTIAL = b"[2026-12-02 14:35:48 TP0] Decode ba"


class Feeder:
    """A pipeline over one source `s`, fed the way the daemon does: bytes appended, offsets grow."""

    def __init__(self, input_format: str = "auto") -> None:
        engine = Engine([validate_record(VALUE, "t.json", 0, "curated")])
        self.pipeline = Pipeline(engine, input_format=input_format)
        self.offset = 0
        self.events: list = []

    def feed(self, data: bytes, now: float = 0.0) -> int | None:
        self.offset += len(data)
        self.events += self.pipeline.feed(Chunk(data, "s", self.offset), now).events
        return self.pipeline.checkpoint_offset("s")


def test_open_traceback_then_aggregation_window_hold_the_checkpoint_at_its_first_line():
    """The traceback holds the checkpoint while framed, then while its event waits in the window;
    once the event is emitted the checkpoint is at the end of what was read."""
    f = Feeder()
    assert f.pipeline.checkpoint_offset("s") is None
    start = len(INIT)
    assert f.feed(INIT) == start  # a plain line that needs no event
    assert f.feed(HEADER + FRAME) == start
    assert f.feed(EXC) == start  # its message may go on over the next lines
    assert f.feed(NEXT) == start  # framed and matched, but inside the 5 s window
    assert f.events == []
    events = f.pipeline.tick(6.0)
    assert [(e.pattern_id, e.offset) for e in events] == [("value-test", start)]
    assert f.pipeline.checkpoint_offset("s") == f.offset


def test_finish_emits_everything_and_moves_the_checkpoint_to_the_end():
    f = Feeder()
    assert f.feed(INIT + HEADER + FRAME + EXC) == len(INIT)
    assert [e.pattern_id for e in f.pipeline.finish()] == ["value-test"]
    assert f.pipeline.checkpoint_offset("s") == f.offset


def test_partial_line_holds_the_checkpoint_at_its_start_until_flushed():
    f = Feeder()
    whole = INIT + NEXT
    assert f.feed(whole + PARTIAL) == len(whole)
    assert f.pipeline.partial_line_start("s") == len(whole)
    assert f.pipeline.flush_partial("s", 5.0) == []
    assert (f.pipeline.partial_line_start("s"), f.pipeline.checkpoint_offset("s")) == (
        None, f.offset)
    assert f.feed(b"tch.\n") == f.offset  # the rest of the line comes as a line of its own
    assert f.pipeline.stats.lines == 4


def test_partial_cut_inside_a_traceback_holds_it_at_the_traceback():
    f = Feeder()
    assert f.feed(HEADER + FRAME + EXC[:5]) == 0
    assert f.pipeline.partial_line_start("s") == len(HEADER + FRAME)
    assert f.feed(EXC[5:] + NEXT) == 0
    assert [e.offset for e in f.pipeline.tick(6.0)] == [0]
    assert f.pipeline.checkpoint_offset("s") == f.offset


def test_cri_and_docker_partials_hold_the_checkpoint_at_their_first_piece():
    """A complete CRI `P` line (or docker partial) is held by the decoder, not the splitter."""
    cri = Feeder("cri")
    p = b"2026-12-02T14:35:46Z stdout P [2026-12-02 14:35:45 TP0] Init \n"
    assert cri.feed(p) == 0
    assert cri.pipeline.partial_line_start("s") == 0
    assert cri.feed(b"2026-12-02T14:35:46Z stderr F other stream\n") == 0
    assert cri.feed(b"2026-12-02T14:35:46Z stdout F parallel begin.\n") == cri.offset
    docker = Feeder()
    assert docker.feed(b'{"log":"[2026-12-02 14:35:45 TP0] Init ","stream":"stdout"}\n') == 0
    assert docker.pipeline.flush_partial("s") == []
    assert docker.pipeline.checkpoint_offset("s") == docker.offset
    assert docker.pipeline.stats.lines == 1


def test_journal_lines_enter_at_the_framer_and_are_held_like_file_lines():
    """`feed_lines`: a journal traceback holds the checkpoint at its first line's offset."""
    f = Feeder()
    lines, offset = [], 100
    for raw in (INIT, HEADER, FRAME, EXC):
        lines.append(Line(raw.decode().rstrip("\n"), "journal", offset, offset + 1))
        offset += 1
    assert f.pipeline.feed_lines("journal", lines).events == []
    assert f.pipeline.checkpoint_offset("journal") == 101
    assert [(e.source, e.offset) for e in f.pipeline.finish()] == [("journal", 101)]
    assert f.pipeline.checkpoint_offset("journal") == 104


class _CountingRedactor(Redactor):
    """Counts the texts holding `mark` that go through redaction."""

    def __init__(self, mark: str) -> None:
        super().__init__()
        self.mark = mark
        self.passes = 0

    def text(self, value: str) -> str:
        self.passes += self.mark in value
        return super().text(value)


def test_a_line_cut_at_max_line_bytes_is_redacted_once_before_its_event():
    """A traceback line cut at `max_line_bytes`, in a traceback longer than the 8 KiB an event
    keeps: the aggregator redacts the whole traceback before its cut, and that is the one pass
    over the line — the pipeline drops only the run at the cut that may be a secret's head.
    Before, the pipeline redacted the cut line as well: every byte of it twice."""
    keep = 16 * 1024
    head = b"ValueError: Cannot find model module. api_key=sk-" + b"a" * 30 + b" "
    filler = b"x " * ((keep - len(head) - 10) // 2)
    line = head + filler + b"hf_" + b"b" * 40  # cut 10 bytes into the token: `hf_bbbbbbb`
    r = _CountingRedactor("api_key=")
    engine = Engine([validate_record(VALUE, "t.json", 0, "curated")])
    p = Pipeline(engine, max_line_bytes=keep, redactor=r)
    data = INIT + HEADER + FRAME + line + b"\n" + NEXT
    events = p.feed(Chunk(data, "s", len(data)), 0.0).events + p.finish()
    [event] = [e for e in events if e.pattern_id == "value-test"]
    assert r.passes == 1
    assert event.traceback is not None and len(event.traceback) < keep
    emitted = event_dict(event, Redactor())  # what every sink is given: redacted
    for text in (emitted["traceback"], emitted["message"]):
        assert "sk-aaaa" not in text and "api_key=***" in text
        assert "hf_b" not in text, text[-40:]
