"""Test cases, scenarios, instances and decisions: writes, and the reads that join them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogbias.core.records import DECISION_COLUMNS, Decision, DecisionStatus, Pair, cap_text
from cogbias.core.redact import redact_row, redactor
from cogbias.store.connection import StoreBase, now, record_rows

_PROVIDER_JSON = ("control_samples", "treatment_samples")  # answers inside JSON lists
_PROVIDER_TEXTS = (
    "error",
    "control_answer",
    "treatment_answer",
    "control_extraction",
    "treatment_extraction",
    "control_reasoning",
    "treatment_reasoning",
    "control_rewrite",
    "treatment_rewrite",
)

# Texts of any length a model wrote: capped as they are stored (cut ones mark `truncated`).
_CAPPED = (
    "control_answer", "treatment_answer", "control_reasoning", "treatment_reasoning",
    "control_rewrite", "treatment_rewrite",
)  # fmt: skip

_INSTANCE_JSON = ("control", "treatment", "insertions", "values_json")  # inside strings only

# A decision joined to its instance, as `Pair.from_row` reads it (each half selected once;
# `_rowid` is for keyset paging).
_PAIR_SELECT = (
    "select d.rowid as _rowid, d.*, i.dataset, i.scenario, i.variant, i.control as control_half, "
    "i.treatment as treatment_half, i.n_options, i.metric "
    "from decisions d join instances i on i.id = d.instance_id"
)


def _where(clauses: Sequence[str]) -> str:
    """` where A and B` for the conditions, or nothing for none."""
    return " where " + " and ".join(clauses) if clauses else ""


@dataclass(frozen=True)
class PairFilter:
    """Which stored pairs a page reads (None: any): `DecisionsRepo.pairs` pages through them
    and `pair_count` counts them with one WHERE clause, so a page's count and rows agree."""

    bias: str | None = None
    model: str | None = None
    run_id: str | None = None
    dataset: str | None = None
    search: str | None = None


