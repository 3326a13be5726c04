"""One systemd unit's journal as a `Source` (the reading itself is `journald.JournalSource`).

The journal hands over decoded lines, so they enter the pipeline at the framer; positions are
journal cursors, saved only for entries whose lines the pipeline is done with.
"""

from __future__ import annotations

from matcher.selflog import JOURNAL_NOTICES
from matcher.source.checkpoint import CheckpointState
from matcher.source.events import SourceEvents
from matcher.source.journald import JournalSource
from matcher.types import Intake

ENTRIES_PER_TURN = 1024


class JournalUnit:
    def __init__(self, journal: JournalSource, telemetry: SourceEvents) -> None:
        self.journal = journal
        self.name = journal.name
        self.telemetry = telemetry

    @property
    def finished(self) -> bool:
        return False  # a followed unit may always write more

    def read(self, now: float, intake: Intake) -> bool:
        for status in self.journal.poll():
            self.telemetry.notice(JOURNAL_NOTICES[status.kind], source=self.name,
                                  detail=status.message)
        lines = self.journal.read(ENTRIES_PER_TURN)
        if not lines:
            return False
        self.telemetry.lines(self.name, len(lines), sum(len(x.text) for x in lines))
        intake.lines(self.name, lines, now)
        return True

    def save(self, state: CheckpointState, intake: Intake, wall: float) -> bool:
        offset = intake.checkpoint_offset(self.name)
        cursor = self.journal.cursor_for_checkpoint(offset) if offset is not None else None
        if cursor is None or state.journal.get(self.name) == cursor:
            return False
        state.journal[self.name] = cursor
        return True

    def close(self) -> None:
        self.journal.close()
