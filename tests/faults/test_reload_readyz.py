"""A SIGHUP that moves `metrics_addr` keeps `/readyz` truthful: the new server says ready once the
daemon is (it said 503 "starting" for ever, and a readiness probe on it never passed)."""

from __future__ import annotations

import signal
import urllib.error
import urllib.request

from prom_harness import free_port
from watch_harness import DaemonProcess, wait_for


def _readyz(port: int) -> int | None:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def test_readyz_on_the_address_a_reload_moved_to_says_ready(tmp_path):
    log = tmp_path / "server.log"
    log.touch()
    port_a, port_b = free_port(), free_port()
    config = tmp_path / "matcher.toml"
    config.write_text(f'metrics_addr = "127.0.0.1:{port_a}"\n')
    d = DaemonProcess(tmp_path, [str(log)], "--config", str(config))
    with d:
        assert wait_for(lambda: _readyz(port_a) == 200, 30)
        config.write_text(f'metrics_addr = "127.0.0.1:{port_b}"\n')
        d.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: b'"reloaded"' in d.err.read_bytes(), 60)
        assert wait_for(lambda: _readyz(port_b) == 200, 10), _readyz(port_b)
        assert _readyz(port_a) is None  # the old server is closed
        assert d.stop() == 0
