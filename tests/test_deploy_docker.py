"""deploy/docker/Dockerfile, read as docker would (no Docker daemon runs here, so no build).

What can be proven without building: the final stage runs as a non-root user that the image
creates; the entrypoint is the daemon's console script; every COPY source exists and the set
copied is what the wheel build needs (pyproject's packages, force-included catalog, readme); the
default command is one the daemon accepts (`watch --check` with the image's ENV).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

from matcher.source.discovery import why_nothing

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def test_every_stage_is_python_311_slim_and_the_final_one_runs_as_its_own_user():
    """FROM python:3.11-slim throughout; USER is a numeric non-root uid that a RUN creates, set
    after the last RUN (so nothing after it runs as root) and before the entrypoint."""
    froms = [args.split()[0] for word, args in instructions() if word == "FROM"]
    assert froms == ["python:3.11-slim", "python:3.11-slim"]
    stage = final_stage()
    [user] = [args for word, args in stage if word == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid == uid
    runs = " ".join(args for word, args in stage if word == "RUN")
    assert f"--uid {uid}" in runs and f"--gid {gid}" in runs
    words = [word for word, _ in stage]
    assert max(i for i, w in enumerate(words) if w == "RUN") < words.index("USER") < words.index(
        "ENTRYPOINT")


def test_the_entrypoint_is_the_daemon_and_the_default_command_is_accepted(tmp_path):
    """ENTRYPOINT (exec form) is pyproject's console script + `watch`; with the image's ENV (its
    state dir moved to a tmp dir) `watch --check` + CMD exits 0 with the built-in catalog."""
    stage = dict(final_stage())
    entrypoint = json.loads(stage["ENTRYPOINT"])
    cmd = json.loads(stage["CMD"])
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert entrypoint == ["sglang-matcher", "watch"] and "sglang-matcher" in scripts
    env = dict(pair.split("=", 1) for pair in shlex.split(stage["ENV"]))
    assert set(env) == {"SGLANG_MATCHER_STATE_DIR", "SGLANG_MATCHER_CACHE_DIR",
                        "PYTHONUNBUFFERED"}
    assert json.loads(stage["VOLUME"]) == [env["SGLANG_MATCHER_STATE_DIR"],
                                           env["SGLANG_MATCHER_CACHE_DIR"]]
    run_env = {**os.environ, **env, "SGLANG_MATCHER_STATE_DIR": str(tmp_path / "state")}
    run_env.pop("SGLANG_MATCHER_CACHE_DIR")  # keep the test's warm cache
    binary = Path(sys.executable).parent / entrypoint[0]
    out = subprocess.run([str(binary), *entrypoint[1:], "--check", *cmd], capture_output=True,
                         text=True, timeout=120, env=run_env)
    # No /var/log/sglang here: the only thing --check may say is that its glob matches nothing.
    glob = cmd[-1]
    assert (out.returncode, out.stderr) == (
        0, f"sglang-matcher: warning: {glob} matches no file now: {why_nothing(glob)}\n")
    assert out.stdout.startswith("configuration ok: 1 path patterns, state in ")
    assert cmd[-1] == "/var/log/sglang/*.log*" and cmd[:2] == ["--metrics-addr", "0.0.0.0:9464"]


def test_the_copied_files_exist_and_are_what_the_wheel_build_needs():
    """Every COPY source (context = the repository root) exists; together they are pyproject,
    its readme, its wheel packages and the catalog it force-includes — nothing missing."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {"pyproject.toml", project["project"]["readme"], *wheel["packages"],
              *wheel["force-include"], *(h["path"] for h in wheel.get("hooks", {}).values())}
    copied = set()
    for word, args in instructions():
        if word == "COPY" and not args.startswith("--from"):
            *sources, _dest = args.split()
            copied.update(sources)
    for source in copied:
        assert (REPO / source).exists(), source
    assert copied == needed
