"""sglang-matcher: recognizes known sglang failures in its logs and says how to fix them.

Read top-down, a log line goes: `source/` (tail) → `decode` (bytes to lines) → `framing`
(sglang prefix, tracebacks → records) → `engine` (catalog patterns → match) → `aggregate`
(ranks collapsed → events) → `sinks/` (JSON events, metrics). `pipeline` wires the pure
middle; `cli` and `daemon` are the edges.
"""

__version__ = "0.1.0"
