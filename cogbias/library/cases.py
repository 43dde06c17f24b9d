"""The test case itself: its value generators, templates and metric, and its canonical TOML.

A test case file is TOML (see `docs/format.md`); `parsing` reads and validates it into a
`TestCase`, `saving` writes one back. The canonical text (`to_toml`) lives here because it is
also the test case's version: results are tied to the hash of the exact text.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from cogbias.core import expressions, metrics
from cogbias.core.metrics import MetricParams
from cogbias.core.templates import LLMGap, Template
from cogbias.library.problems import short

DATA_DIR = Path(os.environ.get("COGBIAS_DATA", Path(__file__).resolve().parents[2] / "data"))
BUILTIN_DIR = DATA_DIR / "biases"


def user_dir() -> Path:
    """Where user test cases live; built-ins are never overwritten."""
    home = Path(os.environ.get("COGBIAS_HOME", Path.home() / ".cogbias"))
    return home / "biases"


SCALES: dict[str, int | None] = {"likert7": 7, "percent11": 11, "custom": None}
PERCENT_OPTIONS = tuple(f"{p}%" for p in range(0, 101, 10))
VALUE_TYPES: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    # type -> parameter -> (accepted TOML types, required)
    "int": {"min": (int, True), "max": (int, True), "step": (int, False)},
    "float": {"min": ((int, float), True), "max": ((int, float), True), "decimals": (int, False)},
    "choice": {"options": (list, True), "weights": (list, False)},
    "sample": {"options": (list, True), "k": (int, True)},
    "derived": {"expr": (str, True)},
}


@dataclass(frozen=True)
class ValueSpec:
    """A declarative value generator; `params` is the TOML table minus `type`."""

    name: str
    type: str
    params: dict[str, Any]

    def sample(self, rng: random.Random, known: Mapping[str, Any]) -> Any:
        p = self.params
        if self.type == "int":
            return rng.randrange(p["min"], p["max"] + 1, p.get("step", 1))
        if self.type == "float":
            value = rng.uniform(p["min"], p["max"])
            return round(value, p["decimals"]) if "decimals" in p else value
        if self.type == "choice":
            return rng.choices(p["options"], weights=p.get("weights"))[0]
        if self.type == "sample":
            return rng.sample(p["options"], p["k"])
        return expressions.evaluate(p["expr"], known)


@dataclass(frozen=True)
class Departure:
    """One way a built-in test case differs from the design it follows, and the reason."""

    what: str
    why: str


@dataclass(frozen=True)
class TestCase:
    """A bias test: control and treatment templates, value generators and a metric."""

    __test__ = False  # not a pytest class

    id: str
    name: str
    description: str
    references: tuple[str, ...]
    variants: tuple[str, ...]
    scale_kind: str
    scale_options: tuple[str, ...] | None
    values: dict[str, ValueSpec]
    control: Template
    treatment: Template
    metric: dict[str, Any]
    # gap instruction -> author-written example fills (the offline `examples` generator)
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # where this test case differs from the published design it follows (docs/designs.md)
    departures: tuple[Departure, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def n_options(self) -> int:
        return len(self.control.options)

    @functools.cached_property
    def content_hash(self) -> str:
        """Version of the test case: results are tied to the exact text that produced them."""
        return hashlib.sha256(to_toml(self).encode()).hexdigest()[:16]

    @property
    def is_builtin(self) -> bool:
        return self.path is not None and self.path.parent.resolve() == BUILTIN_DIR.resolve()

    def templates(self) -> dict[str, Template]:
        return {"control": self.control, "treatment": self.treatment}

    def named_gaps(self) -> dict[str, LLMGap]:
        return {
            g.name: g
            for t in (self.control, self.treatment)
            for g in t.llm_gaps()
            if g.name is not None
        }

    def sample_values(
        self, rng: random.Random, fixed: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Draw every value generator once, in file order, after the variant.

        `fixed` gives some values instead of drawing them (the checker uses it to walk a
        domain). Raises `SamplingError` (naming this test case, the value and the values
        drawn so far) when a derived value fails for the drawn values.
        """
        fixed = fixed or {}
        values: dict[str, Any] = {
            "variant": fixed.get("variant")
            or (rng.choice(self.variants) if self.variants else "default")
        }
        for spec in self.values.values():
            values[spec.name] = (
                fixed[spec.name] if spec.name in fixed else self.draw(spec, rng, values)
            )
        return values

    def draw(self, spec: ValueSpec, rng: random.Random, known: dict[str, Any]) -> Any:
        """One value generator; its failure is this instance's, reported with the values."""
        try:
            return spec.sample(rng, known)
        except expressions.ExpressionError as exc:
            raise SamplingError(self.id, spec.name, known, exc.message, exc.offset) from None
        except (ValueError, ArithmeticError) as exc:  # a range or weights nothing can be drawn from
            raise SamplingError(self.id, spec.name, known, f"cannot be drawn: {exc}") from None

    def metric_params(self, values: Mapping[str, Any]) -> MetricParams:
        """The metric parameters for drawn values; `SamplingError` when one is unusable."""
        resolved: dict[str, float] = {}
        for key, default in (("k", 1), ("y1", 0), ("y2", 0)):
            raw = self.metric.get(key, default)
            try:
                value = expressions.evaluate(raw, values) if isinstance(raw, str) else raw
            except expressions.ExpressionError as exc:
                raise SamplingError(
                    self.id, f"metric.{key}", values, exc.message, exc.offset
                ) from None
            problem = metrics.param_problem(key, value, self.n_options, off_scale=True)
            if problem:
                raise SamplingError(self.id, f"metric.{key}", values, problem)
            resolved[key] = float(value)
        return MetricParams(
            k=resolved["k"],
            y1=resolved["y1"],
            y2=resolved["y2"],
            flip_control=bool(self.metric.get("flip_control", False)),
            flip_treatment=bool(self.metric.get("flip_treatment", False)),
        )


