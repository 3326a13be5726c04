"""Config layering: the TOML file, then SGLANG_MATCHER_* variables, then flags; errors name the setting."""

from __future__ import annotations

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
    ("env", "", {"SGLANG_MATCHER_METRICS_ADDR": "9464"}, "not an address of the form HOST:PORT"),
])
def test_bad_values_name_the_setting_and_where_it_came_from(tmp_path, source, content, env, needle):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_config(file=f if source == "file" else None, environ=env)
    assert needle in str(e.value)
    if source == "file" and "TOML" not in needle:
        assert str(f) in str(e.value)


@pytest.mark.parametrize("source,content,env,needle", [
    ("env", "", {"SGLANG_MATCHER_LABELS": "foo"}, "'foo' is not NAME=VALUE"),
    ("env", "", {"SGLANG_MATCHER_LABELS": "cluster=a,=x"}, "'=x' is not NAME=VALUE"),
    ("env", "", {"SGLANG_MATCHER_LABELS": "bad-name=x"},
     "setting 'labels': label name 'bad-name' is not a valid Prometheus label name"),
    ("env", "", {"SGLANG_MATCHER_LABELS": "__meta=x"}, "'__meta' is not a valid Prometheus"),
    ("env", "", {"SGLANG_MATCHER_LABELS_FROM_ENV": "source=POD_NAME"},
     "setting 'labels_from_env': label name 'source' is one the matcher's own metrics use"),
    ("file", '[labels]\npattern_id = "x"\n', {}, "label name 'pattern_id' is one the matcher's"),
    ("file", '[labels]\n"bad name" = "x"\n', {}, "'bad name' is not a valid Prometheus"),
    ("file", '[labels]\nzone = { a = 1 }\n', {}, "'zone': expected a string value"),
    ("file", "pol_interval = 2\n", {}, "unknown setting 'pol_interval' (did you mean 'poll_interval'?)"),
    ("env", "", {"SGLANG_MATCHER_POLL_INTERVAL": "nan"}, "must be a finite number"),
    ("env", "", {"SGLANG_MATCHER_POLL_INTERVAL": "soon"}, "expected a number (of seconds), got 'soon'"),
    ("env", "", {"SGLANG_MATCHER_EVENTS_BUFFER": "1e3"}, "expected a whole number, got '1e3'"),
    ("file", "events_buffer = 2.5\n", {}, "expected a whole number, got 2.5"),
])
def test_bad_labels_and_values_are_one_config_error_naming_them(tmp_path, source, content, env,
                                                                 needle):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(ConfigError) as e:
        load_config(file=f if source == "file" else None, environ=env)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_good_labels_pass():
    cfg = load_config(environ={"SGLANG_MATCHER_LABELS": "cluster=a, zone=z_1",
                               "SGLANG_MATCHER_LABELS_FROM_ENV": "pod=POD_NAME"})
    assert dict(cfg.labels) == {"cluster": "a", "zone": "z_1"}


def test_reserved_labels_cover_every_label_the_daemons_series_use():
    """A static label named like one of the daemon's own labels would break its series at start:
    the config refuses every such name before."""
    from prometheus_client import CollectorRegistry

    from matcher.config import RESERVED_LABELS
    from matcher.sinks.metrics import MetricsSink
    from matcher.telemetry import Telemetry

    class Catalog:
        records = ()

    class Logger:
        def __getattr__(self, name):
            return lambda *a, **k: None

    registry = CollectorRegistry()
    MetricsSink(registry, catalog=Catalog(), build_version="0", catalog_version="v")
    Telemetry(registry, Logger())
    used = {name for c in set(registry._collector_to_names)
            for name in getattr(c, "_labelnames", ())}
    assert used and used <= RESERVED_LABELS, used - RESERVED_LABELS


def test_journal_units_alone_follow_no_default_files(tmp_path):
    """Journal units with `paths` set nowhere: no files (the default /var/log/sglang/*.log would
    match nothing on a journal-only host and raise SglangMatcherFollowingNothing); `paths` from
    a flag, the environment or the file still adds files; without journal units, the default."""
    from matcher.config import Config, load_config

    journal = {"journal_units": ["sglang.service"]}
    assert load_config(environ={}, flags=journal).paths == ()
    assert load_config(environ={}, flags={**journal, "paths": ["/l/*.log"]}).paths == ("/l/*.log",)
    assert load_config(environ={"SGLANG_MATCHER_PATHS": "/e/*.log"}, flags=journal).paths == (
        "/e/*.log",)
    toml = tmp_path / "c.toml"
    toml.write_text('paths = ["/f/*.log"]\n')
    assert load_config(file=toml, environ={}, flags=journal).paths == ("/f/*.log",)
    assert load_config(environ={}).paths == Config().paths == ("/var/log/sglang/*.log",)


