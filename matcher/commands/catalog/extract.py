"""`sglang-matcher catalog extract`: a catalog made from sglang's source, one record per
raise/assert/log site: of one source tree (`--sglang-source`, `--installed`), or of several
releases merged into one (`--wheel` …, `--versions A..B`)."""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from matcher.catalog import CatalogError
from matcher.commands.common import UsageError
from matcher.commands.parser import EXIT_OK, Subcommands, exit_codes, positive_int

if TYPE_CHECKING:
    from matcher.catalog.extract import Extraction, SourceFiles, Stats
    from matcher.catalog.releases import ReleaseExtraction


def register(sub: Subcommands) -> None:
    extract = sub.add_parser(
        "extract", help="make a catalog from sglang's source: one record per raise/assert/log site",
        description="Make a catalog from sglang's source: one record per raise, assert and "
                    "logged error site, with the fix its guard condition proves where one is.",
        epilog=exit_codes("0 written", "2 the source cannot be read, no release could be "
                          "extracted, or the output cannot be written"))
    where = extract.add_mutually_exclusive_group(required=True)
    where.add_argument("--sglang-source", type=Path, metavar="DIR",
                       help="a checkout (python/sglang), a site-packages dir, or the package dir")
    where.add_argument("--installed", action="store_true",
                       help="the sglang installed in this Python environment")
    where.add_argument("--wheel", type=Path, metavar="FILE", action="append",
                       help="an sglang wheel (.whl); repeat it for several releases, merged "
                            "into one catalog (one record per id, sglangVersions as ranges)")
    where.add_argument("--versions", metavar="A..B",
                       help="every final and .postN release of sglang on PyPI from A to B "
                            "(inclusive, PEP 440 order), each fetched with `pip download "
                            "--no-deps` into --wheel-dir, merged into one catalog")
    _options(extract)
    extract.set_defaults(func=lambda args: cmd_extract(args, sys.stdout))


def _options(extract: argparse.ArgumentParser) -> None:
    extract.add_argument("--wheel-dir", type=Path, metavar="DIR",
                         help="where --versions keeps the wheels, and extractions are cached "
                              "(default: $SGLANG_MATCHER_CACHE_DIR/wheels, else "
                              "~/.cache/sglang-matcher/wheels)")
    extract.add_argument("--jobs", type=positive_int, metavar="N",
                         help="releases extracted at once (default: the CPU count)")
    extract.add_argument("-o", "--output", type=Path, metavar="OUT.jsonl",
                         help="write the records here (and the counts to OUT.stats.toml); "
                              "default: records on stdout, counts on stderr")
    extract.add_argument("--version", dest="sglang_version", metavar="V",
                         help="the sglang version (default: read from the source)")
    extract.add_argument("--severity", action="append", choices=("error", "warning", "failure"),
                         help="keep only records of this severity (repeatable; default: all); "
                              "`failure`: the warnings that report a failure (an exception "
                              "caught and printed, a retry given up)")
    extract.add_argument("--no-flow", dest="flow", action="store_false",
                         help="do not follow messages into the release's helpers that raise or "
                              "log them (`raise_error_or_warn(…, msg)`)")
    extract.add_argument("--curated", type=Path, metavar="DIR",
                         help="leave out generated records that would take the example lines "
                              "of a record here (the built-in catalog's sglang/curated)")
    extract.add_argument("--server-args", type=Path, metavar="FILE",
                         help="each release's flags, for the fixes derived from guard "
                              "conditions (default: the built-in sglang/generated/"
                              "server-args.json.gz; written by `catalog server-args`)")


def cmd_extract(args: argparse.Namespace, out: TextIO) -> int:
    if args.wheel is not None or args.versions is not None:
        return _extract_releases(args, out)
    return _extract_tree(args, out)


# -- what both forms share ----------------------------------------------------------------------

def _selected(result: Extraction, severity: Sequence[str] | None) -> Extraction:
    """`result` without the records `--severity` does not keep."""
    from matcher.catalog import extract

    if not severity:
        return result
    return result.without((r["id"] for r in result.records if not extract.selected(r, severity)),
                          extract.NOT_SELECTED)


def _deferred(records: Sequence[dict[str, Any]], curated_dir: Path) -> list[str]:
    """The ids of the generated records that a curated record's examples would go to."""
    from matcher.catalog import extract
    from matcher.catalog.load import load_paths

    curated = load_paths([curated_dir], "curated")
    if curated.issues:
        raise CatalogError(list(curated.issues))
    _, dropped = extract.defer_to(records, curated.records)
    return list(dropped)


