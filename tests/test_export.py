"""`catalog export`: the patterns grep and mtail get count the same lines as our engine.

The reference is the engine itself, asked one line at a time (which is what grep and mtail see):
a line counts for a pattern when the engine matches that pattern in the line's record. The logs
are real sglang logs (the launch, issue and example fixtures) plus every curated record's real
example lines, so every curated pattern has lines to find.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from debian import require_tool

from matcher.catalog import CatalogRecord, load_catalog
from matcher.catalog.export import export, mtail_counter, render, translate
from matcher.cli import main
from matcher.engine import Engine, classes_agree, of_a_dependency, targets_of
from matcher.framing import Framer
from matcher.types import Line

ROOT = Path(__file__).resolve().parent.parent
CURATED = ROOT / "patterns" / "sglang" / "curated"
_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\] ?")
_EXCEPTION_LINE = re.compile(r"^(?P<cls>(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt|Warning"
                             r"|Fault)): (?P<msg>.*)$")
REAL_LOGS = sorted((ROOT / "tests" / "fixtures" / "sglang").glob("*/*.log")) + sorted(
    (ROOT / "examples" / "logs").glob("*.log"))


@pytest.fixture(scope="module")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real log lines, and every curated example line. Lines with ANSI colour codes are left
    out: the engine strips them, grep and mtail see the raw bytes."""
    lines: list[str] = []
    for path in REAL_LOGS:
        lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
    for record in load_catalog(builtin=False, user_paths=[CURATED]).records:
        for example in record.examples_match + record.examples_no_match:
            lines += example.splitlines()
    path = tmp_path_factory.mktemp("export") / "real.log"
    path.write_text("".join(x + "\n" for x in lines if "\x1b" not in x), encoding="utf-8")
    return path


def engine_line_ids(engine: Engine, log: Path, *, with_other_classes: bool = False
                    ) -> list[set[str]]:
    """Per line: the ids of the patterns that match its record (the line framed alone).
    `with_other_classes`: also the patterns the engine refuses only because the line's exception
    class is not the record's — the one thing a line tool cannot check on an unanchored pattern
    (`matcher.catalog.export` says so). Those are searched among the engine's prefilter
    candidates for the message (a superset of what matches it, whatever the class: the patterns
    one by one took 20–50 s); a pattern the prefilter missed would be one grep finds and the
    comparison fails."""
    out = []
    for text in log.read_text(encoding="utf-8").splitlines():
        framer = Framer()
        records = framer.feed(Line(text, "t", 0, len(text) + 1)) + framer.finish()
        # Whole matches: a line tool cannot take a line cut short for its pattern's start, nor
        # find an anchored pattern at the start of an API error body's message
        # (`matcher.api_error`) — an unanchored one it finds in the line that holds the body.
        targets = [t for r in records for t in targets_of(r)]
        bodies = {t.message for t in targets if t.in_body} \
            - {t.message for t in targets if not t.in_body}
        ids = {m.pattern.id for r in records for m in engine.match_all(r)
               if not m.cut and not (m.message in bodies and m.pattern.message_pattern.startswith(
                   ("(?<![\\s\\S])", "^")))}
        if with_other_classes and (m := _EXCEPTION_LINE.match(_PREFIX.sub("", text))):
            ids |= {p.record.id for p in (engine.patterns[i] for i in engine._candidates(m["msg"]))
                    if p.record.error_class and not classes_agree(p.record.error_class, m["cls"])
                    and not p.record.message_pattern.startswith(("(?<![\\s\\S])", "^"))
                    and p.compiled.search(m["msg"])}
        # A dependency's record that a curated record speaks for on this line (the engine's
        # precedence, not its matching) still matches it: a line tool sees patterns, not which
        # record speaks.
        ids |= {p.record.id for t in targets if not t.in_body
                for p in (engine.patterns[i] for i in engine._candidates(t.message))
                if of_a_dependency(p.record) and not p.record.also_made_by
                and classes_agree(p.record.error_class, t.error_class)
                and p.compiled.search(t.message)}
        out.append(ids)
    return out


