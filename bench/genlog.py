"""A realistic sglang 0.5.x server log of N lines, with a ground truth of the failures in it.

Why: the benchmark compares `sglang-matcher scan`, `grep -E -c -f` and mtail on the same bytes, and a
speed figure is worthless if a tool counted the wrong thing. So the generator writes, beside the
log, what every tool must find — per pattern id, the *events* (one per failure, however many ranks
printed it: what `scan` reports) and the *lines* (each rank's `Class: message` line: what grep and
mtail count).

The normal traffic has the exact shapes sglang 0.5.23 prints (`scheduler_components/
metrics_reporter.py` for `Decode batch.`/`Prefill batch.`, `utils/request_logger.py` for
`Receive:`, uvicorn's access line in sglang's `[ts] ` format), with the rank prefixes of TP, DP,
PP and EP deployments. The failures are the catalog's own: the curated records' real example lines
and the generated records' message templates with their holes filled, each printed as the
traceback Python prints for that raise site (or as a plain error line for logging sites), on one
rank or on several ranks one after the other.

A candidate failure is kept only if, framed and matched on its own by the full catalog, it gives
exactly one event of its own pattern and no other pattern finds anything in it; so the ground truth
holds by construction and no lucky overlap between patterns can make a tool look right. Failures
are spaced further apart in log time than the rank-collapse window, so each is one event.

Deterministic for a given `--seed` and catalog.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import regex

# This checkout's package, whatever is installed (a stale editable install points elsewhere).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from matcher.catalog import CatalogRecord, load_catalog
from matcher.engine import Engine
from matcher.framing import Framer
from matcher.pipeline import Pipeline
from matcher.types import Chunk, Line, Record

SITE = "/usr/local/lib/python3.11/dist-packages/sglang"
START = datetime(2026, 1, 1, 12, 0, 0)  # noqa: DTZ001 — sglang's log times are naive
# Log time per line: ~40 lines a second, so consecutive failures (~1,000 lines apart) are
# far more than the 5 s rank-collapse window apart.
SECONDS_PER_LINE = 0.025

# The frames above every scheduler-side raise, as sglang 0.5.23 prints them (tp8 crash fixture).
SCHEDULER_FRAMES = (
    (f"{SITE}/srt/managers/scheduler.py", 6362, "run_scheduler_process",
     "scheduler = Scheduler(server_args, port_args)"),
    (f"{SITE}/srt/managers/scheduler.py", 568, "__init__", "self.init_model_worker()"),
    (f"{SITE}/srt/managers/scheduler.py", 1130, "init_model_worker", "self.init_tp_model_worker()"),
    (f"{SITE}/srt/managers/scheduler.py", 1033, "init_tp_model_worker",
     "self.tp_worker = TpModelWorker(**worker_kwargs)"),
    (f"{SITE}/srt/managers/tp_worker.py", 319, "__init__", "self._init_model_runner()"),
    (f"{SITE}/srt/managers/tp_worker.py", 487, "_init_model_runner",
     "self._model_runner = ModelRunner("),
    (f"{SITE}/srt/model_executor/model_runner.py", 499, "__init__", "self.initialize()"),
    (f"{SITE}/srt/model_executor/model_runner.py", 715, "initialize", "self.load_model()"),
)
HEADER = "Scheduler hit an exception: Traceback (most recent call last):"
# The frames above a server-argument check in the launcher (swa_ratio_out_of_range fixture).
LAUNCH_FRAMES = (
    (f"{SITE}/launch_server.py", 84, "<module>", "run_server(server_args)"),
    (f"{SITE}/launch_server.py", 29, "run_server", "server_args.resolve_once()"),
    (f"{SITE}/srt/server_args.py", 277, "resolve_once", "run_resolution_pipeline(self)"),
    (f"{SITE}/srt/arg_groups/pipeline.py", 334, "run_resolution_pipeline",
     "run_hook(handle_cache_compatibility, server_args)"),
)

# Rank tags of real deployments: (tag template, ranks it takes).
RANK_LAYOUTS = (
    ("TP{r}", 8),
    ("DP0 TP{r}", 4),
    ("PP1 TP{r}", 4),
    ("TP{r} EP{r}", 8),
)

# Fill values for template holes: short, ordinary, and unlike any pattern's literal text.
HOLE_VALUES = ("128", "'bfloat16'", "4096", "'auto'", "0.85", "'fa3'", "7", "'Qwen3-8B'", "None",
               "'cuda:0'", "'flashinfer'", "'lru'", "2")
_HOLE = re.compile(r"(?<!\{)\{(?!\{)[^{}]*\}(?!\})|%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[sdrfgixXeEc]")
_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] ?")
_CLASS_LINE = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*): (?P<msg>.+)$")
_CLASS_LIKE = re.compile(r"(?:Error|Exception|Exit|Interrupt|Warning)$")

PROMPTS = ("What is the capital of France?", "Summarize the following article in three sentences.",
           "Write a haiku about GPUs.", "Translate good morning into German.",
           "List five prime numbers.", "Explain KV cache in one paragraph.")
PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/health", "/get_model_info")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failure the log can hold: its pattern, and the text each rank prints for it."""

    pattern_id: str
    layer: str
    error_class: str | None  # None: a logging site, printed as one plain line
    message: str
    file_path: str
    line_number: int
    in_scheduler: bool = True  # printed under `Scheduler hit an exception:`, else a bare traceback

    def lines(self, prefix: str) -> list[str]:
        """What one rank prints; exactly one of these lines carries the message."""
        if self.error_class is None:
            return [prefix + self.message]
        module = self.file_path.removeprefix("python/sglang")
        code = ("assert ok, f\"...\"" if self.error_class == "AssertionError"
                else f"raise {self.error_class.rsplit('.', 1)[-1]}(")
        if self.in_scheduler:
            out = [prefix + HEADER]
            frames = SCHEDULER_FRAMES
        else:  # the launcher's main process: no prefix, no header
            out = ["Traceback (most recent call last):",
                   '  File "<frozen runpy>", line 198, in _run_module_as_main',
                   '  File "<frozen runpy>", line 88, in _run_code']
            frames = LAUNCH_FRAMES
        for path, line, func, src in frames:
            out += [f'  File "{path}", line {line}, in {func}', f"    {src}"]
        out += [f'  File "{SITE}{module}", line {self.line_number}, in _check', f"    {code}",
                f"{self.error_class}: {self.message}", ""]
        return out

    def expected(self, scope: str, header_id: str) -> list[tuple[str, str | None]]:
        """The events `scan` gives for this failure (any number of ranks) with a catalog scope:
        its own pattern if the scope has it; else, for a traceback, the scheduler header's
        generic record, or an unknown error when there is no header; else nothing."""
        if scope == "full" or self.layer != "generated":
            return [("sglang_error", self.pattern_id)]
        if self.error_class is None:
            return []
        if self.in_scheduler:
            return [("sglang_error", header_id)]
        return [("sglang_unknown_error", None)]


