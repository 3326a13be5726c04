"""What a `messagePattern` is worth: does it compile, can it match nothing, how specific is it.

The engine's tie-break ("most literal text wins") and the load-time rejection of vague patterns
both rest on `literal_length`: the number of characters any match must contain literally. It is
computed on the parse tree of the pattern, so `(?:foo|ba)` counts 2 and `x*` counts 0.
"""

from __future__ import annotations

import functools
import re
import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Iterator
from dataclasses import dataclass

import regex

MIN_LITERAL_CHARS = 8

_TEMPLATE_HOLE = re.compile(r"(?<!\{)\{(?!\{)[^{}]*\}(?!\})|%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[sdrfgixXeEc]")


@dataclass(frozen=True, slots=True)
class PatternFacts:
    literal_length: int
    required_literals: tuple[str, ...]  # literal runs every match contains, longest first


def pattern_from_template(template: str) -> str:
    """`'x={cfg.y!r} bad.'` → `'x=(.+?) bad\\.'`: literal text escaped, each hole a lazy group."""
    parts: list[str] = []
    pos = 0
    for m in _TEMPLATE_HOLE.finditer(template):
        parts.append(escape_literal(template[pos : m.start()]))
        parts.append("(.+?)")
        pos = m.end()
    parts.append(escape_literal(template[pos:]))
    return "".join(parts)


_SPECIAL = re.compile(r"([.^$*+?{}\[\]\\|()])")


def escape_literal(text: str) -> str:
    """Escape regex metacharacters only, so a pattern stays readable next to its message."""
    return _SPECIAL.sub(r"\\\1", text.replace("{{", "{").replace("}}", "}"))


