"""`pip install .` gives a command that works from any directory, with the catalog inside the wheel."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED_LINE = (
    "ValueError: --enable-int8-mamba-checkpoint only supports the built-in mamba radix cache; "
    "--radix-cache-backend='lru' is not int8-aware. Omit --radix-cache-backend.\n"
)


def test_wheel_install_runs_from_another_directory(tmp_path):
    env_dir = tmp_path / "venv"
    # System site-packages provide the dependencies; the package itself is built and installed.
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-deps", str(REPO)], check=True,
                   cwd=tmp_path, timeout=600)
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
