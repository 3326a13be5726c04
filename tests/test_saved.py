"""`scan DIR`: a directory of saved logs as a post-mortem finds it — a log's rotations rotated and
compressed by Debian's logrotate under a real writer, read oldest first with nothing lost or
doubled; gzip, bzip2 and xz files made by their real tools read decompressed, data cut short
read up to the cut; binary files found skipped and named, a file given by name always read;
`scan -j N` reading compressed files whole in its workers with the same output as one process.
"""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from debian import require_tool
from hypothesis import given, settings
from hypothesis import strategies as st

from matcher import parallel
from matcher.scan import scan_events
from matcher.source import saved

REPO = Path(__file__).resolve().parents[1]
LAUNCH = REPO / "tests" / "fixtures" / "sglang" / "launch"
ISSUES = REPO / "tests" / "fixtures" / "sglang" / "issues"
SEED_LOG = LAUNCH / "int8_mamba_radix_lru.log"  # a launch we ran: one ValueError
SEED_ID = "4e2cdd4d6209ebbd"


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "matcher", *args], capture_output=True,
                          input=stdin, cwd=REPO)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                       done.stderr.decode())


def events(run: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in run.stdout.splitlines()]


def packed(tool: str, package: str, src: Path, dest: Path) -> Path:
    """`src` compressed by the real `tool` (`tool -c`) into `dest`."""
    exe = require_tool(tool, package)
    with dest.open("wb") as out:
        subprocess.run([exe, "-c", str(src)], stdout=out, check=True)
    return dest


# -- rotations, by a real writer and Debian's logrotate ----------------------------------------

@pytest.mark.parametrize("naming", ["numbered", "dateext"])
def test_logrotate_compressed_rotations_are_read_oldest_first_every_line_once(tmp_path, naming):
    """The writer numbers its lines; logrotate renames (`nocreate`: the writer's
    WatchedFileHandler makes the new file, so no line lands in a file logrotate then moves
    aside), compresses every rotation but the newest (`delaycompress`). `scan DIR` must give
    every number once, in the order written: rotations oldest first, then the live file."""
    logrotate = require_tool("logrotate")
    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "server.log"
    log.touch()
    dated = "  dateext\n  dateformat -%Y%m%d-%H%M%S\n" if naming == "dateext" else ""
    conf = tmp_path / "logrotate.conf"
    conf.write_text(f"{log} {{\n  rotate 100\n  nocreate\n  compress\n  delaycompress\n"
                    f"{dated}  missingok\n}}\n")
    catalog = tmp_path / "seq.json"
    catalog.write_text(subprocess.run([sys.executable, "-m", "matcher.testing", "catalog"],
                                      capture_output=True, text=True, check=True).stdout)
    lines = 1500
    writer = subprocess.Popen([sys.executable, "-m", "matcher.testing", "write", "--path",
                               str(log), "--lines", str(lines), "--interval", "0.003"])
    rotations = 0
    while writer.poll() is None:
        time.sleep(1.1 if naming == "dateext" else 0.4)  # dateext: one name per second
        subprocess.run([logrotate, "-f", "-s", str(tmp_path / "state"), str(conf)], check=True)
        rotations += 1
    assert writer.wait() == 0 and rotations >= 3
    # The newest lines in the live file, as when the server died: it must come last.
    subprocess.run([sys.executable, "-m", "matcher.testing", "write", "--path", str(log),
                    "--start", str(lines), "--lines", "100", "--interval", "0"], check=True)
    lines += 100
    names = sorted(p.name for p in logs.iterdir())
    assert sum(n.endswith(".gz") for n in names) >= 2, names
    run = cli("scan", "--no-builtin", "--catalog", str(catalog), "--format", "json", str(logs))
    assert run.returncode == 1, run.stderr
    found = events(run)
    assert [int(e["captures"]["seq"]) for e in found] == list(range(lines))
    sources = list(dict.fromkeys(os.path.basename(e["source"]) for e in found))
    assert sources[-1] == "server.log"
    assert set(sources) <= set(names) and len(sources) >= 3
    assert run.stderr == ""


