"""The sdist, the wheel as a user builds it, and the image as docker builds and runs it.

No Docker daemon exists here, so deploy/docker/Dockerfile is played step by step in a sandbox
(bubblewrap, Debian's `bubblewrap`). `FROM python:3.11-slim` is this machine's `/usr` (Debian 12,
as the image's), a copy of its `/etc`, and a fresh Python 3.11 venv first on `PATH` with nothing
in it but pip, as the image's Python. WORKDIR, COPY, ENV and USER are done as docker does them
and every RUN is run by `/bin/sh -c` as root in that root, in order: a broken step fails here.

The build context is the sdist, unpacked (`python -m build --sdist`, isolated): that proves the
sdist holds all the wheel build needs, and the build stage's `pip wheel .` — pip's isolated
build, with nothing preinstalled — starts from a tree without a precompiled catalog, so the
hook really compiles one (the one costly step here: one to two minutes on 2 cores; done once).

The final stage is then run as `docker run --read-only -e SGLANG_MATCHER_FROM_BEGINNING=true -v
examples/logs:/var/log/sglang:ro` would: read-only root, uid 10001, the two volumes, a network of
its own. Its first start, with an empty cache, must load the wheel's precompiled catalog and be
ready (`/readyz`) within 2 s of its CPU time (and 15 s of wall time on this shared machine:
READY_WALL_WITHIN says why); the HEALTHCHECK command must pass against it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from debian import require_tool
from sandbox import Stage, dockerfile_steps, new_root, sandbox

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "deploy" / "docker" / "Dockerfile"
SEED = "4e2cdd4d6209ebbd"
READY_WITHIN = 2.0  # seconds of CPU, the first start from the wheel (issue 33)
# Seconds of wall time for the same start. On a quiet machine it is under 2 s (`bench/run.py
# --quick`'s target "first start, empty cache: exec → /readyz"); here the suite shares 2 cores
# with its other worker and other jobs, and this start took 5.6 s at load 13. A start that
# compiles the catalog instead is ready after about 65 s (bench/results/start.json), so this bound
# still tells the two apart at any load this machine has shown.
READY_WALL_WITHIN = 15.0


def play(dockerfile: Path, context: Path, work: Path) -> list[Stage]:
    """Every instruction of `dockerfile`, in order, with `context` as the build context."""
    stages: list[Stage] = []
    for word, args in dockerfile_steps(dockerfile.read_text()):
        started = time.monotonic()
        if word == "FROM":
            base, _, name = args.partition(" AS ")
            n = len(stages)
            stage = Stage(name.strip() or str(n), base.strip(), work / f"stage{n}",
                          work / f"stage{n}-python")
            new_root(stage.root)
            # The image's Python: 3.11, pip and nothing else.
            assert base.strip() == f"python:{sys.version_info[0]}.{sys.version_info[1]}-slim"
            subprocess.run([sys.executable, "-m", "venv", str(stage.python)], check=True)
            stages.append(stage)
            key = word
        else:
            stage = stages[-1]
            key = f"{word} {args[:60]}"
        if word == "WORKDIR":
            stage.workdir = args
            (stage.root / args.lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif word == "ENV":
            stage.env.update(dict(p.split("=", 1) for p in shlex.split(args)))
        elif word == "USER":
            stage.user = args
        elif word == "COPY":
            words = args.split()
            source_root = context
            if words[0].startswith("--from="):
                [source_root] = [s.root for s in stages if s.name == words[0][7:]]
                words = words[1:]
            *sources, dest = words
            for source in sources:
                src = source_root / source.lstrip("/")
                into = dest if dest.startswith("/") else f"{stage.workdir}/{dest}"
                target = stage.root / into.lstrip("/")
                if dest.endswith("/") and src.is_file():
                    target = target / src.name
                if src.is_dir():
                    shutil.copytree(src, target, dirs_exist_ok=True)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, target)
        elif word == "RUN":
            assert stage.user == "0", "a RUN after USER: the sandbox plays RUN steps as root"
            out = subprocess.run([*sandbox(stage), "/bin/sh", "-c", args], capture_output=True,
                                 text=True, timeout=900)
            assert out.returncode == 0, f"RUN {args}\nexit {out.returncode}\n{out.stdout}\n" \
                                        f"{out.stderr}"
        stage.seconds[key] = time.monotonic() - started
    return stages


# The image, run: this script is the sandbox's PID 1's child, as root; it starts ENTRYPOINT +
# CMD as the image's USER and reports what it saw, as JSON.
DRIVER = r"""
import json, os, signal, subprocess, sys, threading, time, urllib.request
argv, health, user, want = json.loads(sys.argv[1])
drop = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]
started = time.monotonic()
proc = subprocess.Popen(drop + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
events, logs = [], []
threading.Thread(target=lambda: events.extend(proc.stdout), daemon=True).start()
threading.Thread(target=lambda: logs.extend(proc.stderr), daemon=True).start()
ready = cpu = None
while time.monotonic() - started < 60 and proc.poll() is None:
    try:
        urllib.request.urlopen("http://127.0.0.1:9464/readyz", timeout=1)
        ready = time.monotonic() - started
        fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        break
    except Exception:
        time.sleep(0.01)
healthy = subprocess.run(drop + health).returncode
while time.monotonic() - started < 60 and not any(want in e for e in events):
    time.sleep(0.05)
proc.send_signal(signal.SIGTERM)
code = proc.wait(timeout=30)
time.sleep(0.2)
print(json.dumps({"ready": ready, "cpu": cpu, "healthcheck": healthy, "exit": code,
                  "events": events, "logs": logs}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Any]:
    """The sdist, then the Dockerfile played on it: the stages, the wheel, what each step took."""
    require_tool("bwrap", "bubblewrap")
    if os.geteuid() != 0:
        pytest.skip("plays the image's RUN steps as its root (useradd, chown): needs root")
    work = tmp_path_factory.mktemp("image")
    seconds: dict[str, float] = {}
    started = time.monotonic()
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(REPO)],
                   check=True, capture_output=True, timeout=600)
    [sdist] = dist.glob("*.tar.gz")
    seconds["sdist"] = time.monotonic() - started
    with tarfile.open(sdist) as tar:
        tar.extractall(work / "unpacked", filter="data")
    [context] = (work / "unpacked").iterdir()
    stages = play(DOCKERFILE, context, work)
    [wheel] = (stages[0].root / "wheels").glob("*.whl")
    seconds.update({f"{s.name}: {k}": v for s in stages for k, v in s.seconds.items()})
    print(json.dumps(seconds, indent=1))
    return {"sdist": sdist, "context": context, "stages": stages, "wheel": wheel,
            "seconds": seconds}


