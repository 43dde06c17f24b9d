"""Imported datasets: their rows, bulk inserts, browsing, replacing and deleting them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from cogbias.core.records import dumps
from cogbias.store.connection import StoreBase, now


class DatasetsRepo(StoreBase):
    """`datasets`, and a dataset's instances and decisions."""

    def save_dataset(
        self, name: str, kind: str, source: str, rows: int, meta: Mapping[str, Any]
    ) -> None:
        with self.atomic():
            self.db["datasets"].insert(
                {
                    "name": name,
                    "kind": kind,
                    "source": source,
                    "rows": rows,
                    "meta": dumps(meta),
                    "imported_at": now(),
                },
                pk="name",
                replace=True,
            )

    # ---- datasets
    # Imports write hundreds of thousands of rows: one prepared statement per table and
    # `executemany` inside the caller's transaction, never a query per row.

    _BULK_TABLES = ("instances", "decisions")

    def insert_rows(
        self,
        table: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        replace: bool = False,
    ) -> int:
        """Bulk insert tuples in `columns` order (call inside `atomic()` for all-or-nothing).

        Existing ids are kept (`insert or ignore`) unless `replace`; returns rows written.
        """
        if table not in self._BULK_TABLES:
            raise ValueError(f"bulk inserts go to {self._BULK_TABLES}, not {table!r}")
        known = set(self.db[table].columns_dict)
        unknown = [c for c in columns if c not in known]
        if unknown:
            raise ValueError(f"{table} has no column(s) {unknown}")
        verb = "insert or replace" if replace else "insert or ignore"
        sql = f"{verb} into {table} ({', '.join(columns)}) values ({', '.join('?' * len(columns))})"
        before = self.db.conn.total_changes
        self.db.conn.executemany(sql, rows)
        return self.db.conn.total_changes - before

    @contextlib.contextmanager
    def bulk_cache(self, mebibytes: int = 128) -> Iterator[None]:
        """A larger page cache while an import writes: inserts under random (hashed) keys
        touch index pages all over the file, and a small cache turns that into disk I/O."""
        old = int(self.db.execute("pragma cache_size").fetchone()[0])
        self.db.execute(f"pragma cache_size = {-int(mebibytes) * 1024}")
        try:
            yield
        finally:
            self.db.execute(f"pragma cache_size = {old}")

    def dataset(self, name: str) -> dict[str, Any] | None:
        rows = self.query("select * from datasets where name = ?", (name,))
        return rows[0] if rows else None

    def datasets(self) -> list[dict[str, Any]]:
        """Imported datasets, newest first, with their stored metadata decoded."""
        rows = self.query("select * from datasets order by imported_at desc")
        for row in rows:
            row["meta"] = json.loads(row["meta"] or "{}")
        return rows

    def delete_dataset(self, name: str, import_run_id: str) -> None:
        """Remove a dataset's instances, its imported decisions and its row (for --replace).

        Decisions of later runs on those instances stay: they belong to their runs.
        """
        with self.atomic():
            self.db.execute("delete from decisions where run_id = ?", (import_run_id,))
            self.db.execute("delete from instances where dataset = ?", (name,))
            self.db.execute("delete from datasets where name = ?", (name,))

    def dataset_run_users(self, name: str, import_run_id: str) -> list[str]:
        """Runs (other than the dataset's own published decisions) with decisions on its
        instances: a replace must not leave them pointing at instances that are gone."""
        rows = self.db.execute(
            "select distinct d.run_id from decisions d join instances i on i.id = d.instance_id "
            "where i.dataset = ? and d.run_id != ? order by d.run_id",
            (name, import_run_id),
        ).fetchall()
        return [r[0] for r in rows]

    def stranded_decisions(self, run_ids: Sequence[str]) -> dict[str, int]:
        """Per run among `run_ids`: its decisions whose instance no longer exists."""
        found: dict[str, int] = {}
        for run_id in run_ids:
            (count,) = self.db.execute(
                "select count(*) from decisions where run_id = ? and instance_id not in "
                "(select id from instances)",
                (run_id,),
            ).fetchone()
            if count:
                found[run_id] = int(count)
        return found

    def dataset_contents(self) -> dict[str, dict[str, int]]:
        """What each imported dataset holds, counted in the tables that hold it: its instances
        (test cases, or a token-bias dataset's pairs), its published decisions, and a thesis
        dataset's effect sizes, prompts and model features. Counted, not read from the import's metadata, so
        a kind whose rows live elsewhere (the thesis' effect sizes) is not shown as empty."""
        counts: dict[str, dict[str, int]] = {}
        for name, meta in self.db.execute("select name, meta from datasets").fetchall():
            run_id = json.loads(meta or "{}").get("run_id")
            (decisions,) = self.db.execute(
                "select count(*) from decisions where run_id = ?", (run_id,)
            ).fetchone()
            counts[name] = {"instances": 0, "decisions": int(decisions), "effects": 0, "prompts": 0}
            counts[name]["features"] = 0
        for key, sql in (
            ("instances", "select dataset, count(*) from instances group by dataset"),
            ("effects", "select dataset, count(*) from effect_sizes group by dataset"),
            ("prompts", "select dataset, count(*) from study_prompts group by dataset"),
            ("features", "select dataset, count(*) from model_features group by dataset"),
        ):
            for name, count in self.db.execute(sql).fetchall():
                if name in counts:
                    counts[name][key] = int(count)
        return counts

    def dataset_bias_counts(self, name: str) -> list[dict[str, Any]]:
        return self.query(
            "select test_case as bias, count(*) as instances from instances "
            "where dataset = ? group by test_case order by test_case",
            (name,),
        )

    def dataset_instances(
        self,
        name: str,
        bias: str | None = None,
        search: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """One page of a dataset's test cases (browsing 30,000 rows must not load them all)."""
        clauses, params = ["dataset = ?"], [name]
        if bias:
            clauses.append("test_case = ?")
            params.append(bias)
        if search:
            clauses.append("(control like ? or treatment like ? or scenario like ?)")
            params += [f"%{search}%"] * 3
        return self.query(
            f"select * from instances where {' and '.join(clauses)} "
            "order by rowid limit ? offset ?",
            [*params, limit, offset],
        )

    def dataset_instance_rows(self, dataset: str) -> list[dict[str, Any]]:
        """(id, test_case) of a dataset's instances, in import order (a run's plan)."""
        return self.query(
            "select id, test_case from instances where dataset = ? order by rowid", (dataset,)
        )

    def dataset_option_counts(self, dataset: str) -> dict[str, int]:
        """The most options any instance of each test case of a dataset has."""
        rows = self.query(
            "select test_case, max(n_options) as n from instances where dataset = ? "
            "group by test_case",
            (dataset,),
        )
        return {r["test_case"]: int(r["n"] or 0) for r in rows}

    def dataset_unscorable(self, name: str) -> int:
        """Instances of a dataset whose metric parameters are unknown (published results only)."""
        row = self.db.execute(
            "select count(*) from instances where dataset = ? and metric is null", (name,)
        ).fetchone()
        return int(row[0])

    def iter_instances(self, dataset: str, batch: int = 5000) -> Iterator[list[dict[str, Any]]]:
        last = 0
        while True:
            rows = self.query(
                "select rowid as _rowid, * from instances where dataset = ? and rowid > ? "
                "order by rowid limit ?",
                (dataset, last, batch),
            )
            if not rows:
                return
            last = rows[-1]["_rowid"]
            yield rows

    def iter_run_instances(
        self, run_id: str, model: str | None = None, batch: int = 5000
    ) -> Iterator[list[dict[str, Any]]]:
        """The instances a run's decisions (of one model) answered, in batches: what a
        published run's pairs refer to, whichever dataset or generation they came from."""
        last = 0
        while True:
            rows = self.query(
                "select rowid as _rowid, * from instances where rowid > ? and id in "
                "(select instance_id from decisions where run_id = ? "
                "and (? is null or model = ?)) order by rowid limit ?",
                (last, run_id, model, model, batch),
            )
            if not rows:
                return
            last = rows[-1]["_rowid"]
            yield rows

    def dataset_footprint(self, name: str) -> dict[str, Any]:
        """What deleting a dataset removes: its instances, every decision on them (published
        and from runs) and the runs whose decisions all lie on it."""
        instances = self.db.execute(
            "select count(*) from instances where dataset = ?", (name,)
        ).fetchone()[0]
        decisions = self.db.execute(
            "select count(*) from decisions where instance_id in "
            "(select id from instances where dataset = ?)",
            (name,),
        ).fetchone()[0]
        return {
            "instances": int(instances),
            "decisions": int(decisions),
            "runs": self._dataset_runs(name),
        }

    def _dataset_runs(self, name: str) -> list[str]:
        """Runs with decisions on this dataset and on nothing else."""
        rows = self.db.execute(
            "select r.id from runs r where exists (select 1 from decisions d join instances i "
            "on i.id = d.instance_id where d.run_id = r.id and i.dataset = ?) and not exists "
            "(select 1 from decisions d join instances i on i.id = d.instance_id "
            "where d.run_id = r.id and i.dataset is not ?) order by r.created_at",
            (name, name),
        ).fetchall()
        return [r[0] for r in rows]

    def remove_dataset(self, name: str) -> None:
        """Remove a dataset with its instances, all decisions on them and its own runs."""
        with self.atomic():
            runs = self._dataset_runs(name)
            self.db.execute(
                "delete from decisions where instance_id in "
                "(select id from instances where dataset = ?)",
                (name,),
            )
            self.db.execute("delete from instances where dataset = ?", (name,))
            self.db.execute("delete from datasets where name = ?", (name,))
            for run_id in runs:
                self.db.execute("delete from batch_requests where run_id = ?", (run_id,))
                self.db.execute("delete from runs where id = ?", (run_id,))