def test_rotations_sort_oldest_first_whatever_wrote_them():
    """Names as logrotate (numbered, `dateext`), kubelet (`0.log.<time>[.gz]`), Python's
    RotatingFileHandler and TimedRotatingFileHandler give them; each log's oldest first."""
    expected = [
        "0.log.20261201-100000.gz", "0.log.20261201-110000.gz", "0.log.20261201-120000",
        "0.log",
        "app.log.2026-11-30_23-00-00", "app.log.2026-12-01_01-00-00", "app.log",
        "server.log-20261130.gz", "server.log-20261201",
        "server.log.10.gz", "server.log.9.gz", "server.log.2.gz", "server.log.1", "server.log",
        "worker.log.bz2",
    ]
    shuffled = expected[:]
    random.Random(7).shuffle(shuffled)
    assert sorted(shuffled, key=saved.rotation_key) == expected


# -- compressed files ---------------------------------------------------------------------------

@pytest.mark.parametrize("tool,package,suffix", [("gzip", "gzip", ".gz"),
                                                 ("bzip2", "bzip2", ".bz2"),
                                                 ("xz", "xz-utils", ".xz")])
def test_a_compressed_log_gives_what_the_plain_one_gives(loaded, tmp_path, tool, package,
                                                         suffix):
    catalog, engine = loaded
    plain = scan_events([str(SEED_LOG)], catalog, engine=engine)
    squeezed = packed(tool, package, SEED_LOG, tmp_path / f"launch.log{suffix}")
    got = scan_events([str(squeezed)], catalog, engine=engine)
    assert [e["pattern_id"] for e in plain.events] == [SEED_ID]

    def without_source(es: list[dict]) -> list[dict]:
        return [{k: v for k, v in e.items() if k != "source"} for e in es]

    assert without_source(got.events) == without_source(plain.events)
    assert got.events[0]["source"] == str(squeezed)
    assert (got.lines, got.not_read) == (plain.lines, ())


