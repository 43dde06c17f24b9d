"""The terminal's view of a running run: a progress bar fed by the executor's callbacks."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from cogbias.core.run_record import RunStatus

if TYPE_CHECKING:
    from cogbias.runs.work import LiveRun


class TerminalProgress:
    """A one-line progress bar on stderr (a plain line every two seconds when not a terminal)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()

    def __call__(self, run: LiveRun) -> None:
        t = time.monotonic()
        final = run.status != RunStatus.RUNNING
        if not final and t - self.last < (0.2 if self.tty else 2.0):
            return
        self.last = t
        if run.generated < run.to_generate:
            done, planned, what = run.generated, run.to_generate, "instances generated"
        else:
            done, planned = run.done, run.planned or 1
            what = f"{run.unit}, {run.failed} failed"
        bar = "#" * int(30 * done / max(planned, 1))
        line = f"[{bar:<30}] {done}/{planned} {what}, {time.monotonic() - self.started:.0f} s"
        if run.waiting:
            line += f"; {run.waiting} calls waiting to retry ({run.wait_reason})"
        if run.db_wait:
            line += "; waiting for the database (another process is writing)"
        print(
            ("\r" + line) if self.tty else line,
            end="" if self.tty and not final else "\n",
            file=sys.stderr,
            flush=True,
        )