def engine_line_counts(engine: Engine, log: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for ids in engine_line_ids(engine, log, with_other_classes=True):
        counts.update(ids)
    return counts


def grep_count(args: list[str], log: Path) -> int:
    done = subprocess.run([require_tool("grep"), "-E", "-c", *args, str(log)], capture_output=True, text=True,
                          env={"LC_ALL": "C"}, check=False)
    assert done.returncode in (0, 1), done.stderr
    assert done.stderr == "", done.stderr  # no "stray \" or other warnings either
    return int(done.stdout)


def test_each_curated_pattern_greps_the_lines_the_engine_matches(real_log: Path) -> None:
    """Per translated curated pattern, `grep -E -c` and the engine count the same lines."""
    records = load_catalog(builtin=False, user_paths=[CURATED]).records
    result = export(records, "grep")
    expected = engine_line_counts(Engine(records), real_log)
    got = {r.id: grep_count(["-e", text], real_log) for r, text in result.patterns}
    assert got == {r.id: expected[r.id] for r, _ in result.patterns}
    assert sum(1 for n in got.values() if n) >= 60  # not a vacuous agreement on zeros


def test_full_catalog_grep_file_counts_the_lines_any_translated_pattern_matches(
        real_log: Path, tmp_path: Path) -> None:
    """The whole exported catalog through `grep -E -n -f` finds the lines where the engine
    matches at least one pattern that translates. (Fed to grep 100 patterns at a time: GNU
    grep's time grows faster than the number of patterns — 15,000 at once take minutes even on
    this small log, 1,000 at a time 18.5 s, 100 at a time 5.7 s; the benchmark measures that,
    not the tests.)"""
    catalog = load_catalog()
    result = export(catalog.records, "grep")
    translated = {r.id for r, _ in result.patterns}
    expected = {n for n, ids in enumerate(
        engine_line_ids(Engine(catalog.records), real_log, with_other_classes=True), 1)
        if ids & translated}
    found: set[int] = set()
    texts = render(result).splitlines(keepends=True)
    for start in range(0, len(texts), 100):
        chunk = tmp_path / "chunk.grep"
        chunk.write_text("".join(texts[start:start + 100]))
        done = subprocess.run([require_tool("grep"), "-E", "-n", "-f", str(chunk), str(real_log)],
                              capture_output=True, text=True, env={"LC_ALL": "C"}, check=False)
        assert done.returncode in (0, 1) and done.stderr == "", done.stderr
        found |= {int(x.split(":", 1)[0]) for x in done.stdout.splitlines()}
    assert len(result.patterns) > 15000
    assert len(expected) > 300
    assert found == expected


def test_mtail_program_counts_per_pattern_like_the_engine(real_log: Path, tmp_path: Path) -> None:
    """The curated catalog as an mtail program: each counter, after `mtail --one_shot` over the
    log, equals the engine's line count for its pattern."""
    mtail = require_tool("mtail")
    records = load_catalog(builtin=False, user_paths=[CURATED]).records
    result = export(records, "mtail")
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "curated.mtail").write_text(render(result))
    done = subprocess.run(
        [mtail, "--one_shot", "--one_shot_format=json", "--progs", str(progs), "--logs",
         str(real_log), "--address", "127.0.0.1", "--port", "0"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads(done.stdout)
    got = {name: int(sum(v["Value"]["Value"] for v in series[0].get("LabelValues", [])))
           for name, series in metrics.items()}
    expected = engine_line_counts(Engine(records), real_log)
    assert got == {mtail_counter(r.id): expected[r.id] for r, _ in result.patterns}


def test_full_catalog_mtail_program_compiles(tmp_path: Path) -> None:
    """All 15,000+ translated patterns of the built-in catalog pass `mtail --compile_only`, and
    a broken one would not (so the check can fail)."""
    mtail = require_tool("mtail")
    progs = tmp_path / "progs"
    progs.mkdir()
    assert main(["catalog", "export", "--dialect", "mtail", "-o", str(progs / "full.mtail")]) == 0
    run = [mtail, "--compile_only", "--progs", str(progs), "--address", "127.0.0.1",
           "--port", "0"]
    done = subprocess.run(run, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (progs / "full.mtail").write_text("counter x\n/a(b/ {\n  x++\n}\n")
    assert subprocess.run(run, capture_output=True, timeout=60, check=False).returncode == 1


def _record(pattern: str, rid: str, error_class: str | None = None) -> CatalogRecord:
    return CatalogRecord(id=rid, message_pattern=pattern, layer="user", origin="t.json", index=0,
                         error_class=error_class)


def test_untranslatable_patterns_are_reported_and_counted_not_dropped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A back-reference, an inner lookahead and a pattern spanning lines are listed on stderr
    with their reason; the translatable one is written."""
    catalog = tmp_path / "c.json"
    catalog.write_text(json.dumps([
        {"id": "ok", "messagePattern": r"Cannot allocate (?P<n>\d+) pages"},
        {"id": "backref", "messagePattern": r"(?P<w>dup\w+licate) again \1"},
        {"id": "ahead", "messagePattern": r"Fail(?! when) using backend"},
        {"id": "lines", "messagePattern": r"Possible solutions:\n1\. set"},
    ]))
    out = tmp_path / "out.grep"
    assert main(["catalog", "export", "--dialect", "grep", str(catalog), "-o", str(out)]) == 0
    assert out.read_text() == "Cannot allocate ([0-9]+) pages\n"
    err = capsys.readouterr().err
    assert [line.rsplit(": ", 1)[-1] for line in err.splitlines() if "not translated:" in line] \
        == ["back-reference", "lookaround", "spans lines (\\n)"]
    assert "grep: 1 of 4 patterns translated, 3 not translatable" in err


@pytest.mark.parametrize(("pattern", "error_class", "grep", "mtail"), [
    (r"(?<![\s\S])\s*x=(.+?) is not (?P<what>\d+)\.", "ValueError",
     r"^(\[[^]]*\] )?(([[:alnum:]_]+\.)*ValueError: )?[[:space:]]*x=(.+) is not ([0-9]+)\.",
     r"^(?:\[[^\]]*\] )?(?:(?:\w+\.)*ValueError: )?\s*x=(?:.+) is not (?:\d+)\."),
    (r"(?<![\s\S])\s*Load weight failed", None,
     (r"^(\[[^]]*\] )?([[:alnum:]_.]*(Error|Exception|Exit|Interrupt|Warning|Fault): )?"
     r"[[:space:]]*Load weight failed"),
     (r"^(?:\[[^\]]*\] )?(?:[\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault): )?"
     r"\s*Load weight failed")),
    (r"(?<![A-Za-z])Scheduler hit an exception:", None,
     r"(^|[^A-Za-z])Scheduler hit an exception:", r"(?:^|[^A-Za-z])Scheduler hit an exception:"),
    (r"url (?P<u>\S+?)\.?(?=\s|$)(?: Access to (?P<r>\S+))?", None,
     r"url ([^[:space:]]+)\.?(([[:space:]]|$))", r"url (?:[^\s]+)\.?(?:(?:\s|$))"),
    (r"(?i)bad [\]a-c^-] {2,}x/y", None,
     r"[bB][aA][dD] []a-cA-C^-] {2,}[xX]/[yY]", r"(?i)bad [\x5d\x5e\x2da-cA-C] {2,}x\/y"),
])
def test_translations(pattern: str, error_class: str | None, grep: str, mtail: str) -> None:
    """Groups lose their names, classes become POSIX, lazy becomes greedy, start-of-message
    becomes start of line past sglang's prefix and the class, edge lookarounds become edges."""
    assert (translate(pattern, "grep", error_class), translate(pattern, "mtail", error_class)) \
        == (grep, mtail)
