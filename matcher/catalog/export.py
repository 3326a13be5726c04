"""The catalog's patterns for other tools: POSIX ERE for `grep -E -f`, an mtail program (RE2).

Why: to compare our speed and our counts with the tools operators already have, both must look
for the same thing. So each pattern is translated from its parse tree (the `re` parser that
`catalog.patterns` uses), not by text substitution: named and numbered groups become plain
groups, `\\d`/`\\s`/`\\w` become POSIX classes, lazy quantifiers greedy (whether a line matches does
not change), and case-insensitive letters `[aA]` for grep.

What a pattern is searched in differs: we search the *message* of a record (after sglang's
`[ts TP0] ` prefix, after `Class: ` on an exception line), grep and mtail search whole lines.
A pattern anchored at the start of the message — the generated layer's `(?<![\\s\\S])\\s*`, or
`^` — is translated to "at the start of the line, after an optional sglang prefix, and after the
record's exception class when it names one (any class-like name when it does not)". Unanchored
patterns are searched anywhere in the line. The one difference that remains: a record's
`errorClass` cannot be checked on an unanchored pattern, so grep and mtail also count a line
where an exception of *another* class carries the message (a chained `HFValidationError` that
repeats an `OSError`'s text), which the engine does not. And the engine also searches the
message of an API error body taken out of a line (`matcher.api_error`): an anchored pattern,
translated to the line's start, does not find it there in grep or mtail.

What cannot be translated is reported with the reason and counted, never dropped silently:
other lookarounds, back-references, atomic groups, a pattern that spans lines (a `\\n`: grep and
mtail see one line at a time), classes mixing negated categories with other items, non-ASCII
inside a class, and for mtail patterns longer than its default `max_regexp_length` (1024).
"""

from __future__ import annotations

import re
import re._constants as c  # type: ignore[import-not-found]
import re._parser as sre  # type: ignore[import-not-found]
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from matcher.catalog.schema import CatalogRecord

Dialect = Literal["grep", "mtail"]
MTAIL_MAX_REGEXP = 1024  # mtail's default --max_regexp_length

# One item of a parsed regular expression (`re._parser`): an opcode and its argument, whose
# shape depends on the opcode — read by position below, as the parser builds it.
_Item = tuple[Any, Any]

_ERE_SPECIAL = set(".[]()*+?{}|^$\\")
_RE2_SPECIAL = set(".[]()*+?{}|^$\\/")  # `/` ends an mtail regex literal
_CLASS_LIKE = "Error|Exception|Exit|Interrupt|Warning|Fault"


class Untranslatable(Exception):
    """The pattern uses something the dialect cannot express; the message says what."""


@dataclass(frozen=True, slots=True)
class Export:
    """Translated patterns by record id, and the records left out with why."""

    dialect: Dialect
    patterns: tuple[tuple[CatalogRecord, str], ...]
    skipped: tuple[tuple[CatalogRecord, str], ...] = ()
    reasons: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        total = len(self.patterns) + len(self.skipped)
        lines = [(f"{self.dialect}: {len(self.patterns)} of {total} patterns translated, "
                 f"{len(self.skipped)} not translatable")]
        lines += [f"  {n:>6}  {why}" for why, n in self.reasons.most_common()]
        return "\n".join(lines) + "\n"


FRAMED = "identified by its traceback frame (raisedIn), not by a line"
AT_ITS_FRAME = ("words other code makes too (alsoMadeBy): matched only where a traceback frame "
                "is at its site, which a line tool never sees")


def export(records: Iterable[CatalogRecord], dialect: Dialect) -> Export:
    """Translate every record's pattern; collect the ones that cannot be, with the reason."""
    done: list[tuple[CatalogRecord, str]] = []
    skipped: list[tuple[CatalogRecord, str]] = []
    reasons: Counter[str] = Counter()
    for r in records:
        if r.raised_in is not None:
            # Identified by its traceback frame, which a line tool never sees with the message.
            skipped.append((r, FRAMED))
            reasons[FRAMED] += 1
            continue
        if r.also_made_by:
            skipped.append((r, AT_ITS_FRAME))
            reasons[AT_ITS_FRAME] += 1
            continue
        try:
            done.append((r, translate(r.message_pattern, dialect, r.error_class)))
        except Untranslatable as e:
            skipped.append((r, str(e)))
            reasons[str(e)] += 1
    return Export(dialect, tuple(done), tuple(skipped), reasons)