class DecisionsRepo(StoreBase):
    """`test_cases`, `scenarios`, `instances` and `decisions`."""

    def save_test_case(self, case_id: str, name: str, content_hash: str, source: str) -> None:
        with self.atomic():
            self.db["test_cases"].insert(
                {
                    "hash": content_hash,
                    "id": case_id,
                    "name": name,
                    "source": source,
                    "created_at": now(),
                },
                pk="hash",
                ignore=True,
            )

    def pin_test_cases(self, run_id: str, hashes: Mapping[str, str]) -> None:
        """Record which version of each test case a run uses; a version once pinned stays."""
        with self.atomic():
            self.db.conn.executemany(
                "insert or ignore into run_test_cases (run_id, test_case, hash) values (?, ?, ?)",
                [(run_id, case_id, digest) for case_id, digest in hashes.items()],
            )

    def pinned_test_cases(self, run_id: str) -> dict[str, tuple[str, str | None]]:
        """A run's pinned test cases: id -> (hash, stored source, None when it was not kept)."""
        rows = self.db.execute(
            """select p.test_case, p.hash, t.source from run_test_cases p
               left join test_cases t on t.hash = p.hash where p.run_id = ?""",
            [run_id],
        ).fetchall()
        return {case_id: (digest, source) for case_id, digest, source in rows}

    def save_scenarios(self, scenarios: Iterable[Mapping[str, Any]]) -> None:
        with self.atomic():
            self.db["scenarios"].insert_all(scenarios, pk="id", replace=True)

    def save_instances(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert instances; an existing id keeps its row (instances are immutable once made)."""
        if rows:
            clean = redactor()
            with self.atomic():
                self.db["instances"].insert_all(
                    [
                        {**redact_row(r, clean, ("error",), _INSTANCE_JSON), "created_at": now()}
                        for r in rows
                    ],
                    pk="id",
                    ignore=True,
                )

    def save_decisions(self, decisions: Sequence[Decision], created_at: str | None = None) -> None:
        """Upsert decisions by id: the one door of `decisions`, for runs and importers alike
        (a resumed run fills the gaps and never duplicates; a replaced import rewrites).

        Only `Decision` records pass (TypeError otherwise). Every text that came from a model
        or a file is redacted here, whoever wrote it: a careless endpoint may echo a key, a
        published file may hold one; answers are capped (`records.cap_text`, marked
        `truncated`). A decision without a `created_at` is stamped `created_at` or now."""
        rows = record_rows(decisions, Decision)
        if not rows:
            return
        clean, stamp = redactor(), created_at or now()
        for row in rows:
            row.update(redact_row(row, clean, _PROVIDER_TEXTS, _PROVIDER_JSON))
            for half in _CAPPED:
                row[half], cut = cap_text(row[half])
                row["truncated"] = int(bool(row["truncated"]) or cut)
            row["created_at"] = row["created_at"] or stamp
        sql = (
            f"insert or replace into decisions ({', '.join(DECISION_COLUMNS)}) "
            f"values ({', '.join('?' * len(DECISION_COLUMNS))})"
        )
        with self.atomic():
            self.db.conn.executemany(sql, [tuple(r.values()) for r in rows])

    def forget_failed_instances(self, ids: Sequence[str]) -> None:
        """Delete failed instances among `ids`, so that a retry generates them afresh."""
        with self.atomic():
            for i in range(0, len(ids), 500):
                chunk = ids[i : i + 500]
                marks = ",".join("?" * len(chunk))
                self.db.execute(
                    f"delete from instances where status = 'failed' and id in ({marks})", chunk
                )

    def existing_instance_ids(self, ids: Iterable[str]) -> set[str]:
        return self._existing("instances", ids)

    def existing_decision_ids(self, run_id: str) -> set[str]:
        return {
            r[0] for r in self.db.execute("select id from decisions where run_id = ?", (run_id,))
        }

    def instances(
        self, ids: Iterable[str] | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        if dataset is not None:
            return self.query(
                "select * from instances where dataset = ? order by rowid", (dataset,)
            )
        ids = list(ids or [])
        rows: list[dict[str, Any]] = []
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            rows += self.query(
                f"select * from instances where id in ({','.join('?' * len(chunk))})", chunk
            )
        return rows

    def results(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """Bias x model: mean score, scored pairs (n), failed pairs and abstained ones (a
        half's samples left undecided by the run's reducer: `DecisionStatus.ABSTAINED`)."""
        clauses, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, "
            "avg(case when d.status = 'ok' then d.score end) as mean, "
            "sum(d.status = 'ok') as n, sum(d.status = 'failed') as failures, "
            "sum(d.status = ?) as abstained "
            f"from decisions d{_where(clauses)} group by d.test_case, d.model "
            "order by d.test_case, d.model",
            [DecisionStatus.ABSTAINED, *params],
        )

    def scores(self, run_id: str | None = None, dataset: str | None = None) -> list[dict[str, Any]]:
        """One row per decision with its bias, model, status and score (for analysis)."""
        clauses, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, d.status as status, d.score as score "
            f"from decisions d{_where(clauses)}",
            params,
        )

    def pairs(
        self,
        bias: str | None = None,
        model: str | None = None,
        run_id: str | None = None,
        dataset: str | None = None,
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[Pair]:
        """Paired responses with their instance texts, for reading what a model actually said
        (`pair_count` counts them: `PairFilter(bias, model, run_id, dataset, search)`)."""
        where, params = self._pair_filter(PairFilter(bias, model, run_id, dataset, search))
        sql = f"{_PAIR_SELECT}{where} order by d.rowid limit ? offset ?"
        return [Pair.from_row(r) for r in self.query(sql, [*params, limit, offset])]

    def pair_count(self, which: PairFilter | None = None) -> int:
        """How many rows `pairs` would return for `which` without a limit (for paging)."""
        which = which or PairFilter()
        where, params = self._pair_filter(which)
        join = " join instances i on i.id = d.instance_id" if which.search else ""
        sql = f"select count(*) from decisions d{join}{where}"
        return int(self.db.execute(sql, params).fetchone()[0])

    def _pair_filter(self, which: PairFilter) -> tuple[str, list[Any]]:
        """The WHERE clause shared by `pairs` and `pair_count` (search needs `i` joined)."""
        clauses, params = self._filter(which.run_id, which.dataset)
        for column, value in (("d.test_case", which.bias), ("d.model", which.model)):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        if which.search:
            clauses.append(
                "(i.control like ? or i.treatment like ? or d.control_answer like ? "
                "or d.treatment_answer like ? or i.scenario like ?)"
            )
            params += [f"%{which.search}%"] * 5
        return _where(clauses), params

    @staticmethod
    def _filter(run_id: str | None, dataset: str | None) -> tuple[list[str], list[Any]]:
        """The conditions (joined by `_where`) and parameters selecting a run's or a
        dataset's decisions; none for every decision."""
        if run_id:
            return ["d.run_id = ?"], [run_id]
        if dataset:
            return ["d.instance_id in (select id from instances where dataset = ?)"], [dataset]
        return [], []

    def unreadable_errors(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """The test case, model and stored reason (`error`) of every decision whose answers
        could not be read (failed, of kind `unparseable`) in a run, a dataset or all: what
        `views.unread_answers` says in words. Such decisions are a small share of any run."""
        clauses, params = self._filter(run_id, dataset)
        clauses += ["d.status = ?", "d.failure_kind = 'unparseable'"]
        return self.query(
            f"select d.test_case, d.model, d.error from decisions d{_where(clauses)}",
            [*params, DecisionStatus.FAILED.value],
        )

    def iter_pairs(
        self,
        run_id: str | None = None,
        dataset: str | None = None,
        model: str | None = None,
        batch: int = 5000,
    ) -> Iterator[list[Pair]]:
        """Decisions joined to their instances, in batches (keyset paging keeps memory flat)."""
        clauses, params = self._filter(run_id, dataset)
        if model:
            clauses.append("d.model = ?")
            params.append(model)
        last = 0
        while True:
            rows = self.query(
                f"{_PAIR_SELECT}{_where([*clauses, 'd.rowid > ?'])} order by d.rowid limit ?",
                [*params, last, batch],
            )
            if not rows:
                return
            last = rows[-1]["_rowid"]
            yield [Pair.from_row(r) for r in rows]

    def decisions_version(self) -> tuple[int, int]:
        """(decisions, largest rowid): changes whenever a decision is written or deleted, so
        a cached summary of decisions knows when to recompute."""
        n, last = self.db.execute("select count(*), max(rowid) from decisions").fetchone()
        return int(n), int(last or 0)

    # ---- explore
    # The Explore page summarises up to hundreds of thousands of decisions on every filter
    # change: SQLite computes per-cell sufficient statistics in one pass (see
    # `cogbias.views.explore`), so no decision row has to travel into Python.

    def score_aggregates(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """Per bias x model x status: rows, and count, sum, sum of squares, sum of |x|, min
        and max of the scores. Grouping by status (rather than filtering inside each
        aggregate) follows the covering index's column order, so SQLite never sorts."""
        clauses, params = self._filter(run_id, dataset)
        return self.query(
            "select d.test_case as bias, d.model as model, d.status as status, "
            "count(*) as rows, count(d.score) as n, total(d.score) as s1, "
            "total(d.score * d.score) as s2, total(abs(d.score)) as sabs, "
            "min(d.score) as smin, max(d.score) as smax "
            f"from decisions d{_where(clauses)} group by d.test_case, d.model, d.status",
            params,
        )

    def instance_metrics(
        self, run_id: str | None = None, dataset: str | None = None, test_cases: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Per bias x model: each distinct (metric, n_options) of its decided instances and
        how many instances carry it, for the exact null under uniform answers
        (`studies.cells.uniform_nulls`). `metric` is NULL for instances without parameters.
        It reads every decision of the test cases asked (all when `test_cases` is empty): ask
        only those `uniform_metrics` leaves out."""
        clauses, params = self._filter(run_id, dataset)
        if test_cases:
            clauses.append(f"d.test_case in ({','.join('?' * len(test_cases))})")
            params += list(test_cases)
        return self.query(
            "select d.test_case as bias, d.model as model, i.metric as metric, "
            "i.n_options as n_options, count(distinct i.id) as instances "
            "from decisions d join instances i on i.id = d.instance_id "
            f"{_where(clauses)} group by d.test_case, d.model, i.metric, i.n_options",
            params,
        )

    def uniform_metrics(self) -> list[dict[str, Any]]:
        """The test cases whose stored instances all carry one (metric, n_options), with it:
        every cell of such a test case has that one null, so it needs none of the decision
        rows `instance_metrics` reads (600,000 of them take seconds; this reads the
        instances once)."""
        return self.query(
            "select test_case, min(metric) as metric, min(n_options) as n_options "
            "from instances group by test_case "
            "having count(distinct coalesce(metric, '') || '|' || coalesce(n_options, '')) = 1"
        )

    # ---- comparing two models on the same instances (`analysis.compare_models`)

    def paired_scores(
        self,
        model_a: str,
        model_b: str,
        run_id: str | None = None,
        dataset: str | None = None,
    ) -> list[dict[str, Any]]:
        """Per instance both models scored: bias, instance_id, score_a, score_b.

        A model with several scored decisions on one instance (repeats, or two runs) counts
        with their mean, so each instance is one pair in the paired test.
        """
        clauses, params = self._filter(run_id, dataset)
        clauses += ["d.status = 'ok'", "d.score is not null", "d.model in (?, ?)"]
        return self.query(
            "with s as (select d.test_case as bias, d.instance_id, d.model, avg(d.score) as score "
            f"from decisions d{_where(clauses)} "
            "group by d.test_case, d.instance_id, d.model) "
            "select a.bias, a.instance_id, a.score as score_a, b.score as score_b "
            "from s a join s b on b.instance_id = a.instance_id and b.bias = a.bias "
            "where a.model = ? and b.model = ? order by a.bias, a.instance_id",
            [*params, model_a, model_b, model_a, model_b],
        )

    def run_scores(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Per run, bias, model and instance: the mean score of its scored decisions (repeats
        averaged), so each instance is one pair when runs on the same instances are compared
        (a factor's levels, `studies.factor_effects`)."""
        marks = ",".join("?" * len(run_ids))
        return self.query(
            "select d.run_id, d.test_case as bias, d.model, d.instance_id, "
            "avg(d.score) as score from decisions d "
            f"where d.run_id in ({marks}) and d.status = 'ok' and d.score is not null "
            "group by d.run_id, d.test_case, d.model, d.instance_id "
            "order by d.run_id, d.test_case, d.model, d.instance_id",
            list(run_ids),
        )

    def run_thinking(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """Per run and model: its pairs, those whose answers reported thinking tokens, the
        tokens they reported and what the pairs cost when asked (cached ones nothing)."""
        marks = ",".join("?" * len(run_ids))
        return self.query(
            "select d.run_id, d.model, count(*) as pairs, "
            "count(d.reasoning_tokens) as reported, "
            "coalesce(sum(d.reasoning_tokens), 0) as reasoning_tokens, "
            "coalesce(sum(d.cost), 0) as cost from decisions d "
            f"where d.run_id in ({marks}) group by d.run_id, d.model order by d.run_id, d.model",
            list(run_ids),
        )

    def trace_signal(
        self, run_id: str | None = None, dataset: str | None = None
    ) -> list[dict[str, Any]]:
        """Per run, bias and model: the halves with a trace whose signal was read (a
        treatment detail to look for) and those whose trace names it (`core.reasoning`)."""
        clauses, params = self._filter(run_id, dataset)
        halves = ("d.control_trace_mentions", "d.treatment_trace_mentions")
        return self.query(
            "select d.run_id, d.test_case as bias, d.model, "
            f"count({halves[0]}) + count({halves[1]}) as traced, "
            f"coalesce(sum({halves[0]}), 0) + coalesce(sum({halves[1]}), 0) as mentioning "
            f"from decisions d{_where([*clauses, f'({halves[0]} is not null or {halves[1]} is not null)'])} "
            "group by d.run_id, d.test_case, d.model order by d.run_id, d.test_case, d.model",
            params,
        )

    def instance_pairs(self, instance_id: str, models: Sequence[str]) -> list[Pair]:
        """Every decision of these models on one instance, as `pairs` returns them."""
        marks = ",".join("?" * len(models))
        sql = f"{_PAIR_SELECT} where d.instance_id = ? and d.model in ({marks}) order by d.rowid"
        return [Pair.from_row(r) for r in self.query(sql, [instance_id, *models])]
