"""The one question a class answers, as data: each condition's text as a participant reads
it and as a model is asked, its options and the keys its answers are stored as.

A session stores its `Question` as JSON when it opens (`cogbias.classroom.questions` builds
one from a study's test or a filled test case), so a later change of the study file or the
library never changes what a running class, or its results, refer to. It sits here, below
every layer that reads it: the class run kind (`cogbias.runs.class_answers`) asks models
exactly these words and the statistics (`cogbias.studies.condition_summary`) summarise the
answers by its kind.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("choice", "scale", "number")


@dataclass(frozen=True)
class Question:
    """What every participant of a session answers, one condition each."""

    source: str  # "classic" (a study's test) | "testcase"
    title: str
    conditions: tuple[str, ...]
    labels: dict[str, str]  # condition -> a short label for tables and charts
    texts: dict[str, str]  # condition -> the question as a participant reads it
    prompts: dict[str, str]  # condition -> the exact text a model is asked
    system: str
    options: dict[str, tuple[str, ...]]  # condition -> option labels, in order
    keys: tuple[str, ...]  # the stored answer of each option position
    kind: str  # one of KINDS
    low: float | None = None  # bounds of a number answer
    high: float | None = None
    number_label: str = ""  # the words before a number's blank ("Percentage:")
    reference: str | None = None
    reference_conditions: dict[str, str] = field(default_factory=dict)
    study: str = ""
    test: str = ""
    test_case: str = ""
    instance_id: str = ""
    scenario: int = 0
    seed: int = 0

    def option_index(self, answer: str) -> int | None:
        """The position of a stored answer among the options (None: not an option)."""
        return self.keys.index(answer) if answer in self.keys else None

    def label(self, condition: str) -> str:
        """How tables and charts name a condition."""
        return self.labels.get(condition, condition)

    def identity(self) -> str:
        """What makes two sessions' questions one question, so their classes can be pooled:
        what participants read and could answer (kind, conditions, texts, options, keys,
        bounds), hashed; neither its labels nor where it came from."""
        same = {
            "kind": self.kind,
            "conditions": list(self.conditions),
            "texts": self.texts,
            "options": {c: list(o) for c, o in self.options.items()},
            "keys": list(self.keys),
            "bounds": [self.low, self.high],
        }
        text = json.dumps(same, ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Question:
        data: dict[str, Any] = json.loads(text)
        data["conditions"] = tuple(data["conditions"])
        data["keys"] = tuple(data["keys"])
        data["options"] = {c: tuple(o) for c, o in data["options"].items()}
        return cls(**data)