def translate(pattern: str, dialect: Dialect, error_class: str | None = None) -> str:
    """One `messagePattern` as a line pattern of the dialect, or `Untranslatable`."""
    try:
        parsed = sre.parse(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        raise Untranslatable("syntax only the regex module knows") from e
    flags = parsed.state.flags
    if flags & (c.SRE_FLAG_MULTILINE | c.SRE_FLAG_DOTALL | c.SRE_FLAG_VERBOSE):
        raise Untranslatable("multiline, dotall or verbose flag")
    items = list(parsed)
    anchored = False
    if items and _is_start_of_message(items[0]):
        items, anchored = items[1:], True
    w = _Writer(dialect, bool(flags & c.SRE_FLAG_IGNORECASE))
    # Whether a line holds a match does not change when optional items at either end are
    # dropped (at the start only when unanchored); lookarounds may then stand at the ends.
    while items and _optional(items[-1]):
        items.pop()
    while not anchored and items and _optional(items[0]):
        items.pop(0)
    head = tail = ""
    if not anchored and items and items[0][0] is c.ASSERT_NOT and items[0][1][0] == -1:
        head = w.not_char_edge(list(items.pop(0)[1][1]), at="^")
    if items and items[-1][0] is c.ASSERT_NOT and items[-1][1][0] == 1:
        tail = w.not_char_edge(list(items.pop()[1][1]), at="$")
    elif items and items[-1][0] is c.ASSERT and items[-1][1][0] == 1:
        tail = w.group(w.seq(items.pop()[1][1]))
    body = head + w.seq(items) + tail
    if dialect == "mtail" and w.icase:
        body = "(?i)" + body
    if anchored:
        out = _start_of_message(dialect, error_class) + body
    else:
        out = body
    if dialect == "mtail" and len(out) > MTAIL_MAX_REGEXP:
        raise Untranslatable(f"longer than mtail's max_regexp_length ({MTAIL_MAX_REGEXP})")
    return out


def _optional(item: _Item) -> bool:
    op, av = item
    return op in (c.MAX_REPEAT, c.MIN_REPEAT) and av[0] == 0


def _is_start_of_message(item: _Item) -> bool:
    """`^`, `\\A`, or the generated layer's `(?<![\\s\\S])` (no character before this point)."""
    op, av = item
    if op is c.AT:
        return av in (c.AT_BEGINNING, c.AT_BEGINNING_STRING)
    if op is c.ASSERT_NOT:
        direction, sub = av
        return direction == -1 and _matches_any_char(list(sub))
    return False


def _matches_any_char(sub: list[_Item]) -> bool:
    if len(sub) != 1 or sub[0][0] is not c.IN:
        return False
    cats = {v for o, v in sub[0][1] if o is c.CATEGORY}
    return any({a, b} <= cats for a, b in (
        (c.CATEGORY_SPACE, c.CATEGORY_NOT_SPACE), (c.CATEGORY_DIGIT, c.CATEGORY_NOT_DIGIT),
        (c.CATEGORY_WORD, c.CATEGORY_NOT_WORD)))


def _start_of_message(dialect: Dialect, error_class: str | None) -> str:
    """Where a message starts in a line: after an optional `[ts TP0] ` prefix, and after an
    exception class if the line has one (the record's, under any module path; any class-like
    name when the record names none). A line of another class does not match: its message
    starts after that class."""
    if dialect == "grep":
        prefix = r"^(\[[^]]*\] )?"
        if error_class:
            name = _escape_ere(error_class.rsplit(".", 1)[-1])
            return prefix + rf"(([[:alnum:]_]+\.)*{name}: )?"
        return prefix + rf"([[:alnum:]_.]*({_CLASS_LIKE}): )?"
    prefix = r"^(?:\[[^\]]*\] )?"
    if error_class:
        name = _escape_re2(error_class.rsplit(".", 1)[-1])
        return prefix + rf"(?:(?:\w+\.)*{name}: )?"
    return prefix + rf"(?:[\w.]*(?:{_CLASS_LIKE}): )?"


def _escape_ere(text: str) -> str:
    return "".join("\\" + ch if ch in _ERE_SPECIAL else ch for ch in text)


def _escape_re2(text: str) -> str:
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in text)


