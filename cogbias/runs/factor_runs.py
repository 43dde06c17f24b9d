"""Which stored runs are the levels of a factor: paired runs whose specs are the same but for
the factor's field (`runs.factors.FACTORS`: the reasoning effort, the intervention), so they
asked the same instances of the same models in the same way (`studies.factor_effects` sets
them side by side pair by pair).

A run that names no effort is the level `default` (each model's own effort); one that names
no intervention is `none`. Levels are ordered as the factor orders them (efforts from least to
most, `default` last), and the first is the reference unless the caller names another.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cogbias.core.run_record import ResultsPage, Run
from cogbias.runs.factors import FACTORS

DEFAULT_EFFORT_LEVEL = "default"  # a run that names no effort: each model thinks at its own


@dataclass(frozen=True)
class FactorSet:
    """The runs of one design at each level of `factor` (level -> run id, in the factor's
    order); `design` says in a few words what they share."""

    factor: str
    levels: dict[str, str]
    design: str

    @property
    def reference(self) -> str:
        return next(iter(self.levels))

    @property
    def by_run(self) -> dict[str, str]:
        """Run id -> level."""
        return {run_id: level for level, run_id in self.levels.items()}

    def label(self) -> str:
        return f"{self.design}: {', '.join(self.levels)}"


def check_factor(factor: str) -> str:
    if factor not in FACTORS:
        raise ValueError(f"unknown factor {factor[:30]!r}; use one of {', '.join(FACTORS)}")
    return factor


def level_of(run: Run, factor: str) -> str:
    field, _ = FACTORS[check_factor(factor)]
    value = run.spec.get(field)
    if value is None:
        return DEFAULT_EFFORT_LEVEL if factor == "effort" else "none"
    return str(value)


def _order(factor: str, level: str) -> int:
    known = FACTORS[factor][1]
    return known.index(level) if level in known else len(known)


def _design(run: Run, factor: str) -> str:
    """The spec without the factor's field: equal for the runs of one design."""
    field, _ = FACTORS[factor]
    spec = {k: v for k, v in run.spec.items() if k not in (field, "kind")}
    return json.dumps(spec, sort_keys=True)


def _paired(runs: Iterable[Run]) -> list[Run]:
    """The runs whose results are pairs (shown on Explore: the paired kinds' read side)."""
    return [r for r in runs if r.kind is not None and r.kind.page is ResultsPage.EXPLORE]


def _described(run: Run) -> str:
    spec = run.spec
    target = spec.get("dataset") or ",".join(spec.get("biases") or []) or "all test cases"
    return f"{target} × {', '.join(spec.get('models') or [])}"


def factor_sets(runs: Iterable[Run], factor: str) -> list[FactorSet]:
    """Every design with runs at two levels of `factor` or more (newest designs first; of two
    runs of one design at one level, which cannot happen with equal specs, the newer)."""
    check_factor(factor)
    designs: dict[str, dict[str, Run]] = {}
    for run in _paired(runs):
        designs.setdefault(_design(run, factor), {}).setdefault(level_of(run, factor), run)
    found = []
    for by_level in designs.values():
        if len(by_level) < 2:
            continue
        ordered = sorted(by_level, key=lambda lv: (_order(factor, lv), lv))
        levels = {lv: by_level[lv].id for lv in ordered}
        found.append(FactorSet(factor, levels, _described(next(iter(by_level.values())))))
    return found


def chosen_set(runs: Iterable[Run], factor: str, run_ids: Sequence[str]) -> FactorSet:
    """The factor set of the runs `run_ids` (at least two, of one design, each at its own
    level); ValueError saying what differs otherwise."""
    check_factor(factor)
    by_id = {r.id: r for r in _paired(runs)}
    missing = [r for r in run_ids if r not in by_id]
    if missing:
        raise ValueError(f"no paired run {missing[0]} here; see `cogbias runs`")
    chosen = [by_id[r] for r in dict.fromkeys(run_ids)]
    if len(chosen) < 2:
        raise ValueError("a factor compares two runs or more: give their ids, comma-separated")
    if len({_design(r, factor) for r in chosen}) > 1:
        raise ValueError(
            f"these runs differ in more than the {factor}: a paired comparison needs runs "
            "that are the same but for it (same test cases or dataset, models, seed, ...)"
        )
    levels = [level_of(r, factor) for r in chosen]
    if len(set(levels)) < len(levels):
        raise ValueError(f"two of these runs are at the same {factor} level: give one of each")
    ordered = sorted(zip(levels, chosen, strict=True), key=lambda p: (_order(factor, p[0]), p[0]))
    return FactorSet(factor, {lv: r.id for lv, r in ordered}, _described(chosen[0]))


def found_set(runs: Sequence[Run], factor: str, run_ids: Sequence[str] = ()) -> FactorSet:
    """The runs named, or the one design with two levels or more; ValueError listing the
    designs when there are several (name the runs) or none."""
    if run_ids:
        return chosen_set(runs, factor, run_ids)
    sets = factor_sets(runs, factor)
    if len(sets) == 1:
        return sets[0]
    if not sets:
        raise ValueError(
            f"no runs here differ in the {factor} alone: run the same test cases and models "
            f"at two levels or more (e.g. --reasoning-effort low,high or --intervention "
            "none,awareness)"
        )
    listed = "; ".join(f"{s.label()} ({','.join(s.levels.values())})" for s in sets[:5])
    raise ValueError(f"several designs vary the {factor}: name the runs with --runs ({listed})")
