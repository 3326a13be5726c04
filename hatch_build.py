"""Hatch build hook: the wheel ships the built-in catalog precompiled (`matcher/_precompiled`).

It runs `matcher.precompiled` on the catalog being packaged, with the Python, Hyperscan and
machine of this build, so a wheel built for x86-64 (or aarch64) carries databases for that
family (python-hyperscan's own wheels compile for no CPU feature beyond the family's base: see
`matcher.precompiled`); the wheel is tagged for its platform.

Where its imports come from: the hook is configured with `require-runtime-dependencies`
(pyproject.toml), so the build environment — pip's or `python -m build`'s isolated one — holds
every dependency the package has, Hyperscan included where it has wheels, resolved as an
install of the wheel will resolve them. The precompile runs in a child Python with the source
tree put *in front of* `PYTHONPATH`, never in place of it: pip's isolated build reaches its
environment through `PYTHONPATH`.

An editable install, a platform without Hyperscan, or `SGLANG_MATCHER_SKIP_PRECOMPILE=1` ship
none (and say so): the daemon then compiles at its first start (reading with the curated layer
meanwhile) and caches the result. A checkout already precompiled (`sglang-matcher catalog
precompile`), with an artifact that fits, ships that one instead of compiling it again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

_SCRIPT = """
import shutil
import sys
from pathlib import Path
from matcher import precompiled
from matcher.catalog import load_catalog
base, out, own = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
manifest, _ = precompiled.check(base, own)
if manifest is not None:
    shutil.copytree(own, out, dirs_exist_ok=True)
    print(f"precompiled {manifest['records']} records: the checkout's own, which fits")
    sys.exit(0)
catalog = load_catalog(builtin_dir=base, precompiled=False)
if catalog.issues:
    sys.exit("the built-in catalog has problems: run `sglang-matcher catalog lint`")
m = precompiled.build(out, base, catalog.records, catalog.version)
print(f"precompiled {m['records']} records for {m['machine']}: {m['hyperscan_info']}")
"""

NO_PRECOMPILE = ("the wheel ships no precompiled catalog ({why}): its first start compiles "
                 "the built-in catalog (one to two minutes, cached afterwards)")


def hyperscan_missing() -> str | None:
    """Why Hyperscan cannot be used by this build, or None when it can."""
    try:
        import hyperscan  # noqa: F401
    except ImportError as e:
        return f"Hyperscan is not installable for this platform ({e})"
    return None


def child_env(root: Path, environ: dict[str, str]) -> dict[str, str]:
    """The environment of the precompiling child: the source tree first on `PYTHONPATH`, what
    was there (pip's build environment) kept after it."""
    paths = [str(root), *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**environ, "PYTHONPATH": os.pathsep.join(paths)}


class PrecompileHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("SGLANG_MATCHER_SKIP_PRECOMPILE"):
            self.app.display_warning(NO_PRECOMPILE.format(
                why="SGLANG_MATCHER_SKIP_PRECOMPILE is set"))
            return
        why = hyperscan_missing()
        if why is not None:
            self.app.display_warning(NO_PRECOMPILE.format(why=why))
            return
        root = Path(self.root)
        out = Path(self.directory) / "precompiled"
        self.app.display_info("precompiling the built-in catalog (one to two minutes)")
        started = time.monotonic()
        # A checkout precompiled by `catalog precompile` (its `matcher/_precompiled`) that
        # fits this catalog, code and machine is shipped as it is, not compiled again.
        subprocess.run([sys.executable, "-c", _SCRIPT, str(root / "patterns"), str(out),
                        str(root / "matcher" / "_precompiled")],
                       check=True, cwd=root, env=child_env(root, dict(os.environ)))
        self.app.display_info(f"precompiled in {time.monotonic() - started:.0f} s")
        build_data["force_include"][str(out)] = "matcher/_precompiled"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