_CATEGORIES = {  # category → (ERE bracket item, RE2 escape)
    c.CATEGORY_DIGIT: ("0-9", r"\d"),
    c.CATEGORY_SPACE: ("[:space:]", r"\s"),
    c.CATEGORY_WORD: ("[:alnum:]_", r"\w"),
}
_NEGATED = {
    c.CATEGORY_NOT_DIGIT: c.CATEGORY_DIGIT,
    c.CATEGORY_NOT_SPACE: c.CATEGORY_SPACE,
    c.CATEGORY_NOT_WORD: c.CATEGORY_WORD,
}


class _Writer:
    """Walks a parse tree and writes it in one dialect."""

    def __init__(self, dialect: Dialect, icase: bool) -> None:
        self.ere = dialect == "grep"
        self.icase = icase

    def seq(self, items: Iterable[_Item]) -> str:
        return "".join(self.item(op, av) for op, av in items)

    def group(self, inner: str) -> str:
        return f"({inner})" if self.ere else f"(?:{inner})"

    def literal(self, code: int) -> str:
        ch = chr(code)
        if ch == "\n":
            raise Untranslatable("spans lines (\\n)")
        if self.ere and self.icase and ch.isalpha() and ch.lower() != ch.upper():
            return f"[{ch.lower()}{ch.upper()}]"
        if self.ere:
            return _escape_ere(ch)
        if ch in "\t\r\f\v":
            return {"\t": r"\t", "\r": r"\r", "\f": r"\f", "\v": r"\v"}[ch]
        return _escape_re2(ch)

    def item(self, op: Any, av: Any) -> str:
        if op is c.LITERAL:
            return self.literal(av)
        if op is c.NOT_LITERAL:
            return self.char_class([(c.LITERAL, av)], negate=True)
        if op is c.ANY:
            return "."
        if op is c.IN:
            items = list(av)
            negate = bool(items) and items[0][0] is c.NEGATE
            return self.char_class(items[1:] if negate else items, negate=negate)
        if op is c.BRANCH:
            return self.group("|".join(self.seq(alt) for alt in av[1]))
        if op is c.SUBPATTERN:
            _group, add, _del, sub = av
            if add & ~c.SRE_FLAG_UNICODE:
                raise Untranslatable("inline flags inside a group")
            return self.group(self.seq(sub))
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            lo, hi, sub = av
            return self.atom(list(sub)) + _quantifier(lo, hi)
        if op is c.AT:
            return self.anchor(av)
        if op in (c.ASSERT, c.ASSERT_NOT):
            raise Untranslatable("lookaround")
        if op is c.GROUPREF or op is c.GROUPREF_EXISTS:
            raise Untranslatable("back-reference")
        if op is c.ATOMIC_GROUP or op is getattr(c, "POSSESSIVE_REPEAT", None):
            raise Untranslatable("atomic group or possessive quantifier")
        raise Untranslatable(f"regex construct {op}")

    def not_char_edge(self, sub: list[_Item], *, at: str) -> str:
        """`(?<![A-Za-z])` first, `(?![A-Za-z])` last: no such character there, or the line's
        edge — exact for the question grep answers (does the line hold a match)."""
        if len(sub) == 1 and sub[0][0] is c.LITERAL:
            cls = self.char_class([sub[0]], negate=True)
        elif len(sub) == 1 and sub[0][0] is c.IN:
            items = list(sub[0][1])
            negated = bool(items) and items[0][0] is c.NEGATE
            cls = self.char_class(items[1:] if negated else items, negate=not negated)
        else:
            raise Untranslatable("lookaround")
        return self.group(f"^|{cls}" if at == "^" else f"{cls}|$")

    def atom(self, sub: list[_Item]) -> str:
        """A quantifier's operand: one item as it is, several (or an alternation) grouped."""
        text = self.seq(sub)
        if len(sub) == 1 and sub[0][0] in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN, c.SUBPATTERN,
                                           c.BRANCH):
            return text
        return self.group(text)

    def anchor(self, where: object) -> str:
        if where in (c.AT_BEGINNING, c.AT_BEGINNING_STRING):
            return "^"
        if where in (c.AT_END, c.AT_END_STRING):
            return "$"
        if where is c.AT_BOUNDARY:
            return r"\b"
        if where is c.AT_NON_BOUNDARY:
            return r"\B"
        raise Untranslatable(f"anchor {where}")

    def char_class(self, items: list[_Item], *, negate: bool) -> str:
        """A bracket expression. ERE has no escapes inside brackets: `]` goes first, `-` last,
        `^` not first; a lone negated category (`\\S`) becomes a negated class of its own."""
        if len(items) == 1 and items[0][0] is c.CATEGORY and items[0][1] in _NEGATED:
            if negate:
                raise Untranslatable("negated class of a negated category")
            return self.char_class([(c.CATEGORY, _NEGATED[items[0][1]])], negate=True)
        if len(items) == 1 and items[0][0] is c.CATEGORY and not negate and not self.ere:
            return _CATEGORIES[items[0][1]][1]
        chars: list[str] = []
        ranges: list[str] = []
        for op, av in items:
            if op is c.LITERAL:
                ch = chr(av)
                if not ch.isascii():
                    raise Untranslatable("non-ASCII character in a class")
                if ch == "\n":
                    continue  # a line never holds a newline: the class just loses a member
                chars.append(ch)
                if self.icase and ch.isalpha():
                    chars.append(ch.swapcase())
            elif op is c.RANGE:
                lo, hi = av
                if hi > 127:
                    raise Untranslatable("non-ASCII character in a class")
                ranges.append(self._range(chr(lo), chr(hi)))
                if self.icase and chr(lo).isalpha() and chr(hi).isalpha():
                    ranges.append(self._range(chr(lo).swapcase(), chr(hi).swapcase()))
            elif op is c.CATEGORY:
                if av not in _CATEGORIES:
                    raise Untranslatable("negated category inside a class")
                ere, re2 = _CATEGORIES[av]
                ranges.append(ere if self.ere else re2)
            else:
                raise Untranslatable(f"class item {op}")
        if not chars and not ranges:
            if negate:  # `[^\n]`: any character of a line
                return "."
            raise Untranslatable("a class of newlines only: spans lines")
        return "[" + ("^" if negate else "") + self._members(chars) + "".join(ranges) + "]" \
            if not self.ere else self._ere_class(chars, ranges, negate)

    def _range(self, lo: str, hi: str) -> str:
        if self.ere:
            return f"{lo}-{hi}"
        return f"{_escape_class_re2(lo)}-{_escape_class_re2(hi)}"

    def _members(self, chars: list[str]) -> str:
        return "".join(_escape_class_re2(ch) for ch in dict.fromkeys(chars))

    @staticmethod
    def _ere_class(chars: list[str], ranges: list[str], negate: bool) -> str:
        """No escapes exist inside an ERE bracket: place `]` first, `[` (which could open
        `[:name:]`) and `^` late, `-` last."""
        uniq = list(dict.fromkeys(chars))
        others = [ch for ch in uniq if ch not in "][^-"]
        body = ("]" if "]" in uniq else "") + "".join(ranges) + "".join(others) \
            + ("[" if "[" in uniq else "") + ("^" if "^" in uniq else "") \
            + ("-" if "-" in uniq else "")
        if not negate and body.startswith("^"):
            if body == "^":
                return r"\^"
            body = body[1:] + "^"  # `-^`: a leading `-` is literal
        return "[" + ("^" if negate else "") + body + "]"


