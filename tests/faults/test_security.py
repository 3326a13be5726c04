"""What a hostile neighbour can do to a running daemon's HTTP port, and how the deploy files
run it. (Request parsing, methods, paths and reflection: `tests/test_http.py`.)"""

from __future__ import annotations

import configparser
import re
import socket
import urllib.request
from pathlib import Path

import yaml
from faultkit import served_url
from watch_harness import REPO, DaemonProcess, wait_for


def _threads(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))


def _healthz(url: str) -> int:
    return urllib.request.urlopen(url + "/healthz", timeout=10).status


def test_idle_and_oversized_connections_cannot_exhaust_the_daemon(tmp_path):
    """50 connections that send nothing, and GETs announcing a terabyte body: /healthz still
    answers at once, no body is read, and the idle connections are dropped after the request
    timeout, so their threads do not pile up."""
    log = tmp_path / "server.log"
    log.touch()
    with DaemonProcess(tmp_path, [str(log)], "--metrics-addr", "127.0.0.1:0") as d:
        url = wait_for(lambda: served_url(d), 20)
        host, port = url.removeprefix("http://").split(":")
        baseline = _threads(d.proc.pid)
        idle = [socket.create_connection((host, int(port))) for _ in range(50)]
        try:
            assert _healthz(url) == 200
            for _ in range(2):
                with socket.create_connection((host, int(port)), timeout=10) as s:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 1000000000000\r\n\r\n" + b"x" * 65536)
                    answer = s.recv(4096)
                assert answer.startswith((b"HTTP/1.0 400", b"HTTP/1.1 400"))
            assert _healthz(url) == 200
            # The server's request timeout (10 s) closes them from its side.
            assert wait_for(lambda: _threads(d.proc.pid) <= baseline + 2, 30)
            closed = sum(1 for s in idle if _closed_by_peer(s))
        finally:
            for s in idle:
                s.close()
        assert d.stop() == 0
    assert closed == 50


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except OSError:
        return True


def test_deploy_files_never_run_the_daemon_as_root():
    """Every systemd unit, container image and Kubernetes container of the matcher in deploy/
    runs it as an unprivileged user: it reads logs and serves a port, nothing that needs root."""
    deploy = REPO / "deploy"
    checked = []
    for unit in sorted(deploy.rglob("*.service")):
        cp = configparser.ConfigParser(strict=False, interpolation=None)
        cp.optionxform = str
        cp.read_string(unit.read_text())
        service = cp["Service"]
        dynamic = service.get("DynamicUser", "no").lower() in ("yes", "true", "1")
        assert dynamic or service.get("User", "root") not in ("root", "0"), unit
        checked.append(unit)
    for dockerfile in sorted(deploy.rglob("Dockerfile*")):
        users = re.findall(r"^USER\s+(\S+)", dockerfile.read_text(), re.M)
        assert users and users[-1].split(":")[0] not in ("root", "0"), dockerfile
        checked.append(dockerfile)
    for manifest in sorted([*deploy.rglob("*.yaml"), *deploy.rglob("*.yml")]):
        for doc in yaml.safe_load_all(manifest.read_text()):
            for spec in _pod_specs(doc):
                for c in [*spec.get("containers", []), *spec.get("initContainers", [])]:
                    if "matcher" not in f"{c.get('name')} {c.get('image')}":
                        continue  # sglang's own server container is not ours to run
                    ctx = {**(spec.get("securityContext") or {}), **(c.get("securityContext") or {})}
                    assert _unprivileged(ctx), f"{manifest}: container {c.get('name')}"
                    checked.append(manifest)
    assert checked, "no deploy file found"


def _unprivileged(ctx: dict) -> bool:
    """Not root; or uid 0 in name only (kubelet's 0640 root-owned pod logs): every capability
    dropped — no DAC override, so file modes apply — and no way to gain one back."""
    if ctx.get("runAsNonRoot") is True or ctx.get("runAsUser", 0) != 0:
        return True
    return (ctx.get("capabilities", {}).get("drop") == ["ALL"]
            and not ctx.get("capabilities", {}).get("add")
            and ctx.get("allowPrivilegeEscalation") is False
            and ctx.get("privileged", False) is False)


def _pod_specs(doc):
    """Pod specs inside a Kubernetes object (Pod, Deployment, DaemonSet, Job, …)."""
    if not isinstance(doc, dict):
        return
    if "containers" in doc:
        yield doc
        return
    for value in doc.values():
        if isinstance(value, dict):
            yield from _pod_specs(value)
        elif isinstance(value, list):
            for item in value:
                yield from _pod_specs(item)
