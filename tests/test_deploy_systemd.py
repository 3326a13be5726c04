"""deploy/systemd: the units as systemd itself reads them, and the daemon's side of `Type=notify`.

`systemd-analyze` comes from Debian's `systemd` package (.ci/apt-packages). No systemd runs as
PID 1 here, so the notify protocol is checked the way systemd would see it: the test binds the
datagram socket that `$NOTIFY_SOCKET` names and reads what the real daemon process sends.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from debian import require_tool
from watch_harness import DaemonProcess

from matcher.notify import Notifier
from matcher.source.discovery import why_nothing

REPO = Path(__file__).resolve().parents[1]
UNITS = REPO / "deploy" / "systemd"
UNIT_NAMES = ("sglang-matcher.service", "sglang-matcher-journal.service")
INSTALLED = "/usr/local/bin/sglang-matcher"


def systemd_analyze() -> str:
    return require_tool("systemd-analyze", "systemd")


def our_binary() -> str:
    """The console script of the Python running the tests (what `pip install` put there)."""
    path = Path(sys.executable).parent / "sglang-matcher"
    assert path.exists(), f"{path}: install the package first (pip install -e .)"
    return str(path)


def installed_copy(tmp_path: Path, name: str) -> Path:
    """The unit with its binary path pointed at ours: verify checks that ExecStart exists."""
    text = (UNITS / name).read_text()
    assert INSTALLED in text
    out = tmp_path / name
    out.write_text(text.replace(INSTALLED, our_binary()))
    return out


def unit_values(name: str, key: str) -> list[str]:
    return [line.split("=", 1)[1] for line in (UNITS / name).read_text().splitlines()
            if line.startswith(f"{key}=")]


@pytest.mark.parametrize("name", UNIT_NAMES)
def test_systemd_analyze_verify_accepts_the_unit_without_a_word(tmp_path, name):
    """`systemd-analyze verify` exits 0 and prints nothing (an unknown key is only a warning on
    stderr, so silence is the real test); `security --offline` rates the hardening 'OK'."""
    unit = installed_copy(tmp_path, name)
    verified = subprocess.run([systemd_analyze(), "verify", str(unit)], capture_output=True,
                              text=True, timeout=60, cwd=tmp_path)
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", "")
    security = subprocess.run([systemd_analyze(), "security", "--offline=true", str(unit)],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
    level = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", security.stdout)
    assert level is not None, security.stdout + security.stderr
    assert (float(level.group(1)) <= 2.0, level.group(2)) == (True, "OK"), level.group(0)


def test_systemd_analyze_verify_is_not_blind():
    """The check above can fail: a misspelt key and a missing binary are both reported."""
    text = (UNITS / UNIT_NAMES[0]).read_text()
    with_typo = text.replace("WatchdogSec=", "WatchdogSecs=").replace(INSTALLED, our_binary())
    missing = text.replace(INSTALLED, "/nonexistent/sglang-matcher")
    for content, expected in ((with_typo, "Unknown key 'WatchdogSecs'"),
                              (missing, "is not executable")):
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"sm-verify-{os.getpid()}"
        tmp.mkdir(exist_ok=True)
        unit = tmp / "sglang-matcher.service"
        unit.write_text(content)
        try:
            out = subprocess.run([systemd_analyze(), "verify", str(unit)], capture_output=True,
                                 text=True, timeout=60, cwd=tmp)
        finally:
            shutil.rmtree(tmp)
        assert expected in out.stdout + out.stderr


def test_both_units_are_hardened_alike_and_notify_the_manager():
    """The journal unit differs in what it reads, never in how it is confined; both are
    Type=notify with a watchdog, check before start, reload by SIGHUP, keep state in
    StateDirectory= and the compile cache in CacheDirectory=, and may open 65536 descriptors
    (LimitNOFILE=: systemd's default soft limit, 1024, is soon spent on files and connections)."""
    def hardening(name: str) -> list[str]:
        text = (UNITS / name).read_text()
        return text.split("# Hardening:", 1)[1].split("\n", 1)[1].splitlines()
    assert hardening(UNIT_NAMES[0]) == hardening(UNIT_NAMES[1])
    for name in UNIT_NAMES:
        values = {key: unit_values(name, key) for key in (
            "Type", "WatchdogSec", "ExecReload", "DynamicUser", "ProtectSystem",
            "NoNewPrivileges", "CapabilityBoundingSet", "LimitNOFILE")}
        assert values == {"Type": ["notify"], "WatchdogSec": ["60s"],
                          "ExecReload": ["/bin/kill -HUP $MAINPID"], "DynamicUser": ["yes"],
                          "ProtectSystem": ["strict"], "NoNewPrivileges": ["yes"],
                          "CapabilityBoundingSet": [""], "LimitNOFILE": ["65536"]}
        [state] = unit_values(name, "StateDirectory")
        [cache] = unit_values(name, "CacheDirectory")
        assert f"SGLANG_MATCHER_CACHE_DIR=%C/{cache}" in unit_values(name, "Environment")
        [pre] = unit_values(name, "ExecStartPre")
        [start] = unit_values(name, "ExecStart")
        assert shlex.split(pre) == [*shlex.split(start)[:2], "--check", *shlex.split(start)[2:]]
        assert state.startswith("sglang-matcher")


@pytest.mark.parametrize("name", UNIT_NAMES)
def test_the_units_command_line_is_one_the_daemon_accepts(tmp_path, name):
    """ExecStartPre (`watch --check` with ExecStart's arguments), run as the unit would, with the
    unit's Environment= and a state directory: exit 0, the full built-in catalog loaded."""
    [pre] = unit_values(name, "ExecStartPre")
    argv = shlex.split(pre)
    env = {**os.environ, "STATE_DIRECTORY": str(tmp_path / "state")}
    for assignment in unit_values(name, "Environment"):
        key, value = assignment.split("=", 1)
        if key != "SGLANG_MATCHER_CACHE_DIR":  # %C is systemd's; keep the test's warm cache
            env[key] = value
    out = subprocess.run([our_binary(), *argv[1:]], capture_output=True, text=True, timeout=120,
                         env=env)
    # This machine has no /var/log/sglang: the only thing --check may say is that warning.
    globs = [a for a in argv[1:] if a.startswith("/var/log/")]
    assert (out.returncode, out.stderr) == (0, "".join(
        f"sglang-matcher: warning: {g} matches no file now: {why_nothing(g)}\n" for g in globs))
    paths = 0 if "--journal-unit" in argv else 1
    assert out.stdout.startswith(f"configuration ok: {paths} path patterns, state in "
                                 f"{tmp_path / 'state'}, catalog ")


# -- the notify protocol ------------------------------------------------------------------


def bound_socket(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + address[1:] if address.startswith("@") else address)
    sock.settimeout(0.05)
    return sock


def received(sock: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except (TimeoutError, BlockingIOError):
            return out


def test_notifier_speaks_to_path_and_abstract_sockets_and_is_silent_without_one(tmp_path):
    """Datagrams of KEY=VALUE lines to `$NOTIFY_SOCKET`, a path or `@abstract`; the watchdog
    ping at most every WATCHDOG_USEC/2; nothing at all (and no error) when the variable is unset
    or the watchdog belongs to another process."""
    path = str(tmp_path / "notify")
    abstract = f"@sglang-matcher-test-{os.getpid()}"
    for address in (path, abstract):
        with bound_socket(address) as sock:
            n = Notifier.from_env({"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "2000000"})
            assert n.watchdog_interval == 1.0 and n.max_nap(5.0) == 1.0
            sent = [n.ready("following 2 files"), n.watchdog(10.0), n.watchdog(10.5),
                    n.watchdog(11.0), n.stopping()]
            assert sent == [True, True, False, True, True]
            assert received(sock) == ["READY=1\nSTATUS=following 2 files", "WATCHDOG=1",
                                      "WATCHDOG=1", "STOPPING=1"]
            assert n.reloading()
            [reloading] = received(sock)
            assert re.fullmatch(r"RELOADING=1\nMONOTONIC_USEC=\d+", reloading)
            n.close()
    silent = Notifier.from_env({})
    assert (silent.enabled, silent.ready(), silent.watchdog(0.0), silent.max_nap(5.0)) == (
        False, False, False, 5.0)
    other = Notifier.from_env({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000",
                               "WATCHDOG_PID": "1"}, pid=lambda: 2)
    assert (other.watchdog_interval, other.watchdog(0.0)) == (None, False)
    gone = Notifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    assert gone.ready() is False  # dropped, not raised


def test_the_daemon_tells_systemd_ready_watchdog_reloading_and_stopping(tmp_path):
    """The real daemon under `$NOTIFY_SOCKET` with a 0.6 s watchdog: READY=1 once started,
    WATCHDOG=1 about every 0.3 s while idle (its idle nap, 1 s, is cut to that pace), never
    later than the timeout, RELOADING=1 then READY=1 around a SIGHUP, and STOPPING=1 after
    SIGTERM, then exit 0 — the sequence a Type=notify unit needs."""
    address = str(tmp_path / "notify")
    log = tmp_path / "logs" / "server.log"
    log.parent.mkdir()
    log.write_text("hello\n")
    with bound_socket(address) as sock:
        # A 1 s poll (the last --poll-interval wins): idle naps must be cut to the watchdog's pace.
        daemon = DaemonProcess(tmp_path, [str(tmp_path / "logs" / "*.log")], "--poll-interval",
                               "1", env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "600000"})
        with daemon:
            messages = _collect(sock, until=lambda m: m.count("WATCHDOG=1") >= 5, timeout=20)
            assert messages[0] == "READY=1\nSTATUS=following 1 files"
            pings = [t for t, m in messages.timed if m == "WATCHDOG=1"]
            gaps = [b - a for a, b in itertools.pairwise(pings)]
            assert max(gaps) < 0.6, gaps  # within the timeout, always
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGHUP)
            after_hup = _collect(sock, until=lambda m: "READY=1" in m, timeout=20)
            kinds = [m.split("\n")[0] for m in after_hup if m != "WATCHDOG=1"]
            assert kinds == ["RELOADING=1", "READY=1"]
            assert daemon.stop(signal.SIGTERM) == 0
            final = [m for m in received(sock) if m != "WATCHDOG=1"]
            assert final == ["STOPPING=1"]


class _Messages(list):
    timed: list[tuple[float, str]]


def _collect(sock: socket.socket, *, until, timeout: float) -> _Messages:
    out = _Messages()
    out.timed = []
    deadline = time.monotonic() + timeout
    while not until(out):
        if time.monotonic() > deadline:
            pytest.fail(f"not seen within {timeout} s; received: {out}")
        for m in received(sock):
            out.append(m)
            out.timed.append((time.monotonic(), m))
    return out


# -- the install recipe, run ----------------------------------------------------------------


def test_the_install_recipe_gives_the_path_the_units_name_and_systemd_accepts_them(tmp_path):
    """deploy/systemd/install.sh, run as root on a fresh Debian root of its own (a sandbox:
    this machine's /usr, a copy of its /etc, its own /opt and /usr/local): the command is at
    the path ExecStart= names, the units are installed, `systemd-analyze verify` accepts both
    as they are — no path rewritten — and fails once the command is gone. (The units' command
    line itself is run by test_the_units_command_line_is_one_the_daemon_accepts.)

    The package is a wheel of the checkout built without its precompiled catalog (what is
    tested is where things land; tests/test_image.py builds and runs the real wheel)."""
    from sandbox import Stage, new_root, sandbox

    analyze = systemd_analyze()
    if os.geteuid() != 0:
        pytest.skip("installs into /opt and /usr/local of a root of its own: needs root")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(wheels), str(REPO)], check=True, timeout=900, capture_output=True,
                   env={**os.environ, "SGLANG_MATCHER_SKIP_PRECOMPILE": "1"})
    [wheel] = wheels.glob("*.whl")
    host = Stage("host", "debian", tmp_path / "root")
    new_root(host.root)
    usr_local = tmp_path / "usr-local"  # the sandbox's own /usr/local, empty as on a new host
    usr_local.mkdir()
    enter = sandbox(host, binds=((usr_local, "/usr/local"),),
                    ro_binds=((REPO / "deploy", "/src/deploy"), (wheels, "/src/wheels")))
    install = subprocess.run([*enter, "/bin/sh", "/src/deploy/systemd/install.sh",
                              f"/src/wheels/{wheel.name}"], capture_output=True, text=True,
                             timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    assert install.stdout.startswith("installed sglang-matcher 0.1.0 in /opt/sglang-matcher")
    link = usr_local / Path(INSTALLED).relative_to("/usr/local")
    assert os.readlink(link) == "/opt/sglang-matcher/bin/sglang-matcher"
    for name in UNIT_NAMES:
        unit = f"/etc/systemd/system/{name}"
        assert (host.root / unit.lstrip("/")).read_text() == (UNITS / name).read_text()
        verified = subprocess.run([*enter, analyze, "verify", unit], capture_output=True,
                                  text=True, timeout=120)
        assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", ""), name
    link.unlink()
    broken = subprocess.run([*enter, analyze, "verify",
                             f"/etc/systemd/system/{UNIT_NAMES[0]}"], capture_output=True,
                            text=True, timeout=120)
    assert "is not executable" in broken.stdout + broken.stderr  # the check above can fail