def _fill(template: str, rng: random.Random) -> str:
    return _HOLE.sub(lambda _m: rng.choice(HOLE_VALUES), template)


def candidates(records: list[CatalogRecord], rng: random.Random, generated: int) -> list[Failure]:
    """Curated records' one-line examples, and `generated` sampled generated templates filled."""
    out: list[Failure] = []
    for r in records:
        if r.layer == "generated" or r.role == "consequence":
            continue
        for ex in r.examples_match:
            if "\n" in ex.strip() or not ex.isascii():
                continue
            text = _PREFIX.sub("", ex.strip())
            m = _CLASS_LINE.match(text)
            if m and _CLASS_LIKE.search(m["cls"]):
                out.append(Failure(r.id, r.layer, m["cls"], m["msg"], r.file_path or
                                   "python/sglang/srt/managers/scheduler.py", r.line_number or 1,
                                   in_scheduler=rng.random() < 0.7))
            else:
                out.append(Failure(r.id, r.layer, None, text, "", 0))
    gen = [r for r in records if r.layer == "generated" and r.error_message
           and "\n" not in r.error_message and r.error_message.isascii()]
    for r in rng.sample(gen, min(generated, len(gen))):
        msg = _fill(r.error_message or "", rng).strip()
        if not msg or not regex.search(r.message_pattern, msg):
            continue
        out.append(Failure(r.id, r.layer, r.error_class, msg, r.file_path or "", r.line_number or 1,
                           in_scheduler=rng.random() < 0.7))
    return out


def header_pattern(curated: Engine) -> str:
    """The curated record that recognizes the scheduler's traceback header (the generic one)."""
    found = {m.pattern.id for m in curated.match_all(_record("[2026-01-01 12:00:00 TP0] " + HEADER))}
    if len(found) != 1:
        raise SystemExit(f"genlog: expected one curated record for {HEADER!r}, found {found}")
    return found.pop()


def _events(engine: Engine, text: str) -> list[tuple[str, str | None]]:
    pipeline = Pipeline(engine)
    events = pipeline.feed(Chunk((text + "\n").encode(), "v", 0)).events
    events += pipeline.end_of_source("v") + pipeline.finish()
    return [(e.event, e.pattern_id) for e in events]