def shipped(root: Path) -> set[str]:
    """What of the checkout must reach the wheel: every catalog file and module, found on disk
    (other work adds files there all the time: nothing here lists them by name)."""
    return {str(p.relative_to(root)) for top in ("matcher", "patterns")
            for p in (root / top).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and "_precompiled" not in p.parts
            and p.suffix != ".pyc"}


def test_the_sdist_holds_the_tree_and_the_wheel_everything_with_the_precompiled_catalog(built):
    """The sdist has every module and catalog file of the checkout, and no precompiled catalog;
    the wheel built from it (pip's isolated build) has them all — patterns/ as matcher/_patterns
    — and `matcher/_precompiled` for its platform, and is tagged for it."""
    with tarfile.open(built["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert shipped(REPO) <= names
    assert not any(n.startswith("matcher/_precompiled") for n in names)
    with zipfile.ZipFile(built["wheel"]) as whl:
        inside = set(whl.namelist())
    expected = {n.replace("patterns/", "matcher/_patterns/", 1) for n in shipped(REPO)}
    assert expected <= inside, sorted(expected - inside)[:5]
    assert {"matcher/_precompiled/manifest.json", "matcher/_precompiled/engine.bin"} <= inside
    assert re.search(r"-cp3\d+-cp3\d+-(manylinux|linux)_\w+\.whl$", built["wheel"].name)
    print(f"wheel {built['wheel'].name}: {built['wheel'].stat().st_size / 1e6:.1f} MB")


def test_the_image_runs_read_only_as_its_user_and_is_ready_at_once(built, tmp_path):
    """The final stage as `docker run --read-only` runs it: uid 10001, the state and cache
    volumes empty, sglang's real logs mounted read-only. Ready in under 2 s with the full
    precompiled catalog (not a compile) — 2 s of its CPU time, 15 s of wall time on this shared
    machine —, the seed's failure among its events, HEALTHCHECK passing, exit 0 on SIGTERM."""
    final = built["stages"][-1]
    every = dockerfile_steps(DOCKERFILE.read_text())
    steps = dict(every[max(i for i, (w, _) in enumerate(every) if w == "FROM"):])
    volumes = json.loads(steps["VOLUME"])
    entry, cmd = json.loads(steps["ENTRYPOINT"]), json.loads(steps["CMD"])
    health = json.loads(steps["HEALTHCHECK"].split(" CMD ", 1)[1])
    uid, _, gid = final.user.partition(":")
    binds = []
    for n, inside in enumerate(volumes):  # a new volume: the image's directory, as docker does
        host = tmp_path / f"volume{n}"
        image = final.root / inside.lstrip("/")
        shutil.copytree(image, host, symlinks=True)
        for p in [host, *host.rglob("*")]:
            owner = (image / p.relative_to(host)).lstat()
            os.lchown(p, owner.st_uid, owner.st_gid)
        binds.append((host, inside))
    (final.root / "var" / "log" / "sglang").mkdir(parents=True, exist_ok=True)  # docker's -v
    final.env["SGLANG_MATCHER_FROM_BEGINNING"] = "true"
    final.env["HOME"] = "/nonexistent"
    logs = REPO / "examples" / "logs"
    want = f'"pattern_id": "{SEED}"'  # the seed's failure, among the quick start's
    argv = [*sandbox(final, read_only=True, binds=tuple(binds), own_network=True,
                     ro_binds=((logs, "/var/log/sglang"),)),
            "python", "-c", DRIVER, json.dumps([entry + cmd, health, [uid, gid], want])]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    logs_by_event = [json.loads(x) for x in seen["logs"] if x.startswith("{")]
    started = next((x for x in logs_by_event if x.get("event") == "started"), None)
    assert started is not None, seen["logs"]
    assert started["precompiled"] == "used", started
    # Ready within 2 s of the daemon's own CPU time (utime + stime until /readyz said 200): on
    # a quiet machine its wall time, on a loaded one the part that is the daemon's doing. A
    # compile of the catalog would take ~30 s of it. The wall time, with room for the load.
    assert seen["ready"] is not None and seen["cpu"] < READY_WITHIN, seen
    assert seen["ready"] < READY_WALL_WITHIN, seen
    events = [json.loads(x) for x in seen["events"]]
    assert SEED in {e.get("pattern_id") for e in events}, events
    assert (seen["healthcheck"], seen["exit"]) == (0, 0), seen["logs"]
    written = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()}
    assert written and all(p.startswith(("volume0/", "volume1/")) for p in written)
    print(f"first start from the image: ready in {seen['ready']:.2f} s ({seen['cpu']:.2f} s "
          f"of CPU), {started['patterns']} patterns")


def test_the_installed_command_works_from_any_directory(built, tmp_path):
    """The final stage's installed `sglang-matcher`, from another directory: the seed's failure
    is found with its capture, and the whole shipped catalog lints clean, every file of it."""
    cli = built["stages"][-1].python / "bin" / "sglang-matcher"
    log = tmp_path / "server.log"
    log.write_text((REPO / "examples" / "logs" / "int8-mamba-radix-cache.log").read_text())
    env = {**os.environ, "SGLANG_MATCHER_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": ""}
    run = subprocess.run([cli, "scan", "--format", "json", str(log)], cwd=tmp_path,
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 1, run.stderr
    events = [json.loads(x) for x in run.stdout.splitlines()]
    assert any((e["pattern_id"], e.get("captures")) == (SEED, {"arg1": "'lru'"})
               for e in events), events
    lint = subprocess.run([cli, "catalog", "lint"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    files = sum(1 for p in (REPO / "patterns").rglob("*") if p.suffix in (".json", ".jsonl"))
    assert lint.returncode == 0, lint.stdout
    assert f"in {files} files, 0 problems" in lint.stdout


def test_no_compiler_or_build_tool_reaches_the_final_stage(built):
    """The final stage's Python holds the installed wheel and its dependencies: no hatchling,
    no build, no wheel sources; the build stage's tree is not copied."""
    final = built["stages"][-1]
    site = next(final.python.glob("lib/python3*/site-packages"))
    names = {p.name.split("-")[0].lower() for p in site.iterdir()}
    assert "matcher" in names and not names & {"hatchling", "build", "setuptools_scm"}
    assert not (final.root / "src").exists() and not (final.root / "wheels").exists()
    size = sum(p.stat().st_size for p in final.python.rglob("*") if p.is_file())
    print(f"final stage's Python with the wheel installed: {size / 1e6:.0f} MB")
