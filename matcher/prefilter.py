"""Which lines of a chunk can matter, found in one pass over its bytes — so the others are skipped.

Nearly every line sglang writes is traffic (`Decode batch. …`, `Receive: …`, uvicorn's access
lines) that no catalog record matches and that starts no traceback. Building a `Line`, a
`Record` and a match attempt for each costs some 20 µs in Python; a log of a million lines
would take longer than grep does with eleven thousand patterns. Instead, one Hyperscan scan of
the whole chunk reports every place where

- a literal that some pattern cannot match without occurs (`literal_cover`: every pattern has
  one, or one per branch of an alternation; a record bound to its exception class, errorType
  `exception`, has its class's name when the message's own literal is shorter:
  `compile.class_cover`), or
- the framer would see more than a plain line (`framing.RECORD_START_SIGNS`: a traceback, an
  exception line, ANSI escapes),

and only the lines holding such a place — and the line before each, which the framer reads to
attribute an unprefixed traceback — go through framing and matching while no record is open.
The sets are supersets by construction: skipping a line is exactly what processing it would
have produced (no record, no event), which the equivalence tests compare on real logs.

Every input format is read this way. In CRI (`/var/log/pods`) only well-formed final (`F`)
lines are ever passed over (`decode.cri_skippable`): a `P` piece may hold half of a literal, so
it, the line before it and every piece up to its `F` are read. Docker's json-file format
escapes quotes, backslashes, `<>&` and maybe non-ASCII text, so it gets a prefilter of its own
(`Engine.docker_prefilter`): each cover cut to its longest run without such characters, the
record-start signs as they look inside a JSON string, and only whole lines in docker's own
shape passed over (`decode.docker_skippable`).

A catalog with a pattern that has no literal cover gets no chunk prefilter (`build` returns
None), and the pipeline reads every line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:  # optional: wheels for x86-64, aarch64 and macOS
    import hyperscan as _hs
except ImportError:  # pragma: no cover - exercised on platforms without wheels
    _hs = None  # type: ignore[assignment]


def _escape(literal: bytes) -> bytes:
    """A literal as a Hyperscan expression: letters and digits as they are, the rest as `\\xNN`."""
    return b"".join(bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c
                    for c in literal)


class ChunkPrefilter:
    """A compiled set of line signs; `hits(data)` gives where they end in a chunk."""

    def __init__(self, db: Any, *more: Any) -> None:
        self._db = db
        self._more = more  # further parts' databases (`union`)

    @classmethod
    def union(cls, parts: Sequence[ChunkPrefilter]) -> ChunkPrefilter:
        """One prefilter whose hits are every part's: an engine of several compiled parts
        (the shipped catalog and a user's layer)."""
        if len(parts) == 1:
            return parts[0]
        return cls(*(db for p in parts for db in (p._db, *p._more)))

    @classmethod
    def build(cls, covers: Sequence[tuple[tuple[str, ...], bool] | None],
              signs: Sequence[bytes]) -> ChunkPrefilter | None:
        """From each pattern's literal cover (and whether it ignores case) and the framer's signs.

        None when Hyperscan is missing or some pattern has no cover the scan can vouch for.
        """
        if _hs is None:
            return None
        exprs: list[bytes] = []
        flags: list[int] = []
        seen: set[tuple[bytes, int]] = set()
        for cover in covers:
            if cover is None:
                return None
            literals, caseless = cover
            for literal in literals:
                raw = literal.encode("utf-8", "surrogatepass")
                if caseless and not raw.isascii():
                    return None  # Hyperscan folds ASCII only
                flag = _hs.HS_FLAG_CASELESS if caseless else 0
                if (raw, flag) not in seen:
                    seen.add((raw, flag))
                    exprs.append(_escape(raw))
                    flags.append(flag)
        for sign in signs:
            exprs.append(sign)
            flags.append(_hs.HS_FLAG_MULTILINE)
        db = _hs.Database()
        db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs),
                   flags=flags)
        return cls(db)

    def hits(self, data: bytes) -> list[int]:
        """End offsets in `data` of every sign found, ascending (a line may hold several)."""
        found: list[int] = []
        add = found.append

        def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            add(to)

        self._db.scan(data, match_event_handler=on_match)
        for db in self._more:
            db.scan(data, match_event_handler=on_match)
        found.sort()
        return found

    def dumpb(self) -> bytes:
        assert _hs is not None and not self._more
        return bytes(_hs.dumpb(self._db))

    @classmethod
    def loadb(cls, blob: bytes) -> ChunkPrefilter:
        if _hs is None:
            raise ValueError("hyperscan is not available")
        db = _hs.loadb(blob, _hs.HS_MODE_BLOCK)
        db.scratch = _hs.Scratch(db)
        return cls(db)