def verified(failures: list[Failure], full: Engine, curated: Engine, header_id: str) -> list[Failure]:
    """Keep the failures that, framed alone and printed by two ranks (so the rank collapse is
    exercised too; a bare traceback has no rank, so it is printed once), give exactly the events `Failure.expected` says with either catalog, and
    whose message line no other pattern of the full catalog matches, whatever the class (grep and
    mtail would count it under that pattern too)."""
    kept = []
    for f in failures:
        text = "\n".join(f.lines("[2026-01-01 12:00:00 TP0] ") + (
            f.lines("[2026-01-01 12:00:00 TP1] ") if f.in_scheduler else []))
        if (_events(full, text) != f.expected("full", header_id)
                or _events(curated, text) != f.expected("curated", header_id)):
            continue
        msg_line = f"{f.error_class}: {f.message}" if f.error_class else f.message
        # The message alone too: a line tool cannot see the exception class, so a pattern told
        # apart from this one only by its class (torch's and TVM's OOM sentence) counts it.
        others = {m.pattern.id for line in (msg_line, f.message)
                  for m in full.match_all(_record(line))}
        if others <= {f.pattern_id}:
            kept.append(f)
    return kept


def _record(line: str) -> Record:
    framer = Framer()
    records = framer.feed(Line(line, "v", 0, len(line) + 1), 0.0) + framer.finish()
    return records[0]


class Traffic:
    """Normal sglang traffic: batch statistics, requests, access lines (real 0.5.23 formats)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.layout = RANK_LAYOUTS[0]
        self.rid = 0

    def tag(self, rank: int) -> str:
        return self.layout[0].format(r=rank)

    def line(self, ts: str) -> str:
        rng = self.rng
        k = rng.random()
        rank = rng.randrange(self.layout[1])
        if k < 0.40:
            n = rng.randint(1, 256)
            used = rng.randint(1000, 900000)
            return (f"[{ts} {self.tag(rank)}] Decode batch, #running-req: {n}, #token: {used}, "
                    f"token usage: {used / 1e6:.2f}, cuda graph: {rng.random() < 0.9}, "
                    f"gen throughput (token/s): {rng.uniform(50, 9000):.2f}, "
                    f"#queue-req: {rng.randint(0, 40)}")
        if k < 0.58:
            new = rng.randint(1, 8192)
            return (f"[{ts} {self.tag(rank)}] Prefill batch, #new-seq: {rng.randint(1, 16)}, "
                    f"#new-token: {new}, #cached-token: {rng.randint(0, new)}, "
                    f"token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 256)}, "
                    f"#queue-req: {rng.randint(0, 40)}, #pending-token: {rng.randint(0, 9000)}, "
                    f"cuda graph: False, input throughput (token/s): {rng.uniform(100, 90000):.2f}")
        if k < 0.78:
            status = "200 OK" if rng.random() < 0.98 else "400 Bad Request"
            method = "GET" if rng.random() < 0.1 else "POST"
            return (f'[{ts}] INFO:     127.0.0.1:{rng.randint(30000, 65000)} - '
                    f'"{method} {rng.choice(PATHS)} HTTP/1.1" {status}')
        self.rid += 1
        rid = f"{self.rng.getrandbits(128):032x}"
        return (f"[{ts}] Receive: obj=GenerateReqInput(rid='{rid}', text='{rng.choice(PROMPTS)}', "
                f"sampling_params={{'max_new_tokens': {rng.choice((64, 128, 256, 512))}, "
                f"'temperature': {rng.choice((0, 0.7, 1.0))}}}, stream={rng.random() < 0.5})")

    def startup(self, ts: str) -> list[str]:
        return [
            (f"[{ts}] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tokenizer_path='Qwen/Qwen3-8B', "
            f"tp_size={self.layout[1]}, mem_fraction_static=0.85, port=30000)"),
            *(f"[{ts} {self.tag(r)}] Init torch distributed begin." for r in range(self.layout[1])),
            *(f"[{ts} {self.tag(r)}] Load weight begin. avail mem=78.50 GB" for r in range(self.layout[1])),
            (f"[{ts} {self.tag(0)}] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, "
            "avail mem=62.91 GB, mem usage=15.59 GB."),
            f"[{ts} {self.tag(0)}] KV Cache is allocated. #tokens: 812345, K size: 24.79 GB, V size: 24.79 GB",
            f"[{ts}] INFO:     Started server process [{self.rng.randint(1000, 99999)}]",
            f"[{ts}] INFO:     Waiting for application startup.",
            f"[{ts}] INFO:     Application startup complete.",
            f"[{ts}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
            f"[{ts}] The server is fired up and ready to roll!",
        ]


@dataclass(slots=True)
class Truth:
    """What was written: line and byte counts, and each failure with how many ranks printed it."""

    lines: int = 0
    bytes: int = 0
    written: list[tuple[Failure, int]] = field(default_factory=list)

    def as_json(self, header_id: str, **meta: object) -> dict[str, object]:
        """Per pattern: `lines` that contain it (what grep and mtail count; the same in any
        scope), and its `events` per catalog scope (what `scan` reports). Per scope: the events,
        the unknown errors, and the lines matching any of the scope's patterns."""
        patterns: dict[str, dict[str, object]] = {}

        def entry(pid: str, layer: str) -> dict[str, object]:
            return patterns.setdefault(pid, {"layer": layer, "lines": 0,
                                             "events": {"full": 0, "curated": 0}})

        totals = {s: {"events": 0, "unknown_events": 0, "lines": 0} for s in ("full", "curated")}
        for f, ranks in self.written:
            own = entry(f.pattern_id, f.layer)
            own["lines"] = int(own["lines"]) + ranks  # type: ignore[call-overload]
            if f.error_class is not None and f.in_scheduler:
                hdr = entry(header_id, "curated")
                hdr["lines"] = int(hdr["lines"]) + ranks  # type: ignore[call-overload]
            for scope, t in totals.items():
                for kind, pid in f.expected(scope, header_id):
                    if kind == "sglang_unknown_error":
                        t["unknown_events"] += 1
                    else:
                        t["events"] += 1
                        ev = entry(str(pid), "curated")["events"]
                        ev[scope] += 1  # type: ignore[index]
                in_scope = scope == "full" or f.layer != "generated"
                t["lines"] += ranks * (int(in_scope) + int(f.error_class is not None and f.in_scheduler))
        return {**meta, "lines": self.lines, "bytes": self.bytes, "failures": len(self.written),
                "header_pattern": header_id, "totals": totals,
                "patterns": dict(sorted(patterns.items()))}


