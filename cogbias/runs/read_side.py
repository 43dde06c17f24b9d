"""What a kind of run offers its readers: the page that shows its results, the tables its rows
live in, how they export, what they reduce to and how its settings read.

`work.RunKind` is what the executor asks of a kind (plan, work, save); this is what every
reader asks of it: Explore, Studies and Compare (`page`), `cogbias results` (`cells`),
`cogbias export` and the Hub export (`exports`), `cogbias report` and a Hub card's methods
(`settings`, `failures`, `abstained`, `unreadable`), the end of a run, `cogbias runs` and
the Run page (`unreadable`), the Run page's "Open in …" button (`page`) and deletion
(`tables`). A reader holds a run's `Run` record, whose `kind` is resolved once
(`kinds.record`), and asks it; none of them tells kinds apart by name.

A kind subclasses `ReadSide` and overrides what it has. What it leaves out reads as nothing
to show: no page, no export rows, no cells (a report says so), its stored spec as its
settings, no failure kinds or abstentions, and deleting one of its runs removes its `runs`
row and only the tables it declares.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cogbias.core.run_record import ResultsPage, Run, RunRows, SharedRows

if TYPE_CHECKING:
    import pandas as pd

    from cogbias.store import Store

Rows = Callable[["Store", Run, "str | None"], Iterable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class ExportTable:
    """One table of a run's rows as exported: its name (what `cogbias export` writes and a
    Hub config is called: "pairs", "turns", "instances"), its columns (name -> type, as in
    `core/export_columns.py`), its rows in batches (of one model, when one is given) and what
    one row is, in the words of a Hub dataset card."""

    name: str
    columns: Mapping[str, str]
    rows: Rows
    description: str


class ReadSide:
    """A kind's read side, with the defaults of a kind that has nothing more to show."""

    name: str  # the kind's (see `work.RunKind`)
    # The page that shows its results, or None (read by export and report alone).
    page: ResultsPage | None = None
    # Where its rows live: what deleting one of its runs removes, and what it counts.
    tables: tuple[RunRows | SharedRows, ...] = ()
    # Its rows as exported; the first is what `cogbias export --run` writes, the Hub export
    # writes them all.
    exports: tuple[ExportTable, ...] = ()
    noun: str = "row"  # one of its results rows, as a deletion counts them ("decision")
    failed_noun: str = "failed"  # what its failed units are, as a run's end reports them

    def target(self, spec: Mapping[str, Any]) -> str:
        """What the run covers, in a few words: every kind says (`work.RunKind.target`)."""
        raise NotImplementedError(f"the {self.name} kind says what its runs cover")

    def cells(self, store: Store, run: Run) -> pd.DataFrame:
        """Its rows reduced to one row per cell (by the statistics layer, `studies/`): what
        `cogbias results run ID` prints and a report shows when its page has no report of
        its own. Empty: nothing to reduce."""
        import pandas as pd

        return pd.DataFrame()

    def settings(self, store: Store, run: Run) -> tuple[str, ...]:
        """What the run asked, in words, from its stored spec (a report's and a Hub card's
        methods)."""
        name = f" ({run.name})" if run.name else ""
        head = f"Run {run.id}{name}: a {self.name} run on {self.target(run.spec)}"
        fields = [f"{key}: {value}" for key, value in sorted(run.spec.items()) if key != "kind"]
        return (f"{head}, status {run.status}", *fields)

    def failures(self, store: Store, run: Run) -> Mapping[str, int]:
        """Its failed units by failure kind (`core.records.FAILURE_KINDS`), where its rows
        say; empty when they do not."""
        return {}

    def abstained(self, store: Store, run: Run) -> int:
        """How many of its units abstained (a result, counted apart from failures: a paired
        run's pairs whose samples its reducer left undecided); 0 when none can."""
        return 0

    def unreadable(self, store: Store, run: Run) -> list[str]:
        """The stored reason of each of its units whose answer could not be read (failed, of
        kind `unparseable`), which `views.unread_answers` says in words with the fix (the
        end of a run, `cogbias runs`, the Run page, a report); empty when its rows do not
        say."""
        return []


def owned(kind: ReadSide) -> list[RunRows]:
    """The tables holding a kind's runs' own rows."""
    return [rows for rows in kind.tables if isinstance(rows, RunRows)]


def shared(kind: ReadSide, every: Iterable[ReadSide]) -> list[SharedRows]:
    """The shared rows a kind's runs point at, each with the references of `every` kind that
    points at the same table: a shared row stays while a run of any kind uses it."""
    found = []
    for rows in kind.tables:
        if isinstance(rows, SharedRows):
            refs = {
                ref
                for other in every
                for theirs in other.tables
                if isinstance(theirs, SharedRows)
                and (theirs.table, theirs.key) == (rows.table, rows.key)
                for ref in theirs.refs
            }
            found.append(SharedRows(rows.table, rows.key, tuple(sorted(refs)), rows.kept_if_set))
    return found