def analyze(pattern: str) -> PatternFacts:
    """Literal length and required literal runs of a pattern (`regex` syntax, `re` parse)."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return _analyze_crudely(pattern)
    runs: list[str] = []
    length = _walk(tree, runs)
    return PatternFacts(length, tuple(sorted((r for r in runs if r), key=len, reverse=True)))


def _walk(items: object, runs: list[str]) -> int:
    """Count required literal characters; collect runs of adjacent required literals."""
    total = 0
    current: list[str] = []

    def flush() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    for op, av in items:  # type: ignore[attr-defined]
        if op is sre_c.LITERAL:
            current.append(chr(av))
            total += 1
        elif op is sre_c.SUBPATTERN:
            sub: list[str] = []
            n = _walk(av[-1], sub)
            total += n
            # A group of literals only (`(abc)`) continues the current run.
            if sub and all(o is sre_c.LITERAL for o, _ in av[-1]):
                current.append(sub[0])
            else:
                flush()
                runs.extend(sub)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, _hi, body = av
            flush()
            if lo >= 1:
                sub = []
                total += min(lo, 4) * _walk(body, sub)
                runs.extend(sub)
        elif op is sre_c.BRANCH:
            flush()
            total += min((_walk(alt, []) for alt in av[1]), default=0)
        elif op is sre_c.ATOMIC_GROUP:
            sub = []
            total += _walk(av, sub)
            flush()
            runs.extend(sub)
        elif op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            continue  # zero-width: neither adds nor breaks a run of literals
        else:
            flush()
    flush()
    return total


# Characters a docker json-file line may hold escaped (`"`, `\\`, controls; Go's encoder also
# `<`, `>`, `&`; non-ASCII to be safe): a literal is only sure to appear as its bytes between them.
# Compiled on first use: a class up to U+10FFFF took `re` ~10 ms, at every start, and only a
# docker json-file's prefilter needs it.
_JSON_UNSAFE = r'[\n"\\<>&\x00-\x1f\x7f-\U0010ffff]'
_NEWLINE = re.compile("\n")


@functools.cache
def _json_unsafe() -> re.Pattern[str]:
    return re.compile(_JSON_UNSAFE)


def literal_cover(pattern: str, min_chars: int = 3, *,
                  json_safe: bool = False) -> tuple[str, ...] | None:
    """Literals one of which every match of `pattern` contains, or None if no such set is known.

    The daemon skips a log line only when none of these occurs in it, so the set must never miss
    a match: it comes from the parse tree (a crude reading of syntax only `regex` knows promises
    nothing), takes the longest required run without a newline (a line never holds one), and for
    an alternation takes one literal per branch. Case is the caller's to ignore when the pattern
    does. `json_safe`: literals without a character JSON may escape, so that they occur as they
    are inside a docker json-file line.
    """
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    return _cover(tree, min_chars, _json_unsafe() if json_safe else _NEWLINE)


def _cover(items: object, min_chars: int, breaks: re.Pattern[str]) -> tuple[str, ...] | None:
    runs: list[str] = []
    _walk(items, runs)
    pieces = [piece for run in runs for piece in breaks.split(run)]
    best = max(pieces, key=len, default="")
    if len(best) >= _SELECTIVE:
        return (best,)
    # A short required run (` HTTP/`, in every access line) against a required group whose
    # every branch holds a longer literal (`Forbidden|Service Unavailable|…`): both are covers,
    # and the longer literals let far fewer lines through the prefilter.
    nested = [c for c in _nested_covers(items, min_chars, breaks) if min(map(len, c)) > len(best)]
    if nested:
        return max(nested, key=lambda c: min(map(len, c)))
    return (best,) if len(best) >= min_chars else None


# A required run this long is selective enough: no nested group is looked at.
_SELECTIVE = 12


def _nested_covers(items: object, min_chars: int, breaks: re.Pattern[str]
                   ) -> Iterator[tuple[str, ...]]:
    """The covers of the required groups, alternations and repeats directly in `items`."""
    for op, av in items:  # type: ignore[attr-defined]
        found: tuple[str, ...] | None = None
        if op is sre_c.BRANCH:
            branches = [_cover(alt, min_chars, breaks) for alt in av[1]]
            if all(b is not None for b in branches):
                found = tuple(dict.fromkeys(lit for b in branches for lit in b))  # type: ignore[union-attr]
        elif op is sre_c.SUBPATTERN:
            found = _cover(av[-1], min_chars, breaks)
        elif op is sre_c.ATOMIC_GROUP:
            found = _cover(av, min_chars, breaks)
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT,
                    getattr(sre_c, "POSSESSIVE_REPEAT", None)) and av[0] >= 1:
            found = _cover(av[2], min_chars, breaks)
        if found:
            yield found


# A cut line is matched only when it holds at least this much of the pattern's leading text.
MIN_CUT_HEAD = 16


def cut_prefix(pattern: str) -> str:
    """`pattern` up to its first top-level part that holds an unbounded wildcard (`.*`, `.+?`,
    `\\S+`, `[^…]*`): a line cut within that prefix can be told to be cut, while a wildcard
    would take any line's rest as "could go on" (`Model architectures (.*?) are not supported`
    would take `Model architectures ['X'] failed to be inspected`). The whole pattern when it
    has none."""
    depth = 0
    part_start = 0  # where the current top-level part begins
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if depth == 0 and c not in ")*+?{":
            part_start = i
        if c == "\\":
            wide = pattern[i + 1:i + 2] in ("S", "D", "W")
            i += 2
            if wide and i < n and pattern[i] in "*+":
                return pattern[:part_start]
            continue
        if c == "[":
            j = i + 1
            negated = j < n and pattern[j] == "^"
            j += 1 if negated else 0
            j += 1 if j < n and pattern[j] == "]" else 0
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            if negated and i < n and pattern[i] in "*+":
                return pattern[:part_start]
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "." and i + 1 < n and pattern[i + 1] in "*+":
            return pattern[:part_start]
        i += 1
    return pattern


def cut_head(pattern: str, min_chars: int = MIN_CUT_HEAD) -> str | None:
    """The first run of literal text, at least `min_chars` long, that every match of `pattern`
    contains at its top level — `Speculative decoding is currently not supported` of a generated
    record, `] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=` after a `[Rank N`
    capture: a line cut after it can still be told to be this record's (`Engine`).

    None for a pattern that ignores case or has no such run (`catalog lint` names those).
    """
    try:
        tree = sre_parse.parse(cut_prefix(pattern))
    except (re.error, OverflowError, RecursionError):
        return None
    if tree.state.flags & re.IGNORECASE:
        return None
    run: list[str] = []
    for op, av in [*tree, (None, None)]:
        if op is sre_c.LITERAL:
            run.append(chr(av))
            continue
        if op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            continue  # zero-width: neither adds nor breaks a run
        text = "".join(run)
        if len(text) >= min_chars and "\n" not in text:
            return text
        run.clear()
    return None


def json_safe_piece(literal: str, min_chars: int = 3) -> str | None:
    """The longest run of `literal` that a docker json-file line holds as it is."""
    best = max(_json_unsafe().split(literal), key=len, default="")
    return best if len(best) >= min_chars else None


def _analyze_crudely(pattern: str) -> PatternFacts:
    """For syntax only `regex` knows: letters, digits and spaces outside escapes and classes."""
    text = re.sub(r"\\[pPNXkg]\{[^}]*\}|\\.|\[[^\]]*\]|\(\?[^)]*\)", " ", pattern)
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9 _:=,'-]*", text)
    return PatternFacts(sum(len(w) for w in words), tuple(sorted(words, key=len, reverse=True)))


def positional_capture_names(compiled: regex.Pattern[str]) -> dict[int, str]:
    """Group number → capture name: its own name, or `arg1`, `arg2`, … for unnamed groups."""
    named = {num: name for name, num in compiled.groupindex.items()}
    names: dict[int, str] = {}
    unnamed = 0
    for num in range(1, compiled.groups + 1):
        if num in named:
            names[num] = named[num]
        else:
            unnamed += 1
            names[num] = f"arg{unnamed}"
    return names
