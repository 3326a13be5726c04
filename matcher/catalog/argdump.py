"""Print one sglang release's command-line arguments as JSON: run *by* a release, not imported.

`sglang-matcher catalog server-args` runs this file with a Python that has sglang's
dependencies installed and the release's source first on `PYTHONPATH`. It builds the release's
own argparse parser (`ServerArgs.add_cli_args`) and prints, per destination (the `ServerArgs`
field a flag sets): the flag's spellings, default, choices, type, action and help — what the
release itself would accept, not what a reading of its source guesses.

Old releases import names that newer torch/triton no longer have (`triton.runtime.cache.
default_cache_dir`); such a name, or a module that is not installed, is stood in for by a stub
(listed on stderr): the parser never calls them. Standard library only: it runs under the
release's interpreter, not ours.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import sys
import types
from typing import Any


class _Stub:
    """Stands in for a name the release imports and the parser never uses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        return _Stub()

    def __getattr__(self, name: str) -> _Stub:
        return _Stub()

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)

    def __bool__(self) -> bool:
        return False


def _stub_module(name: str) -> None:
    mod = types.ModuleType(name)
    mod.__path__ = []
    mod.__getattr__ = lambda attr: _Stub()  # type: ignore[method-assign]
    sys.modules[name] = mod
    parent, _, child = name.rpartition(".")
    if parent:
        if parent not in sys.modules:
            _stub_module(parent)
        setattr(sys.modules[parent], child, mod)


def _tolerate_registrations() -> None:
    """Old releases register their own configs for models that newer transformers ships
    (`qwen3_asr`): let the registration be a no-op instead of a ValueError at import."""
    try:
        from transformers.models.auto import auto_factory, configuration_auto
    except ImportError:
        return
    for cls in (configuration_auto._LazyConfigMapping, auto_factory._LazyAutoMapping):
        original = cls.register

        def register(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            kwargs["exist_ok"] = True
            try:
                return _original(self, *args, **kwargs)
            except ValueError:
                return None

        cls.register = register


def import_server_args() -> tuple[Any, list[str]]:
    """`ServerArgs` of the release on the path, and the names stubbed to import it."""
    _tolerate_registrations()
    stubbed: list[str] = []
    for _ in range(100):
        try:
            from sglang.srt.server_args import ServerArgs

            return ServerArgs, stubbed
        except ImportError as e:
            for key in [k for k in sys.modules if k == "sglang" or k.startswith("sglang.")]:
                del sys.modules[key]
            m = re.match(r"cannot import name '(\w+)' from '([\w.]+)'", str(e))
            if m and not m.group(2).startswith("sglang"):
                setattr(importlib.import_module(m.group(2)), m.group(1), _Stub())
                stubbed.append(f"{m.group(2)}.{m.group(1)}")
            elif e.name and not e.name.startswith("sglang"):
                _stub_module(e.name)
                stubbed.append(e.name)
            else:
                raise
    raise ImportError("gave up after stubbing 100 names: " + ", ".join(stubbed))


def _plain(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType, property)


def arguments(server_args: Any) -> dict[str, dict[str, Any]]:
    parser = argparse.ArgumentParser()
    server_args.add_cli_args(parser)
    fields = ({f.name: f for f in dataclasses.fields(server_args)}
              if dataclasses.is_dataclass(server_args) else {})
    out: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        default = action.default
        f = fields.get(action.dest)
        attr = getattr(server_args, action.dest, None)
        if f is not None and f.default is not dataclasses.MISSING:
            default = f.default
        elif f is None and attr is not None and not isinstance(attr, _DESCRIPTORS) \
                and not callable(attr):
            default = attr
        out[action.dest] = {
            "flags": list(action.option_strings),
            "default": _plain(default),
            "choices": [_plain(c) for c in action.choices] if action.choices else None,
            "type": getattr(action.type, "__name__", None) if action.type else None,
            "action": type(action).__name__,
            "nargs": _plain(action.nargs),
            "const": _plain(action.const),
            "help": action.help if isinstance(action.help, str) else None,
        }
    return out


def main() -> None:
    server_args, stubbed = import_server_args()
    if stubbed:
        print("stubbed: " + ", ".join(stubbed), file=sys.stderr)
    json.dump(arguments(server_args), sys.stdout)


if __name__ == "__main__":
    main()
