"""Coverage-guided fuzzing (atheris) of the code that reads what we do not control.

    python fuzz/run.py --seconds 60                 # every target, 60 s shared between them
    python fuzz/run.py --seconds 300 --target pipeline

Targets: `pipeline` (decoders, framer, engine, aggregator and redaction on any bytes, cut into
reads where the input says, in every input format), `catalog` (a catalog file of any content and
extension), `checkpoint` (any checkpoints.json). A target fails on any exception escaping, or
when two cuttings of the same bytes give different events. Each runs in its own process for a
fixed time (`-max_total_time`); crashes are written as `crash-*` files in `fuzz/artifacts/`.
Needs `pip install atheris` (not a test dependency: it builds with clang where no wheel fits).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # fuzz this checkout's matcher, installed or not
TARGETS = ("pipeline", "catalog", "checkpoint")


def _pipeline_target():
    from matcher.catalog import load_catalog
    from matcher.engine import Engine
    from matcher.pipeline import Pipeline
    from matcher.redact import Redactor
    from matcher.sinks.events import event_dict
    from matcher.types import Chunk

    engine = Engine(load_catalog(builtin=True, generated=False).records)
    redactor = Redactor()
    formats = ("auto", "plain", "cri", "docker")

    def run(data: bytes, cuts: list[int], fmt: str) -> list[str]:
        p = Pipeline(engine, input_format=fmt, max_line_bytes=512, window=0.0)
        bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
        events = []
        for a, b in zip(bounds, bounds[1:]):
            events += p.feed(Chunk(data[a:b], "f", b), 1.0)
        events += p.drain(100.0)
        # The same events; their order follows when each record was seen to end, which a cut
        # can move (an open traceback ends after a line record that started later).
        return sorted(json.dumps(event_dict(e, redactor), sort_keys=True, default=str)
                      for e in events)

    def one(raw: bytes) -> None:
        if len(raw) < 3:
            return
        fmt = formats[raw[0] % 4]
        cuts = list(raw[1:1 + raw[1] % 8 + 1])
        data = raw[1 + len(cuts):]
        cuts = [c * (len(data) // 255 + 1) for c in cuts]
        if run(data, cuts, fmt) != run(data, [], fmt):
            raise AssertionError("the cutting of the bytes changed the events")

    return one


def _catalog_target():
    from matcher.catalog.load import load_paths

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-catalog-"))

    def one(raw: bytes) -> None:
        if not raw:
            return
        f = tmp / f"c.{('json', 'jsonl', 'yaml')[raw[0] % 3]}"
        f.write_bytes(raw[1:])
        load_paths([f], "user")

    return one


def _checkpoint_target():
    from matcher.source.checkpoint import CheckpointStore

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-checkpoint-"))

    def one(raw: bytes) -> None:
        for old in tmp.iterdir():
            old.unlink()
        (tmp / "checkpoints.json").write_bytes(raw)
        CheckpointStore(tmp).load()

    return one


def _seeds(target: str) -> list[bytes]:
    """Valid inputs to start from: libFuzzer mutates what already reaches deep code."""
    if target == "pipeline":
        logs = sorted((ROOT / "examples" / "logs").glob("*.log"))
        return [b"\x00\x03" + b"\x40\x80\xc0" + p.read_bytes()[:4096] for p in logs]
    if target == "catalog":
        seed = json.dumps({"id": "r1", "messagePattern": r"CUDA out of memory\. Tried (?P<n>.+)",
                           "errorClass": "torch.OutOfMemoryError", "severity": "error",
                           "examples": {"match": ["CUDA out of memory. Tried 2 GiB"],
                                        "noMatch": ["ok"]}})
        return [b"\x00" + seed.encode(), b"\x01" + seed.encode() + b"\n" + seed.encode(),
                b"\x02- id: r1\n  messagePattern: 'a specific failure text'\n"]
    return [json.dumps({"version": 1, "files": [
        {"dev": 2049, "ino": 13, "fp_len": 1024, "fp_hash": "0123456789abcdef", "offset": 4096,
         "path": "/var/log/sglang/server.log", "updated": 1.0, "tail_hash": "fedcba9876543210"}],
        "journal": {"journal:sglang.service": "s=abc;i=1"}}).encode()]


def fuzz_one(target: str, seconds: int, argv: list[str]) -> None:
    """In the child process: instrument matcher, then let libFuzzer drive `target`."""
    import atheris

    with atheris.instrument_imports(include=["matcher"]):
        one = {"pipeline": _pipeline_target, "catalog": _catalog_target,
               "checkpoint": _checkpoint_target}[target]()
    corpus = ROOT / "fuzz" / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    for n, seed in enumerate(_seeds(target)):
        (corpus / f"seed-{n}").write_bytes(seed)
    artifacts = ROOT / "fuzz" / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    atheris.Setup([sys.argv[0], f"-max_total_time={seconds}", f"-artifact_prefix={artifacts}/",
                   "-rss_limit_mb=2048", "-print_final_stats=1", *argv, str(corpus)], one)
    atheris.Fuzz()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=60, help="total fuzzing time")
    p.add_argument("--target", choices=(*TARGETS, "all"), default="all")
    p.add_argument("--child", choices=TARGETS, help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    if args.child:
        fuzz_one(args.child, args.seconds, rest)
        return 0
    targets = TARGETS if args.target == "all" else (args.target,)
    share = max(1, args.seconds // len(targets))
    failed = []
    for t in targets:
        print(f"== {t}: {share} s", flush=True)
        r = subprocess.run([sys.executable, __file__, "--child", t, "--seconds", str(share), *rest],
                           cwd=ROOT)
        if r.returncode != 0:
            failed.append(t)
    print("== failed: " + ", ".join(failed) if failed else "== no crash in any target")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
