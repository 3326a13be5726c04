"""The fix a dependency's message states itself: "Please set CUDA_HOME environment variable",
"please unset the `HF_HUB_OFFLINE` environment variable", "Install with: pip install
cuda-python", "be logged in to Hugging Face with `hf auth login`".

A dependency's check says what its caller got wrong, not which sglang flag changes that, so a
`deps.jsonl` record carries no solution of its own — except what its message tells the reader to
do, in so many words: set or unset a named environment variable, run a `pip install` of a named
requirement, log in with a named command. Each becomes one solution that repeats the
instruction and says whose it is. A message that only mentions such a thing (`HF_HUB_OFFLINE=1
is set`, `a version of tokenizers>=0.22 is required`) gets none: without a verb telling the
reader to act, what to do is not stated.
"""

from __future__ import annotations

import re

# `set` / `unset` / `export` right before a variable named in capitals and the words
# "environment variable" (in either order: `set the X environment variable`, `set the
# environment variable X`)
_VAR = r"[`'\"]?(?P<var>[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Z]{4,})[`'\"]?"
_ENV = re.compile(
    rf"\b(?P<verb>(?i:set|unset|export))\s+(?:the\s+)?(?:{_VAR}\s+(?i:environment|env)\s+"
    rf"(?i:variable|var)\b|(?i:environment|env)\s+(?i:variable|var)\s+{_VAR.replace('var>', 'var2>')})")
# `pip install …` as the message writes it: quoted whole (`pip install a b`), or else one
# requirement; no `{…}` hole. It counts after an instruction in the same sentence (`Try`,
# `Install with:`, `Please run`, `use`, `install it with`), not when another step follows it
# (`run `pip install protobuf` and `wget …``: half a fix is not one).
_PIP = re.compile(r"`(?P<ticked>pip install [^`{}\n]+?)`|(?P<q>['\"])(?P<quoted>pip install [^'\"{}\n]+?)(?P=q)"
                  r"|(?<![`'\"\w])(?P<bare>pip install (?:-U |--upgrade )?[^\s{}`'\"]+)")
_INSTRUCTION = re.compile(r"\b(?i:try|install|run|use|please)\b")
_SENTENCE_END = re.compile(r"[.!?]\s|\n")
_THEN_MORE = re.compile(r"\s+and\s")
_LOGIN = re.compile(r"`(?P<cmd>(?:hf auth|huggingface-cli) login)`")


def stated_solutions(message: str | None, package: str) -> list[str]:
    """The solutions `message` (a record's template) states, in its own terms, else []."""
    if not message:
        return []
    out: list[str] = []
    for m in _ENV.finditer(message):
        var = m.group("var") or m.group("var2")
        verb = m.group("verb").lower()
        action = "Unset" if verb == "unset" else "Set"
        out.append(f"{action} the environment variable {var} (as {package}'s message says).")
    commands = _pip_commands(message)
    if commands:
        listed = " or ".join(f"`{c}`" for c in commands)
        out.append(f"Run {listed} (as {package}'s message says).")
    for m in _LOGIN.finditer(message):
        out.append(f"If the repository is gated or private: log in to Hugging Face with "
                   f"`{m.group('cmd')}`, with an account granted access (as {package}'s "
                   "message says).")
    return list(dict.fromkeys(out))


def _pip_commands(message: str) -> list[str]:
    """The `pip install` commands an instruction in the message gives (alternatives: `a` or
    `b`), else []."""
    out: list[str] = []
    for m in _PIP.finditer(message):
        before = message[:m.start()]
        ends = list(_SENTENCE_END.finditer(before))
        sentence = before[ends[-1].end():] if ends else before
        if not _INSTRUCTION.search(sentence) or _THEN_MORE.match(message, m.end()):
            continue
        command = (m.group("ticked") or m.group("quoted") or m.group("bare")).rstrip(".,;:)")
        out.append(command)
    return list(dict.fromkeys(out))
