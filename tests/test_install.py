"""`pip install .` gives a command that works from any directory, with the catalog inside the wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
import venv
from pathlib import Path

from matcher import precompiled

REPO = Path(__file__).resolve().parents[1]
SEED_LINE = (
    "ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
    "--radix-cache-backend='lru' is not int8-aware. Omit --radix-cache-backend.\n"
)


def test_wheel_install_runs_from_another_directory(tmp_path):
    env_dir = tmp_path / "venv"
    # The dependencies come from the environment running the tests; the package itself is built
    # and installed. (`system_site_packages` alone is not enough: run inside a venv — as the
    # README's quick start does — it gives the base interpreter's site-packages, not the venv's,
    # and on Debian those hold none of the dependencies.)
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    inner = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    # Appended after the new venv's own site-packages, so its installed copy of the package is
    # the one imported (this environment's editable install is not: a .pth line is a path, and
    # the .pth files inside it are not run).
    (Path(inner) / "outer-environment.pth").write_text("".join(f"{d}\n" for d in ours))
    # The wheel build's hook (hatch_build.py) ships the checkout's precompiled catalog where it
    # fits (CI's, made by `catalog precompile`); it would compile one otherwise, a minute that
    # is skipped here: what is tested is where the package and its catalog land.
    fits = precompiled.check(REPO / "patterns", REPO / "matcher" / "_precompiled")[0] is not None
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", str(REPO)], check=True,
                   cwd=tmp_path, timeout=600,
                   env={**os.environ, **({} if fits else {"SGLANG_MATCHER_SKIP_PRECOMPILE": "1"})})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = elsewhere / "server.log"
    log.write_text("Traceback (most recent call last):\n" + SEED_LINE)
    where = subprocess.run(
        [py, "-c", ("import matcher.catalog as c, matcher; print(matcher.__file__); "
                   "print(c.builtin_patterns_dir())")],
        cwd=elsewhere, capture_output=True, text=True, check=True).stdout.split()
    assert where[0].startswith(str(env_dir)) and where[1].startswith(str(env_dir))
    assert where[1].endswith("matcher/_patterns")
    shipped_compiled = Path(where[0]).parent / "_precompiled"
    assert (shipped_compiled / "manifest.json").is_file() == fits
    cli = env_dir / "bin" / "sglang-matcher"
    run = subprocess.run([cli, "scan", "--format", "json", str(log)], cwd=elsewhere,
                         capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    (event,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert (event["pattern_id"], event["captures"]) == ("4e2cdd4d6209ebbd", {"arg1": "'lru'"})
    lint = subprocess.run([cli, "catalog", "lint"], cwd=elsewhere, capture_output=True, text=True)
    shipped = sum(1 for p in (REPO / "patterns").rglob("*") if p.suffix in (".json", ".jsonl"))
    assert lint.returncode == 0, lint.stdout
    assert f"in {shipped} files, 0 problems" in lint.stdout
