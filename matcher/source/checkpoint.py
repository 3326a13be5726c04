"""Read positions that survive restarts: written atomically, read defensively.

The file is versioned JSON (`{"version": 1, "files": [...], "journal": {...}}`), written to a
temporary file in the same directory, fsynced, renamed over the old one, and the directory
fsynced — a crash leaves either the old or the new checkpoint, never half of one. An offset is
only ever a position the pipeline has finished with (see `Pipeline.checkpoint_offset`), so after
a crash at most the lines since the last write are read again; none are skipped.

A checkpoint file that cannot be parsed (NUL bytes after a power loss, hand edits) is moved aside
as `checkpoints.json.corrupt-<time>`, reported, and the daemon starts as if on a first run for
the files it does not know: the safe choice that never silently skips a file's content is not
available without positions, so we choose the documented one — start at the end of files present
at start (no flood of history) and at the beginning of files that appear later.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from matcher.source.identity import FileIdentity

FORMAT_VERSION = 1
FILE_NAME = "checkpoints.json"


class CheckpointError(Exception):
    """Reading or writing the checkpoint failed; the message says what and where."""


@dataclass(frozen=True, slots=True)
class FileCheckpoint:
    identity: FileIdentity
    offset: int
    path: str  # where it was last seen (for people; identity decides)
    updated: float
    tail_hash: str = ""  # checksum of the 1 KiB before `offset`, checked on resume


@dataclass(slots=True)
class CheckpointState:
    files: dict[str, FileCheckpoint] = field(default_factory=dict)  # by identity key
    journal: dict[str, str] = field(default_factory=dict)  # source name → cursor
    loaded_from_disk: bool = False

    def find(self, dev: int, ino: int) -> list[FileCheckpoint]:
        return [c for c in self.files.values() if c.identity.inode_key == (dev, ino)]


class CheckpointStore:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.path = state_dir / FILE_NAME
        self._saved: str | None = None  # what the last successful save held, times aside

    def load(self) -> tuple[CheckpointState, str | None]:
        """The saved state and, if the file was unusable, why (the file is moved aside)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return CheckpointState(), None
        except OSError as e:
            return CheckpointState(), f"cannot read {self.path}: {e.strerror}; starting without checkpoints"
        try:
            doc = json.loads(raw.decode("utf-8"))
            state = _parse(doc)
        except (ValueError, KeyError, TypeError, OverflowError) as e:  # 1e999 is JSON too
            aside = self.path.with_name(f"{FILE_NAME}.corrupt-{int(time.time())}")
            try:
                os.replace(self.path, aside)
                moved = f"moved to {aside}"
            except OSError as err:
                moved = f"could not move it aside: {err.strerror}"
            return CheckpointState(), (
                f"checkpoint file {self.path} is unreadable ({e}); {moved}; "
                "files present now start at their end, new files at their beginning")
        state.loaded_from_disk = True
        return state, None

    def save(self, state: CheckpointState) -> None:
        doc = {
            "version": FORMAT_VERSION,
            "files": [
                {**asdict(c.identity), "offset": c.offset, "path": c.path, "updated": c.updated,
                 "tail_hash": c.tail_hash}
                for c in state.files.values()
            ],
            "journal": state.journal,
        }
        # An idle daemon would rewrite (and fsync) the same positions every second: skip a save
        # that changes nothing but the `updated` times.
        same = json.dumps([[{k: v for k, v in e.items() if k != "updated"}
                            for e in doc["files"]], doc["journal"]])
        if same == self._saved:
            return
        data = json.dumps(doc, indent=1).encode()
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".checkpoints.", dir=self.state_dir)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            dir_fd = os.open(self.state_dir, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._saved = same
        except OSError as e:
            raise CheckpointError(f"cannot write {self.path}: {e.strerror or e}") from e


def _parse(doc: Any) -> CheckpointState:
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"not a version {FORMAT_VERSION} checkpoint")
    state = CheckpointState()
    for item in doc["files"]:
        ident = FileIdentity(int(item["dev"]), int(item["ino"]), int(item["fp_len"]),
                             str(item["fp_hash"]))
        offset = int(item["offset"])
        if offset < 0:
            raise ValueError("negative offset")
        state.files[ident.key] = FileCheckpoint(ident, offset, str(item.get("path", "")),
                                                float(item.get("updated", 0)),
                                                str(item.get("tail_hash", "")))
    journal = doc.get("journal") or {}
    if not isinstance(journal, dict):
        raise ValueError("journal is not an object")
    state.journal = {str(k): str(v) for k, v in journal.items()}
    return state
