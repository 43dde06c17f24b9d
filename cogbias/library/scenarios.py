"""The business scenarios (data/scenarios.csv) a test case is instantiated in."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from cogbias.library.cases import DATA_DIR


@dataclass(frozen=True)
class Scenario:
    id: int
    industry_group: str
    position: str
    decision: str

    @property
    def text(self) -> str:
        """The scenario sentence given to the generator LLM."""
        article = "An" if self.position[:1].lower() in "aeiou" else "A"
        return (
            f"{article} {self.position} at a company from the {self.industry_group} industry group "
            f"deciding {self.decision}."
        )


def load_scenarios(path: Path | None = None) -> list[Scenario]:
    path = path or DATA_DIR / "scenarios.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        return [
            Scenario(int(r["id"]), r["industry_group"], r["position"], r["decision"])
            for r in csv.DictReader(handle)
        ]
