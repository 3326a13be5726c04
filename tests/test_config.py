"""Config layering: the TOML file, then SGLANG_MATCHER_* variables, then flags; errors name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from matcher.config import Config, ConfigError, load_config


def test_flags_override_env_override_file(tmp_path):
    f = tmp_path / "m.toml"
    f.write_text('paths = ["/from/file/*.log"]\npoll_interval = 3.0\nfrom_beginning = true\n'
                 'metrics_addr = "127.0.0.1:9000"\n[labels]\ncluster = "a"\n')
    env = {"SGLANG_MATCHER_POLL_INTERVAL": "2", "SGLANG_MATCHER_METRICS_ADDR": "127.0.0.1:9100",
           "SGLANG_MATCHER_LABELS": "cluster=b,zone=z1"}
    cfg = load_config(file=f, environ=env, flags={"metrics_addr": "127.0.0.1:9200",
                                                  "poll_interval": None})
    assert (cfg.paths, cfg.poll_interval, cfg.from_beginning, cfg.metrics_addr, dict(cfg.labels)) == (
        ("/from/file/*.log",), 2.0, True, "127.0.0.1:9200", {"cluster": "b", "zone": "z1"})


def test_defaults_without_any_source():
    cfg = load_config(environ={})
    assert cfg == Config(state_dir=cfg.state_dir)
    assert cfg.paths == ("/var/log/sglang/*.log",) and cfg.input_format == "auto"


def test_labels_from_env_read_pod_namespace_node():
    cfg = load_config(environ={"SGLANG_MATCHER_LABELS_FROM_ENV": "pod=POD_NAME,node=NODE_NAME"})
    assert cfg.static_labels({"POD_NAME": "p-1", "NODE_NAME": "gpu-7"}) == {"pod": "p-1", "node": "gpu-7"}


@pytest.mark.parametrize("source,content,env,needle", [
    ("file", 'poll_interval = "soon"\n', {}, "setting 'poll_interval'"),
    ("file", "no_such_setting = 1\n", {}, "unknown setting 'no_such_setting'"),
    ("file", "paths = [\n", {}, "not valid TOML"),
    ("env", "", {"SGLANG_MATCHER_FROM_BEGINNING": "maybe"}, "environment SGLANG_MATCHER_FROM_BEGINNING"),
    ("env", "", {"SGLANG_MATCHER_INPUT_FORMAT": "syslog"}, "setting 'input_format'"),
    ("env", "", {"SGLANG_MATCHER_METRICS_ADDR": "9464"}, "is not HOST:PORT"),
])
def test_bad_values_name_the_setting_and_where_it_came_from(tmp_path, source, content, env, needle):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_config(file=f if source == "file" else None, environ=env)
    assert needle in str(e.value)
    if source == "file" and "TOML" not in needle:
        assert str(f) in str(e.value)