def test_gzip_cut_short_gives_everything_before_the_cut(loaded, tmp_path):
    """A copy cut short (or a crash while compressing): what decompresses before the cut is
    read, to the byte, and the file is named as not read whole. A failure before the cut is
    found (exit 1); a clean log cut short exits 2: "nothing wrong" cannot be said of it."""
    catalog, engine = loaded
    big = ISSUES / "sglang_3460_nccl_tp_ranks_sigquit.log"
    whole = packed("gzip", "gzip", big, tmp_path / "whole.gz").read_bytes()
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    before_cut = zlib.decompressobj(31).decompress(cut.read_bytes())
    assert 0 < len(before_cut) < big.stat().st_size
    err = io.StringIO()
    got = scan_events([str(cut)], catalog, engine=engine, err=err)
    assert got.lines == before_cut.count(b"\n") + (not before_cut.endswith(b"\n"))
    said = (f"{cut}: gzip data ends early after {len(before_cut):,} bytes of log; "
            "the rest was not read")
    assert got.not_read == (said,)
    assert f"not read whole: {cut}" in err.getvalue()
    prefix = tmp_path / "prefix.log"
    prefix.write_bytes(before_cut)
    assert [e["pattern_id"] for e in got.events] == \
        [e["pattern_id"] for e in scan_events([str(prefix)], catalog, engine=engine).events]
    assert any(e["event"] == "sglang_error" for e in got.events)

    run = cli("scan", str(cut))
    assert run.returncode == 1 and "ends early" in run.stderr
    clean = tmp_path / "clean.log"
    clean.write_text("".join(f"[2026-01-01 12:00:{i % 60:02d} TP0] Decode batch. "
                             f"#running-req: {i}, #token: {i * 7}\n" for i in range(3000)))
    clean_cut = tmp_path / "clean.log.gz"
    data = packed("gzip", "gzip", clean, tmp_path / "c.gz").read_bytes()
    clean_cut.write_bytes(data[: len(data) // 2])
    run = cli("scan", str(clean_cut))
    assert run.returncode == 2, run.stdout
    assert "No sglang errors found." in run.stdout and "ends early" in run.stderr


def test_gzip_on_stdin_is_read_decompressed():
    gz = subprocess.run([require_tool("gzip"), "-c", str(SEED_LOG)], capture_output=True,
                        check=True).stdout
    run = cli("scan", "--format", "json", "-", stdin=gz)
    assert run.returncode == 1, run.stderr
    assert [(e["pattern_id"], e["source"]) for e in events(run)] == [(SEED_ID, "<stdin>")]


def test_zstd_named_says_how_to_read_it_and_found_is_skipped(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    z = packed("zstd", "zstd", SEED_LOG, logs / "old.log.zst")
    (logs / "server.log").write_bytes(SEED_LOG.read_bytes())
    named = cli("scan", str(z))
    assert named.returncode == 2
    assert f"zstd -dc {z} | sglang-matcher scan -" in named.stderr
    found = cli("scan", "--format", "json", str(logs))
    assert found.returncode == 1
    assert [e["source"] for e in events(found)] == [str(logs / "server.log")]
    assert f"not read: {z}: zstd-compressed" in found.stderr
    piped = subprocess.run(f"zstd -dc {z} | {sys.executable} -m matcher scan -", shell=True,
                           capture_output=True, text=True, cwd=REPO)
    assert piped.returncode == 1 and SEED_ID in piped.stdout


# -- what a directory holds ---------------------------------------------------------------------

def test_a_directory_read_like_a_node_skips_binaries_and_reads_each_file_once(tmp_path):
    """Beside the logs: a core dump and an image (skipped, named); a log that logrotate's
    `copytruncate` left starting with a hole of NUL bytes (read); a `/var/log/containers`-
    style symlink to a log (read once); a dangling one (named, nothing to read)."""
    node = tmp_path / "node"
    pods = node / "pods" / "ns_server-0_uid" / "sglang"
    pods.mkdir(parents=True)
    (pods / "0.log").write_bytes(SEED_LOG.read_bytes())
    containers = node / "containers"
    containers.mkdir()
    os.symlink(pods / "0.log", containers / "server-0_ns_sglang-abc.log")
    os.symlink(pods / "1.log", containers / "gone_ns_sglang-def.log")
    rng = random.Random(1)
    (node / "core.1234").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(4000)
                                     + rng.randbytes(60_000))
    (node / "grafana.png").write_bytes(b"\x89PNG\r\n\x1a\n" + rng.randbytes(30_000))
    holed = node / "after-copytruncate.log"
    holed.write_bytes(bytes(200_000) + (ISSUES / "sglang_3460_nccl_tp_ranks_sigquit.log")
                      .read_bytes())
    run = cli("scan", "--format", "json", str(node))
    assert run.returncode == 1, run.stderr
    sources = {e["source"] for e in events(run)}
    assert sources == {str(holed), str(containers / "server-0_ns_sglang-abc.log")}
    assert sum(e.get("pattern_id") == SEED_ID for e in events(run)) == 1
    said = run.stderr
    for name in ("core.1234", "grafana.png"):
        assert f"not read: {node / name}: binary; give it by name to read it anyway" in said
    assert f"not read: {containers / 'gone_ns_sglang-def.log'}: dangling symlink" in said
    text = cli("scan", str(node))
    assert "in " + str(node) + " (2 files, " in text.stdout.splitlines()[0]
    named = cli("scan", str(node / "core.1234"))  # given by name: read, and nothing found
    assert named.returncode == 0 and "No sglang errors found." in named.stdout


def _odd_by_character(sample: bytes) -> bool:
    """The definition `looks_binary` counts faster: over a tenth of the decoded characters
    replacement characters, DEL, or C0 controls a log does not use."""
    text = sample.decode("utf-8", "replace")
    odd = sum(1 for c in text if c == "\ufffd" or c == "\x7f"
              or (c < " " and c not in "\t\n\r\f\b\x1b"))
    return odd * 10 > len(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([b"\x00", b"\x01", b"\x1b[31m", b"\x7f", b"\xff", b"\xe2\x82",
                                 b"\xe2\x82\xac", b"\xef\xbf\xbd", b"\t", b"\n", b"abc ",
                                 "é".encode(), b"\xc3", b"\x80"]), max_size=300),
       st.binary(max_size=200))
def test_looks_binary_counts_what_the_characters_say(pieces, noise):
    """Counted on the bytes, the verdict is the one counting the decoded characters gives,
    for samples near the one-in-ten line: controls beside broken UTF-8 sequences, a real €,
    a literal U+FFFD, random bytes."""
    sample = b"".join(pieces) + noise
    assert saved.looks_binary(sample) == _odd_by_character(sample)


def test_looks_binary_on_real_files():
    for log in sorted(ISSUES.glob("*.log"))[:20]:
        assert not saved.looks_binary(log.read_bytes()[:saved.SAMPLE_BYTES])
    elf = Path(sys.executable).resolve().read_bytes()[:saved.SAMPLE_BYTES]
    assert saved.looks_binary(elf)


def test_an_empty_directory_is_an_error(tmp_path):
    run = cli("scan", str(tmp_path))
    assert run.returncode == 2
    assert f"no log file to read in {tmp_path}" in run.stderr


def test_parallel_reads_compressed_files_whole_with_the_output_of_one(loaded, tmp_path):
    """Rotations of real logs, compressed by the real tools, one cut short, beside a plain log
    large enough to be cut into tasks: `-j 2` and `-j 3` give `-j 1`'s events, line count and
    damage report, and the compressed files were read by the workers."""
    catalog, engine = loaded
    logs = tmp_path / "logs"
    logs.mkdir()
    real = sorted(REPO.glob("tests/fixtures/sglang/**/*.log"))
    issue_logs = [*sorted(real, key=lambda p: p.stat().st_size)[-5:], *ISSUES.glob("*.log")]
    for i, src in enumerate(issue_logs):
        tool, package, suffix = [("gzip", "gzip", ".gz"), ("bzip2", "bzip2", ".bz2"),
                                 ("xz", "xz-utils", ".xz")][i % 3]
        packed(tool, package, src, logs / f"server.log.{i + 2}{suffix}")
    cut = logs / "server.log.20.gz"
    whole = packed("gzip", "gzip", issue_logs[0], tmp_path / "w.gz").read_bytes()
    cut.write_bytes(whole[: len(whole) // 2])
    (logs / "server.log").write_bytes(b"".join(p.read_bytes() for p in real))
    paths = list(saved.find([str(logs)]).paths)
    assert os.path.basename(paths[0]) == "server.log.20.gz"
    assert paths[-1] == str(logs / "server.log")

    seen = []

    def scan(jobs: int) -> tuple[list, int, tuple[str, ...], str]:
        err = io.StringIO()
        got = scan_events(paths, catalog, engine=engine, jobs=jobs, read_size=1024, err=err)
        seen.append(got.parallel)
        return got.events, got.lines, got.not_read, err.getvalue()

    one = scan(1)
    assert len(one[2]) == 1 and "server.log.20.gz: gzip data ends early" in one[2][0]
    assert {e["source"] for e in one[0]} >= {str(logs / "server.log"),
                                             str(logs / "server.log.2.gz")}
    for jobs in (2, 3):
        assert scan(jobs) == one, f"-j {jobs}"
        assert seen[-1].tasks > len(paths)  # the plain log cut, each compressed one whole


def test_a_compressed_file_counts_for_what_it_holds_when_judging_workers(tmp_path):
    """`-j N` forks workers only for input large enough to repay their cold start; a gzip
    file holds several times its size of log, and is counted so."""
    gz = packed("gzip", "gzip", SEED_LOG, tmp_path / "launch.log.gz")
    plain = tmp_path / "same-size.log"
    plain.write_bytes(SEED_LOG.read_bytes()[: gz.stat().st_size])
    read_size = -(-gz.stat().st_size * 2 // parallel.MIN_PARALLEL_READS)  # threshold: 2× size
    assert parallel.worth_it([str(gz)], read_size) == parallel.available()
    assert not parallel.worth_it([str(plain)], read_size)


def test_archives_are_refused_with_the_command_that_unpacks_them(tmp_path):
    """A CI job's artifacts as downloaded: read as text, a zip's compressed members gave
    "No sglang errors found" (exit 0), a false all-clear. Given by name, an archive is a usage
    error saying how to unpack it; found in a directory, it is named and the rest is read.
    The tar hint, followed, finds the failure."""
    import zipfile

    tar = require_tool("tar")
    job = tmp_path / "job"
    job.mkdir()
    (job / "server.log").write_bytes(SEED_LOG.read_bytes())
    tgz = tmp_path / "artifacts.tar.gz"
    subprocess.run([tar, "-czf", str(tgz), "-C", str(job), "."], check=True)
    zipped = tmp_path / "artifacts.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(job / "server.log", "server.log")
    for archive, hint in ((tgz, f"`mkdir DIR && tar -xf {tgz} -C DIR`"),
                          (zipped, f"`unzip -d DIR {zipped}`")):
        run = cli("scan", str(archive))
        assert (run.returncode, run.stdout) == (2, "")
        assert f"{archive}: a {'tar' if archive == tgz else 'zip'} archive" in run.stderr
        assert hint in run.stderr
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    subprocess.run([tar, "-xf", str(tgz), "-C", str(unpacked)], check=True)
    run = cli("scan", "--format", "json", str(unpacked))
    assert run.returncode == 1 and [e["pattern_id"] for e in events(run)] == [SEED_ID]
    (job / "artifacts.zip").write_bytes(zipped.read_bytes())
    run = cli("scan", "--format", "json", str(job))
    assert run.returncode == 1 and [e["pattern_id"] for e in events(run)] == [SEED_ID]
    assert f"not read: {job / 'artifacts.zip'}: a zip archive" in run.stderr