class SamplingError(expressions.ExpressionError):
    """A value or metric parameter that fails for one drawn instance (not for the file).

    The runner catches it (as any `ExpressionError`) to fail *that instance* and go on; the
    message names the test case, the value and the values drawn, so the failure can be
    reproduced. `message` is the bare reason, `offset` its position in the expression.
    """

    def __init__(
        self,
        test_case: str,
        name: str,
        values: Mapping[str, Any],
        message: str,
        offset: int | None = None,
    ) -> None:
        drawn = ", ".join(f"{k}={short(v)}" for k, v in values.items())
        super().__init__(f"test case '{test_case}': {name} fails with {drawn}: {message}")
        self.test_case = test_case
        self.name = name
        self.values = dict(values)
        self.message = message
        self.offset = offset


def to_toml(case: TestCase) -> str:
    """Serialise in the canonical layout (the built-in files are stored in it)."""
    doc = tomlkit.document()
    doc["id"] = case.id
    doc["name"] = case.name
    doc["description"] = _text(case.description)
    doc["references"] = _list(case.references)
    if case.variants:
        doc["variants"] = list(case.variants)
    scale = tomlkit.table()
    scale["kind"] = case.scale_kind
    if case.scale_options is not None:
        scale["options"] = _list(case.scale_options)
    doc["scale"] = scale
    if case.values:
        values = tomlkit.table(is_super_table=True)
        for spec in case.values.values():
            table = tomlkit.table()
            table["type"] = spec.type
            for key, value in spec.params.items():
                table[key] = _list(value) if isinstance(value, list) and len(value) > 4 else value
            values[spec.name] = table
        doc["values"] = values
    for half, template in case.templates().items():
        table = tomlkit.table()
        table["situation"] = _text(template.situation)
        table["prompt"] = _text(template.prompt)
        if case.scale_options is None or template.options != case.scale_options:
            if not (case.scale_kind == "percent11" and template.options == PERCENT_OPTIONS):
                table["options"] = _list(template.options)
        doc[half] = table
    metric = tomlkit.table()
    for key, value in case.metric.items():
        metric[key] = value
    doc["metric"] = metric
    if case.departures:
        departures = tomlkit.aot()
        for departure in case.departures:
            table = tomlkit.table()
            table["what"] = _text(departure.what)
            table["why"] = _text(departure.why)
            departures.append(table)
        doc["departures"] = departures
    if case.examples:
        examples = tomlkit.table()
        for key, fills in case.examples.items():
            examples[key] = _list(fills)
        doc["examples"] = examples
    return tomlkit.dumps(doc)


def _text(value: str) -> Any:
    if "\n" in value or len(value) > 90:
        return tomlkit.string(value, multiline=True)
    return value


def _list(items: Iterable[Any]) -> Any:
    array = tomlkit.array()
    for item in items:
        array.append(item)
    array.multiline(True)
    return array
