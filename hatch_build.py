"""Hatch build hook: the wheel ships the built-in catalog precompiled (`matcher/_precompiled`).

It runs `matcher.precompiled` on the catalog being packaged, with the Python, Hyperscan and
machine of this build, so a wheel built for x86-64 (or aarch64) carries databases for that
family (python-hyperscan's own wheels compile for no CPU feature beyond the family's base: see
`matcher.precompiled`); the wheel is tagged for its platform. An editable install, a platform
without Hyperscan, or `SGLANG_MATCHER_SKIP_PRECOMPILE=1` ship none: the daemon then compiles at
its first start (reading with the curated layer meanwhile) and caches the result. A checkout
already precompiled (`sglang-matcher catalog precompile`), with an artifact that fits, ships
that one instead of compiling it again.
"""

from __future__ import annotations

import os
import subprocess
import sys
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


class PrecompileHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable" \
                or os.environ.get("SGLANG_MATCHER_SKIP_PRECOMPILE"):
            return
        try:
            import hyperscan  # noqa: F401
        except ImportError:
            self.app.display_warning("Hyperscan is not installed here: the wheel ships no "
                                     "precompiled catalog")
            return
        root = Path(self.root)
        out = Path(self.directory) / "precompiled"
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.app.display_info("precompiling the built-in catalog (about a minute)")
        # A checkout precompiled by `catalog precompile` (its `matcher/_precompiled`) that
        # fits this catalog, code and machine is shipped as it is, not compiled again.
        subprocess.run([sys.executable, "-c", _SCRIPT, str(root / "patterns"), str(out),
                        str(root / "matcher" / "_precompiled")],
                       check=True, cwd=root, env=env)
        build_data["force_include"][str(out)] = "matcher/_precompiled"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
