"""What to do about a router record whose words say nothing an operator can act on: rules by
where the site is and what the router's releases did with it (`matcher.catalog.router` applies
them after its message rules, `router.REMEDIES`).

- **Gone in a later release.** A panic site (`panic!`, `.expect`, `.unwrap()` …) that no later
  release read holds — neither in its file nor moved to another file with the same function and
  source line (frames), nor with the same message (panics) — is fixed by upgrading: the first
  release without it is named.
- **A panic in code the launch command chooses.** The router runs the code of a load-balancing
  policy, a history backend or the gRPC client only because its flags or worker URLs ask for
  it; choosing the other one gets past a panic there (the flags are named only when that
  release's `router_args.py` defines them).
- **A message that names a flag.** An error or log line that names one of the release's own
  flags (`OpenAI mode requires at least one --worker-urls entry`) or a config field spelled as
  one (`queue_size`) is about that flag: the solution says to change it as the message asks.

A record that none of these reaches keeps no solution: a bug in the router with no workaround
named is reported, not invented.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from matcher.catalog.versions import version_key


def first_release_without(holding: Iterable[str], order: Sequence[str],
                          later_elsewhere: Iterable[str] = ()) -> str | None:
    """The first release read after the last one that holds the site, when no later release
    holds it (here or, `later_elsewhere`, the same code in another place); None otherwise."""
    held = list(holding)
    if not held:
        return None
    last = max(held, key=version_key)
    after = [v for v in order if version_key(v) > version_key(last)]
    if not after:
        return None  # in the newest release read
    if any(version_key(v) > version_key(last) for v in later_elsewhere):
        return None  # the same code moved: an upgrade does not remove it
    return after[0]


def upgrade_text(release: str, where: str, package: str = "sglang-router") -> str:
    return (f"Upgrade {package} to {release} or later (`pip install -U {package}`): "
            f"the code that panics here ({where}) is not in {release}")


@dataclass(frozen=True, slots=True)
class ModuleRule:
    """Panics in files under `prefix` run because the launch chose that component."""

    prefix: tuple[str, ...]
    flags: tuple[str, ...]  # the flags that choose another component; one must exist
    text: str  # `{flags}`: the flags the release defines, spelled `--x`


# The file of each load-balancing policy (`tree.rs`: the cache-aware policy's radix tree, at
# the crate's top before 0.2 and under `policies/` since); the registry and the module glue run
# whatever the policy, so they are not listed.
POLICY_FILES = {"src/tree.rs": "cache_aware", "src/policies/tree.rs": "cache_aware",
                "src/policies/cache_aware.rs": "cache_aware", "src/policies/bucket.rs": "bucket",
                "src/policies/consistent_hashing.rs": "consistent_hashing",
                "src/policies/power_of_two.rs": "power_of_two",
                "src/policies/random.rs": "random", "src/policies/round_robin.rs": "round_robin"}
_POLICY_FLAGS = ("policy", "prefill-policy", "decode-policy")


def policy_text(path: str, flags: frozenset[str]) -> str | None:
    """The workaround for a panic in one policy's code: run another policy."""
    policy = POLICY_FILES.get(path)
    named = [f"`--{f}`" for f in _POLICY_FLAGS if f in flags]
    if policy is None or not named:
        return None
    other = "random" if policy == "round_robin" else "round_robin"
    return (f"The panic is in the router's `{policy}` load-balancing policy ({path}): start the "
            f"router with another policy ({', '.join(named)}, e.g. `--policy {other}`) to get "
            "past it, and report the panic with its `RUST_BACKTRACE=1` stack")


MODULE_RULES: tuple[ModuleRule, ...] = (
    ModuleRule(("src/data_connector/",), ("history-backend",),
               "The panic is in the router's conversation-history storage ({file}): run with "
               "another backend ({flags}, e.g. `--history-backend memory`), or, for a database "
               "backend, check its connection settings and that the database is reachable"),
    ModuleRule(("src/routers/grpc/", "src/grpc_client/"), ("worker-urls",),
               "The panic is in the router's gRPC path ({file}), used for workers given as "
               "`grpc://` URLs: serve the workers over HTTP instead (`http://` URLs in "
               "{flags}) to get past it, and report the panic with its `RUST_BACKTRACE=1` stack"),
)


def module_text(path: str, flags: frozenset[str]) -> str | None:
    """The workaround for a panic in `path` (`src/policies/cache_aware.rs`), or None."""
    if path in POLICY_FILES:
        return policy_text(path, flags)
    for rule in MODULE_RULES:
        if path.startswith(rule.prefix) or path in rule.prefix:
            named = [f"`--{f}`" for f in rule.flags if f in flags]
            if not named:
                return None
            return rule.text.format(file=path, flags=", ".join(named))
    return None


_FLAG_WORD = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)")
# A config field (`queue_size`), not a file name (`chat_template.json`).
_FIELD_WORD = re.compile(r"(?<![\w.-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w-])(?!\.\w)")


def named_flags(text: str, flags: frozenset[str]) -> list[str]:
    """The release's flags the message names, as `--x` or as a config field `x_y`."""
    out: list[str] = []
    for m in _FLAG_WORD.finditer(text):
        if m.group(1) in flags and m.group(1) not in out:
            out.append(m.group(1))
    for m in _FIELD_WORD.finditer(text):
        flag = m.group(1).replace("_", "-")
        if flag in flags and flag not in out:
            out.append(flag)
    return out


def flag_text(named: Sequence[str]) -> str:
    listed = ", ".join(f"`--{f}`" for f in named)
    return (f"Change {listed} in the router's command line as the message asks (with "
            "`sglang_router.launch_server` the router's flags are spelled `--router-…`)")