def test_each_setting_parses_to_the_type_config_declares():
    """One declaration per setting: the kind that parses a value makes the type the field is
    annotated with (a real type, compared as such), and its default is of that type too."""
    import typing

    from matcher.config import SETTINGS

    hints = typing.get_type_hints(Config)
    assert [s.name for s in SETTINGS] == list(hints)
    for s in SETTINGS:
        assert s.kind.type == hints[s.name], s.name
        default = s.default_value()
        origin = typing.get_origin(s.kind.type) or s.kind.type
        if origin in (typing.Union, type(int | None)):
            assert default is None or isinstance(default, typing.get_args(s.kind.type)), s.name
        else:
            assert isinstance(default, origin if origin is not typing.Mapping else dict), s.name


def test_a_flag_sets_what_its_setting_declares():
    """`watch`'s flags come from the settings: each flag given sets its setting, nothing else."""
    from matcher.commands import build_parser
    from matcher.commands.watch import watch_flags
    from matcher.config import SETTINGS

    parser = build_parser()
    base = watch_flags(parser.parse_args(["watch"]))
    assert set(base) == {s.name for s in SETTINGS if s.flag is not None}
    assert all(v is None for v in base.values())
    samples = {"--poll-interval": "2", "--label": "team=a", "--input-format": "cri",
               "--format": "human", "--min-severity": "error", "--events-access": "any",
               "--metrics-addr": "127.0.0.1:0"}
    for s in SETTINGS:
        if s.flag is None or not s.flag.options:
            continue
        option = s.flag.options[0]
        argv = [option] + ([samples.get(option, "x")] if s.flag.takes_value else [])
        given = watch_flags(parser.parse_args(["watch", *argv]))
        assert [k for k, v in given.items() if v is not None] == [s.name], option
        load_config(environ={}, flags=given)  # and the config takes it
    assert watch_flags(parser.parse_args(["watch", "-"]))["paths"] == []
    assert watch_flags(parser.parse_args(["watch", "a.log", "-"]))["paths"] == ["a.log"]


@pytest.mark.parametrize("addr,needle", [
    ("9464", "not an address of the form HOST:PORT"),
    ("::1:9400", "an IPv6 address needs brackets"),
    ("host:99999", "not an address of the form HOST:PORT"),
])
def test_the_metrics_address_is_checked_once_by_the_parser_the_server_uses(addr, needle):
    with pytest.raises(ConfigError) as e:
        load_config(environ={"SGLANG_MATCHER_METRICS_ADDR": addr})
    assert str(e.value).startswith("setting 'metrics_addr': ") and needle in str(e.value)
    assert e.value.hint == "use HOST:PORT, [IPv6]:PORT or :PORT (all interfaces)"
    assert load_config(environ={"SGLANG_MATCHER_METRICS_ADDR": "[::1]:9400"}).metrics_addr


def test_a_reload_keeps_the_settings_declared_not_reloadable(tmp_path):
    """A rebuild at SIGHUP runs on with the old value of every setting declared not reloadable,
    `checkpoints` among them, and names each."""
    import dataclasses
    import io

    from matcher.config import NOT_RELOADABLE
    from matcher.topology import build

    class Quiet:
        def __getattr__(self, name):
            return lambda *a, **k: None

    first = Config(paths=(), state_dir=tmp_path / "a", builtin_catalog=False,
                   sglang_version="none")
    changed = dataclasses.replace(first, state_dir=tmp_path / "b", checkpoints=False,
                                  labels={"team": "x"}, labels_from_env={"pod": "POD_NAME"},
                                  poll_interval=3.0)
    old = build(first, log=Quiet(), stdout=io.StringIO())
    try:
        new = build(changed, log=Quiet(), stdout=io.StringIO(), previous=old)
        try:
            assert new.not_reloaded == list(NOT_RELOADABLE) == [
                "state_dir", "checkpoints", "labels", "labels_from_env"]
            assert new.config.checkpoints is True and new.config.poll_interval == 3.0
        finally:
            new.close()
    finally:
        old.close()
