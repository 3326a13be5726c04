"""`HOST:PORT`: how the daemon's listen addresses are written, read once for the settings'
checks (`matcher.config`) and for binding (`matcher.http`)."""

from __future__ import annotations


def parse_address(addr: str) -> tuple[str, int]:
    """`HOST:PORT`, `[V6]:PORT` or `:PORT` (all interfaces) → (host, port); ValueError if not."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"not an address of the form HOST:PORT: {addr!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"an IPv6 address needs brackets, as in [::1]:9400: {addr!r}")
    return host or "0.0.0.0", int(port_text)