def _escape_class_re2(ch: str) -> str:
    # As a hex escape: mtail's lexer rejects `\]` inside a class, and `/` would end its literal.
    return f"\\x{ord(ch):02x}" if ch in "]\\-^[/" else ch


def _quantifier(lo: int, hi: int) -> str:
    if hi is c.MAXREPEAT or hi == c.MAXREPEAT:
        return {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
    if (lo, hi) == (0, 1):
        return "?"
    if lo == hi:
        return f"{{{lo}}}"
    return f"{{{lo},{hi}}}"


def render(result: Export, *, catalog_version: str = "") -> str:
    """The file another tool reads: one ERE per line (`grep -E -f`), or an mtail program with
    one counter per pattern (`pattern_<id>`: lines that matched it)."""
    if result.dialect == "grep":
        return "".join(text + "\n" for _, text in result.patterns)
    out = [(f"# sglang-matcher catalog {catalog_version}: {len(result.patterns)} patterns, "
           f"{len(result.skipped)} not translatable (sglang-matcher catalog export --dialect mtail)"),
           ""]
    seen: set[str] = set()
    for record, text in result.patterns:
        name = mtail_counter(record.id)
        if name in seen:
            continue
        seen.add(name)
        out += [f"counter {name}", f"/{text}/ {{", f"  {name}++", "}", ""]
    return "\n".join(out)


def mtail_counter(record_id: str) -> str:
    """The counter's name for a record id: letters, digits and `_` only."""
    return "pattern_" + re.sub(r"\W", "_", record_id)
