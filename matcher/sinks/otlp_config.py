"""The OTLP exporter's settings from the environment and their checks: what `build` needs of
it whether or not an endpoint is set (`matcher.sinks.otlp` holds the exporter; it imports the
protobuf messages, which only a daemon that exports needs to load).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from matcher import __version__
from matcher.redact import Redactor

SERVICE_NAME = "sglang-matcher"
# The Kubernetes resource attributes, from the environment variables the manifests set through
# the downward API (deploy/k8s): pod, namespace, node, pod UID; the container name is a literal.
K8S_ENV = {
    "k8s.pod.name": "POD_NAME",
    "k8s.namespace.name": "POD_NAMESPACE",
    "k8s.node.name": "NODE_NAME",
    "k8s.pod.uid": "POD_UID",
    "k8s.container.name": "CONTAINER_NAME",
}


# -- configuration from the environment ---------------------------------------------------------

def _w3c_pairs(value: str, what: str) -> dict[str, str]:
    """`k1=v1,k2=v2` with percent-encoded values (W3C Baggage octets), as the OpenTelemetry
    environment variables write them; ValueError on a member that is not `key=value`."""
    out: dict[str, str] = {}
    for member in value.split(","):
        if not member.strip():
            continue
        key, eq, val = member.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{what}: {member.strip()!r} is not key=value")
        out[key.strip()] = unquote(val.strip(), errors="strict")
    return out


def resolve_endpoint(configured: str | None,
                     environ: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """The logs URL to POST to, and where it came from (for errors).

    The `otlp_endpoint` setting wins; without it, the OpenTelemetry variables:
    `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` is used as it is (the full URL), else
    `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/logs` appended — unless
    `OTEL_EXPORTER_OTLP_[LOGS_]PROTOCOL` names a protocol this exporter does not speak (`grpc`,
    `http/json`): then those variables are meant for another exporter and are left alone."""
    if configured:
        return configured, "setting 'otlp_endpoint'"
    env = os.environ if environ is None else environ
    protocol = env.get("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip() != "http/protobuf":
        return None, ""
    if env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"):
        var = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
        return env[var], f"environment {var}"
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        base = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        return base.rstrip("/") + "/v1/logs", "environment OTEL_EXPORTER_OTLP_ENDPOINT"
    return None, ""


def env_headers(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`OTEL_EXPORTER_OTLP_HEADERS`, overridden by `OTEL_EXPORTER_OTLP_LOGS_HEADERS`."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for var in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_LOGS_HEADERS"):
        if env.get(var):
            out.update(_w3c_pairs(env[var], var))
    return out


def resource_attributes(environ: Mapping[str, str] | None = None,
                        ) -> tuple[dict[str, str], str | None]:
    """The resource every record is sent under, and why `OTEL_RESOURCE_ATTRIBUTES` was set
    aside (None: it was not).

    `service.name`, `service.version`, `host.name`, then the `k8s.*` attributes from `K8S_ENV`,
    then `OTEL_RESOURCE_ATTRIBUTES` over them (a value that does not decode is discarded whole,
    as the specification says), then `OTEL_SERVICE_NAME` over `service.name`."""
    env = os.environ if environ is None else environ
    attrs = {"service.name": SERVICE_NAME, "service.version": __version__,
             "host.name": socket.gethostname()}
    for key, var in K8S_ENV.items():
        if env.get(var):
            attrs[key] = env[var]
    problem = None
    if env.get("OTEL_RESOURCE_ATTRIBUTES"):
        try:
            attrs.update(_w3c_pairs(env["OTEL_RESOURCE_ATTRIBUTES"], "OTEL_RESOURCE_ATTRIBUTES"))
        except (ValueError, UnicodeDecodeError) as e:
            problem = str(e)
    if env.get("OTEL_SERVICE_NAME"):
        attrs["service.name"] = env["OTEL_SERVICE_NAME"]
    return attrs, problem


def check_url(url: str, redactor: Redactor) -> str | None:
    """Why `url` cannot be an OTLP/HTTP endpoint (None: it can)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        return f"{redactor.text(url)!r} is not a URL: {e}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{redactor.text(url)!r} is not an http:// or https:// URL with a host"
    if "@" in parts.netloc:
        return (f"{redactor.text(url)!r} has credentials in it: give them as a header "
                "(otlp_headers, OTEL_EXPORTER_OTLP_HEADERS)")
    return None