def _write(output: Path, records: Iterable[dict[str, Any]], stats_text: str) -> Path:
    """The records to `output` as JSON lines, the counts beside it (OUT.stats.toml)."""
    from matcher.catalog import extract

    stats_path = output.with_name(output.name.removesuffix(".jsonl") + ".stats.toml")
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.writelines(extract.iter_jsonl(records))
        stats_path.write_text(stats_text, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror}") from e
    return stats_path


def remediate(records: Sequence[dict[str, Any]], table_path: Path | None,
              report: TextIO) -> None:
    """Each generated record's fix, derived from its guard condition and its newest release's
    flags (`matcher.catalog.remedy`), in place."""
    from matcher.catalog import remedy
    from matcher.catalog.server_args import ServerArgsTable, default_path
    from matcher.catalog.stats import fix_share

    path = table_path or default_path()
    try:
        table: ServerArgsTable | None = ServerArgsTable.load(path)
    except FileNotFoundError:
        if table_path is not None:
            raise UsageError(f"{path}: no such file (write it with `sglang-matcher catalog "
                             "server-args`)") from None
        table = None
        report.write(f"no table of server arguments at {path}: fixes in words only\n")
    except (OSError, ValueError, KeyError) as e:
        raise UsageError(f"cannot read {path}: {e}") from e
    kinds = remedy.remediate_all(records, table)
    report.write(f"fixes: flags {kinds['flags']:,}, unevaluable {kinds['unevaluable']:,}, "
                 f"words {kinds['words']:,}{fix_share(kinds)}\n")


def _summary(stats: Stats, *, version: str, label: str) -> str:
    def kinds(counts: dict[str, int]) -> str:
        named = ("raise", "assert", "log")
        shown = [*named, *sorted(set(counts) - set(named))]  # "frame": bare raise/assert records
        return f"{sum(counts.values())} (" + ", ".join(
            f"{k} {counts.get(k, 0)}" for k in shown) + ")"

    msg = sum(stats.with_message.get(k, 0) for k in ("raise", "assert"))
    got = sum(stats.covered.get(k, 0) for k in ("raise", "assert"))
    lines = [
        (f"sglang {version} ({label}): {stats.files} modules read"
         + "".join(f", {n} files skipped: {why}" for why, n in stats.files_skipped.items())),
        f"sites seen:            {kinds(dict(stats.sites))}",
        f"with a string message: {kinds(dict(stats.with_message))}",
        f"records made:          {kinds(dict(stats.records))}",
        (f"coverage: {got} of {msg} raise/assert sites with a string message are recognized "
         f"({100 * stats.coverage:.2f}%)"),
        "skipped, by reason:",
        *(f"  {n:>6}  {why}" for why, n in sorted(stats.skipped.items(), key=lambda kv: -kv[1])),
    ]
    return "\n".join(lines) + "\n"


# -- one source tree ----------------------------------------------------------------------------

def _read_tree(args: argparse.Namespace) -> tuple[SourceFiles, str]:
    """The sglang source `--installed` or `--sglang-source` names, and how the stats say it."""
    from matcher.catalog import extract

    try:
        if args.installed:
            pkg, installed_version = extract.find_installed()
            source = extract.read_tree(pkg)
            return extract.SourceFiles(source.files, installed_version or source.version,
                                       source.excluded), "--installed"
        return extract.read_tree(args.sglang_source), f"--sglang-source {args.sglang_source}"
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(f"cannot read sglang's source: {e}") from e


def _extract_tree(args: argparse.Namespace, out: TextIO) -> int:
    from matcher.catalog import extract

    source, label = _read_tree(args)
    version = args.sglang_version or source.version
    if not version:
        raise UsageError("cannot tell the sglang version from the source: give --version V")
    if not source.files:
        raise UsageError("no sglang Python source found there")
    result = extract.extract_files(source.files, version=version, flow=getattr(args, "flow", True))
    result = extract.Extraction(result.records, result.stats + extract.Stats(
        files_skipped={"tests and benchmarks": source.excluded} if source.excluded else {}))
    result = _selected(result, args.severity)
    if args.severity:
        label += "".join(f" --severity {s}" for s in args.severity)
    if args.curated is not None:
        result = result.without(_deferred(result.records, args.curated), extract.DEFERRED)
        label += f" --curated {args.curated}"
    remediate(result.records, args.server_args, sys.stderr)
    report = out if args.output else sys.stderr
    if args.output:
        stats_path = _write(args.output, result.records,
                            extract.stats_toml(result.stats, version=version, source=label))
    else:
        out.writelines(extract.iter_jsonl(result.records))
    report.write(_summary(result.stats, version=version, label=label))
    if args.output:
        report.write(f"wrote {args.output} ({len(result.records)} records) and {stats_path}\n")
    return EXIT_OK