def generate(n_lines: int, error_every: int, pool: list[Failure], rng: random.Random,
             truth: Truth) -> Iterator[str]:
    """Lines of the log, the ground truth filled in as failures are written."""
    traffic = Traffic(rng)
    t = START
    written = 0
    next_error = error_every // 2
    restart_every = max(n_lines // 4, 1)

    def ts() -> str:
        return t.strftime("%Y-%m-%d %H:%M:%S")

    while written < n_lines:
        if written % restart_every == 0:  # a (re)start: new layout, start-up lines
            traffic.layout = RANK_LAYOUTS[(written // restart_every) % len(RANK_LAYOUTS)]
            block = traffic.startup(ts())
        elif pool and written >= next_error:
            next_error = written + error_every
            f = pool[rng.randrange(len(pool))]
            many = f.error_class is not None and f.in_scheduler and rng.random() < 0.3
            ranks = rng.sample(range(traffic.layout[1]), rng.choice((2, 4))) if many \
                else [rng.randrange(traffic.layout[1])]
            block = []
            for r in sorted(ranks):
                block += f.lines(f"[{ts()} {traffic.tag(r)}] ")
            block = block[:-1] if block and block[-1] == "" and rng.random() < 0.5 else block
            truth.written.append((f, len(ranks)))
            t += timedelta(seconds=6)  # the next failure is outside this one's collapse window
        else:
            block = [traffic.line(ts())]
        for line in block:
            written += 1
            truth.lines += 1
            truth.bytes += len(line.encode()) + 1
            yield line
        t += timedelta(seconds=SECONDS_PER_LINE * len(block))


def main(argv: list[str] | None = None) -> int:
    from matcher import cache

    cache.use(cache.default_cache_dir())  # as sglang-matcher does: warm starts
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--lines", type=int, default=1_000_000, help="lines to write (about)")
    ap.add_argument("-o", "--output", type=Path, default=Path("/tmp/sglang-bench.log"))
    ap.add_argument("--truth", type=Path, help="ground truth JSON (default: OUTPUT.truth.json)")
    ap.add_argument("--error-every", type=int, default=1000, help="one failure per this many lines")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--generated-candidates", type=int, default=400,
                    help="generated templates to try as failures (curated examples are all tried)")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    catalog = load_catalog()
    full = Engine(catalog.records)
    curated = Engine([r for r in catalog.records if r.layer != "generated"])
    header_id = header_pattern(curated)
    pool = verified(candidates(list(catalog.records), rng, args.generated_candidates),
                    full, curated, header_id)
    truth = Truth()
    with open(args.output, "w", encoding="utf-8") as out:
        buf: list[str] = []
        for line in generate(args.lines, args.error_every, pool, rng, truth):
            buf.append(line)
            if len(buf) >= 10000:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    truth_path = args.truth or args.output.with_name(args.output.name + ".truth.json")
    truth_path.write_text(json.dumps(truth.as_json(
        header_id, seed=args.seed, error_every=args.error_every, catalog_version=catalog.version,
        pool={"curated": sum(f.layer != "generated" for f in pool),
              "generated": sum(f.layer == "generated" for f in pool)}), indent=1) + "\n")
    print(f"wrote {args.output}: {truth.lines} lines, {truth.bytes} bytes "
          f"({truth.bytes / max(truth.lines, 1):.0f} B/line), {len(truth.written)} failures from a pool "
          f"of {len(pool)}; ground truth {truth_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
