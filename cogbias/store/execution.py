"""The queries a run's executor and its kinds need, beside the store's other tables.

A mixin of `Store` (it uses `self.db` and `self.query`), so the run machinery in
`cogbias.runs` never writes SQL itself: planning a dataset run, rebuilding a study run's
conversations on resume, and counting what is left to retry all read through here.
"""

from __future__ import annotations

from typing import Any


class ExecutionQueries:
    """Reads of the runs machinery (planning, resuming, ending a run)."""

    db: Any  # the Store's connection
    query: Any  # Store.query: rows as dicts

    def dataset_instance_rows(self, dataset: str) -> list[dict[str, Any]]:
        """(id, test_case) of a dataset's instances, in import order."""
        return self.query(
            "select id, test_case from instances where dataset = ? order by rowid", (dataset,)
        )

    def dataset_names(self) -> list[str]:
        return [r["name"] for r in self.query("select name from datasets")]

    def study_prompt_rows(self, dataset: str) -> list[dict[str, Any]]:
        """The prompts an imported thesis dataset stored (none when no thesis was imported)."""
        if "study_prompts" not in self.db.table_names():
            return []
        return self.query("select * from study_prompts where dataset = ?", [dataset])

    def study_source(self, digest: str) -> str | None:
        """The study source a run was planned from, by its hash."""
        rows = self.query("select source from study_sources where hash = ?", [digest])
        return rows[0]["source"] if rows else None

    def study_turn_states(self, run_id: str) -> list[dict[str, Any]]:
        """Every stored turn of a study run: where it stands, and what the model said."""
        columns = "conversation, turn, status, failure_kind, response"
        return self.query(f"select {columns} from study_calls where run_id = ?", [run_id])

    def transient_study_turns(self, run_id: str) -> int:
        """Turns of a study run that failed on a transient error (asked again on resume)."""
        return self.query(
            "select count(*) n from study_calls where run_id = ? and status = 'failed' "
            "and failure_kind = 'transient'",
            [run_id],
        )[0]["n"]