# -- several releases, merged -------------------------------------------------------------------

def _extracted_releases(args: argparse.Namespace,
                        skipped: list[tuple[str, str]]) -> tuple[list[ReleaseExtraction], str]:
    """Each release `--wheel` or `--versions` names, extracted (those that could not be
    fetched added to `skipped`), and how the stats say them."""
    from matcher.catalog import releases

    wheel_dir = args.wheel_dir or releases.default_wheel_dir()
    try:
        if args.versions is not None:
            listed = releases.list_releases(args.versions)
            skipped.extend(listed.skipped)
            wheels = []
            for version in listed.wanted:
                try:
                    wheels.append(releases.download(version, wheel_dir))
                except releases.ReleaseError as e:
                    skipped.append((version, str(e)))
            label = f"--versions {args.versions}"
        else:
            if args.sglang_version and len(args.wheel) > 1:
                raise UsageError("--version names one release: give it with one --wheel only")
            wheels = list(args.wheel)
            label = " ".join(f"--wheel {w.name}" for w in sorted(wheels, key=lambda w: w.name))
        if not wheels:
            raise UsageError("no wheel to extract" + "".join(
                f"; {v}: {why}" for v, why in skipped))
        done = releases.extract_wheels(wheels, cache_dir=wheel_dir, jobs=args.jobs,
                                       flow=getattr(args, "flow", True))
    except releases.ReleaseError as e:
        raise UsageError(str(e)) from e
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(f"cannot read sglang's source: {e}") from e
    return done, label


def _releases_in_order(args: argparse.Namespace,
                       done: list[ReleaseExtraction]) -> list[ReleaseExtraction]:
    """The extractions by release, oldest first (`--version` renames a single wheel's); two of
    one release are a usage error."""
    from matcher.catalog import releases
    from matcher.catalog.versions import version_key

    if args.sglang_version:
        done = [releases.ReleaseExtraction(args.sglang_version, d.source, d.sha256, d.extraction)
                for d in done]
    seen: dict[str, str] = {}
    for d in done:
        if d.version in seen:
            raise UsageError(f"{seen[d.version]} and {d.source} are both sglang {d.version}")
        seen[d.version] = d.source
    return sorted(done, key=lambda d: version_key(d.version))


def _extract_releases(args: argparse.Namespace, out: TextIO) -> int:
    """`--wheel` (repeated) or `--versions A..B`: one catalog merged over the releases."""
    from matcher.catalog import extract, releases

    report = out if args.output else sys.stderr
    skipped: list[tuple[str, str]] = []
    done, label = _extracted_releases(args, skipped)
    done = _releases_in_order(args, done)
    per = {d.version: _selected(d.extraction, args.severity) for d in done}
    if args.severity:
        label += "".join(f" --severity {s}" for s in sorted(set(args.severity)))
    merged = releases.merge_releases({v: e.records for v, e in per.items()})
    if args.curated is not None:
        dropped = _deferred(merged, args.curated)
        gone = set(dropped)
        merged = [r for r in merged if r["id"] not in gone]
        per = {v: e.without(dropped, extract.DEFERRED) for v, e in per.items()}
        label += f" --curated {args.curated}"
    remediate(merged, args.server_args, report)
    if args.output:
        stats_path = _write(args.output, merged, releases.stats_toml(
            [(d.version, d.source, d.sha256, per[d.version].stats, len(per[d.version].records))
             for d in done],
            records=merged, command=f"sglang-matcher catalog extract {label}",
            skipped_releases=skipped))
    else:
        out.writelines(extract.iter_jsonl(merged))
    _report_releases(report, done, per, skipped, merged, label)
    if args.output:
        report.write(f"wrote {args.output} ({len(merged)} records) and {stats_path}\n")
    return EXIT_OK


def _report_releases(report: TextIO, done: Sequence[ReleaseExtraction],
                     per: dict[str, Extraction], skipped: Sequence[tuple[str, str]],
                     merged: Sequence[dict[str, Any]], label: str) -> None:
    from matcher.catalog import extract

    total = extract.Stats()
    for d in done:
        st = per[d.version].stats
        total = total + st
        report.write(f"sglang {d.version} ({d.source}): {st.files} modules, "
                     f"{sum(st.sites.values())} sites, {len(per[d.version].records)} records\n")
    for version, why in skipped:
        report.write(f"sglang {version}: skipped: {why}\n")
    report.write(_summary(total, version=f"{len(done)} releases", label=label))
    templates = {r["errorMessage"] for r in merged} - {None}  # a frame record has none
    report.write(f"{len(merged)} records, {len(templates)} distinct "
                 f"templates, over {len(done)} releases ({done[0].version}..{done[-1].version})\n")
