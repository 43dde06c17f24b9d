"""Checks across a test case's fields: references, example fills, and a dry run of its values.

A file can be well-formed field by field and still fail at run time: a gap that names a value
that does not exist, a derived value that divides by zero for some draws, a gap without
example fills. These checks find that while the file is loaded, with the place to fix it.
"""

from __future__ import annotations

import difflib
import itertools
import math
import random
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from cogbias.core import expressions, metrics
from cogbias.core.templates import LLMGap, Template
from cogbias.library.cases import SamplingError, TestCase, ValueSpec
from cogbias.library.example_fills import COMMON_GAPS, MIN_EXAMPLES, example_key
from cogbias.library.problems import Checker, clip, short


def check_expression(
    expr: str, path: tuple[str, ...], known: set[str], check: Checker, what: str
) -> bool:
    try:
        names = expressions.referenced_names(expr)
    except expressions.ExpressionError as exc:
        check.add(path, f"{what}: {exc.message}", offset=exc.offset)
        return False
    unknown = sorted(names - known)
    for missing in unknown:
        check.add(
            path,
            f"{what} uses '{missing}', which is not a value defined before it "
            f"(known: {', '.join(sorted(known)) or 'none'})",
            offset=max(expr.find(missing), 0),
        )
    return not unknown


def value_names(case: TestCase) -> set[str]:
    """The names an expression of `case` may use: its values, and `variant` only when the file
    names variants (an error message must never offer a name the file does not have)."""
    return set(case.values) | ({"variant"} if case.variants else set())


def check_references(case: TestCase, check: Checker) -> None:
    named: dict[str, str] = {}
    for half, template in case.templates().items():
        for path, _ in template.fields():
            for gap in template.segments(path):
                if isinstance(gap, LLMGap) and gap.name is not None:
                    if gap.name in case.values or gap.name == "variant":
                        check.add(
                            (half, path),
                            f"gap name '{gap.name}' is already a value name",
                            offset=gap.start,
                        )
                    elif named.setdefault(gap.name, gap.instruction) != gap.instruction:
                        check.add(
                            (half, path),
                            f"gap name '{gap.name}' is used for two different instructions",
                            offset=gap.start,
                        )
    known = value_names(case) | set(named)
    deps: dict[str, set[str]] = {}
    for half, template in case.templates().items():
        for path, _ in template.fields():
            src, index = field_source(case, half, template, path)
            for seg in template.segments(path):
                if isinstance(seg, str):
                    continue
                refs = [(seg.name, seg.start)] if not isinstance(seg, LLMGap) else []
                if isinstance(seg, LLMGap):
                    refs = [(r.name, seg.start + 2 + r.start) for r in seg.refs]
                    if seg.name:
                        deps[seg.name] = {r.name for r in seg.refs}
                for name, offset in refs:
                    if name not in known:
                        what = "gap instruction" if isinstance(seg, LLMGap) else "value gap"
                        check.add(
                            src,
                            f"{what} refers to '{{{{{name}}}}}', but no value or named gap "
                            f"'{name}' exists (values: {', '.join(sorted(case.values)) or 'none'}; "
                            f"named gaps: {', '.join(sorted(named)) or 'none'})",
                            index=index,
                            offset=offset,
                        )
    for name in deps:
        seen, stack = set(), [name]
        while stack:
            current = stack.pop()
            for nxt in deps.get(current, ()):
                if nxt == name:
                    check.add(
                        ("control", "situation"), f"named gap '{name}' refers to itself (cycle)"
                    )
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
    metric_known = value_names(case)
    for key in ("k", "y1", "y2"):
        raw = case.metric.get(key)
        if isinstance(raw, str):
            check_expression(raw, ("metric", key), metric_known, check, f"metric parameter '{key}'")
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            problem = metrics.param_problem(key, raw, case.n_options, off_scale=True)
            if problem:
                check.add(("metric", key), problem)


def check_examples(case: TestCase, check: Checker) -> None:
    """Every `[examples]` key names a gap; fills refer only to known names; sets line up.

    Which keys a case needs depends on sampled values, so coverage is checked in `dry_run`
    (or `example_coverage`, for a draft with other problems).
    """
    if not case.examples:
        return
    named = set(case.named_gaps())
    gaps = [g for t in (case.control, case.treatment) for g in t.llm_gaps()]
    known = value_names(case) | set(named)
    usual = _usual_count(case.examples)
    for key, fills in case.examples.items():
        path = ("examples", key)
        if key in COMMON_GAPS:
            check.add(path, f"'{key}' is filled from the scenario; it needs no examples")
        elif not any(_matches(gap, key, named) for gap in gaps):
            hint = difflib.get_close_matches(key, [g.instruction for g in gaps], n=1, cutoff=0.5)
            extra = f"; did you mean '{clip(hint[0])}'?" if hint else ""
            check.add(path, f"no gap has the instruction '{clip(key)}'{extra}")
        if usual is not None and MIN_EXAMPLES <= len(fills) != usual:  # too few: the parser
            check.add(
                path,
                f"'{clip(key)}' has {len(fills)} examples but the other gaps have {usual}: "
                "every gap needs the same number (the k-th examples of all gaps are used together)",
            )
        for i, text in enumerate(fills):
            for name in re.findall(r"\{\{\s*([a-z][a-z0-9_]*)\s*\}\}", text):
                if name not in known:
                    check.add(
                        path,
                        f"example {i + 1} of '{clip(key)}' refers to '{{{{{name}}}}}', which "
                        "is not a value or named gap of this test case",
                        index=i,
                    )


def _usual_count(examples: Mapping[str, tuple[str, ...]]) -> int | None:
    """How many examples most gaps with enough of them have (of a tie, the larger number): a
    list that differs is the one to fix, so only it is blamed, not every other list."""
    counts = Counter(len(fills) for fills in examples.values() if len(fills) >= MIN_EXAMPLES)
    return max(counts, key=lambda n: (counts[n], n)) if counts else None


def field_source(
    case: TestCase, half: str, template: Template, path: str
) -> tuple[tuple[str, ...], int | None]:
    """Where a template field is written in the file (options may come from [scale])."""
    if not path.startswith("options["):
        return (half, path), None
    index = int(path[8:-1])
    if case.scale_options is not None and template.options == case.scale_options:
        return ("scale", "options"), index
    return (half, "options"), index


PROOF_LIMIT = 5_000  # combinations: up to this many, the check walks them all (a proof)
SAMPLES = 1_000  # otherwise this many draws: edges, every small domain's values, random


def dry_run(case: TestCase, check: Checker) -> None:
    """Evaluate derived values and metric parameters over the values they can take.

    Only the values an expression reads matter. When their domain (int ranges, choices,
    samples, variants) has at most PROOF_LIMIT combinations, every combination is tried, so a
    file that passes cannot fail at run time; otherwise SAMPLES draws cover the edges, each
    value of every small domain, and random points. Each failing value is reported once.
    """
    reported: set[str] = set(_check_float_ranges(case, check))
    rng = random.Random(0)
    # once per case, not per draw: walking the templates for every draw took a third of the check
    gaps, named = _example_gaps(case), set(case.named_gaps())
    for fixed in _assignments(case):
        try:
            values = case.sample_values(rng, fixed)
            case.metric_params(values)
        except SamplingError as exc:
            if exc.name in reported:
                continue
            reported.add(exc.name)
            drawn = ", ".join(f"{k} = {short(v)}" for k, v in exc.values.items())
            if exc.name.startswith("metric."):
                key = exc.name.removeprefix("metric.")
                path: tuple[str, ...] = ("metric", key)
                what = f"metric parameter '{key}'"
            else:
                derived = exc.name in case.values and case.values[exc.name].type == "derived"
                path = ("values", exc.name, "expr") if derived else ("values", exc.name)
                what = f"value '{exc.name}'"
            check.add(path, f"{what} fails for {drawn}: {exc.message}", offset=exc.offset)
            continue
        _check_finite(case, values, reported, check)
        _report_missing_examples(case, values, gaps, named, reported, check)


def example_coverage(case: TestCase, check: Checker) -> None:
    """The example-fill part of `dry_run` alone, for a draft that has other problems, so a
    gap without example fills is listed with them instead of only after they are fixed.

    Values the parser found wrong may fail to draw: their problems are already listed, so
    such a draw is skipped. A gap whose examples sit under a misspelt key is left out too:
    that key's own problem ("did you mean ...") already names the gap."""
    gaps, named = _example_gaps(case), set(case.named_gaps())
    unknown = [k for k in case.examples if not any(_matches(g, k, named) for _, _, g in gaps)]
    gaps = [
        (half, path, gap)
        for half, path, gap in gaps
        if not difflib.get_close_matches(gap.instruction, unknown, n=1, cutoff=0.5)
    ]
    reported: set[str] = set()
    rng = random.Random(0)
    broken = (SamplingError, ArithmeticError, LookupError, TypeError, ValueError)
    try:
        for fixed in _assignments(case) if gaps else ():
            try:
                values = case.sample_values(rng, fixed)
            except broken:
                continue
            _report_missing_examples(case, values, gaps, named, reported, check)
    except broken:  # a value the parser found wrong (a step of 0) cannot even be walked
        return


def _matches(gap: LLMGap, key: str, named: set[str]) -> bool:
    """Whether `key` can be this gap's example key for some values."""
    parts = re.split(r"(\{\{\s*[a-z][a-z0-9_]*\s*\}\})", gap.instruction)
    regex = "".join(
        (re.escape(p) if p.strip("{} ") in named else ".+?") if p.startswith("{{") else re.escape(p)
        for p in parts
    )
    return re.fullmatch(regex, key, re.DOTALL) is not None


def _report_missing_examples(
    case: TestCase,
    values: Mapping[str, Any],
    gaps: list[tuple[str, str, LLMGap]],
    named: set[str],
    reported: set[str],
    check: Checker,
) -> None:
    """Each gap without example fills for `values` once, where the gap is written, naming the
    key to add and the values that made it (in words, only those the gap uses)."""
    for half, field_path, gap in gaps:
        uses = [r.name for r in gap.refs if r.name not in named]
        key, mark = example_key(gap, values, named), f"[[{gap.instruction}]]"
        if key in case.examples or mark in reported or not set(uses) <= set(values):
            continue  # a name that is not drawn is reported where it is used
        reported.add(mark)
        when = ", ".join(f"{name} is {short(values[name])}" for name in dict.fromkeys(uses))
        src, index = field_source(case, half, case.templates()[half], field_path)
        check.add(
            src,
            f"no example fills for the gap '{key}'"
            + (f" (when {when})" if when else "")
            + "; add a list of them under [examples] with that text as its key",
            index=index,
            offset=gap.start,
        )


def _check_float_ranges(case: TestCase, check: Checker) -> list[str]:
    """A float range wider than a float holds (-1e308 to 1e308) draws inf or nan: refused
    here, naming the bound, instead of rendering "inf" into every prompt. Returns the names."""
    wide = []
    for spec in case.values.values():
        if spec.type == "float" and not math.isfinite(spec.params["max"] - spec.params["min"]):
            wide.append(spec.name)
            check.add(
                ("values", spec.name, "max"),
                f"value '{spec.name}': max - min must be a finite number (at most "
                f"{sys.float_info.max:.3g}); narrow the range",
            )
    return wide


def _check_finite(
    case: TestCase, values: Mapping[str, Any], reported: set[str], check: Checker
) -> None:
    """A drawn or derived value that is inf or nan would read "inf" in the prompt."""
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value) and name not in reported:
            reported.add(name)
            spec = case.values.get(name)
            derived = spec is not None and spec.type == "derived"
            where = ("values", name, "expr") if derived else ("values", name)
            check.add(where, f"value '{name}' can be {value} (not a finite number); narrow it")


def _assignments(case: TestCase) -> Iterable[dict[str, Any]]:
    """The values to fix for each checked instance (see `dry_run`)."""
    read: set[str] = set()
    for spec in case.values.values():
        if spec.type == "derived":
            read |= _names(spec.params["expr"])
    for key in ("k", "y1", "y2"):
        if isinstance(case.metric.get(key), str):
            read |= _names(case.metric[key])
    for _, _, gap in _example_gaps(case):  # every key a gap's examples need is looked up
        read |= {ref.name for ref in gap.refs}
    domains: dict[str, Any] = {}
    if "variant" in read:
        domains["variant"] = list(case.variants) or ["default"]
    endless: dict[str, ValueSpec] = {}
    for spec in case.values.values():
        if spec.name in read and spec.type != "derived":
            domain = _domain(spec)
            if domain is None:
                endless[spec.name] = spec
            else:
                domains[spec.name] = domain
    sizes = [len(d) for d in domains.values()]
    if not endless and math.prod(sizes) <= PROOF_LIMIT:
        names = list(domains)
        for combo in itertools.product(*domains.values()):
            yield dict(zip(names, combo, strict=True))
        return
    rng = random.Random(0)
    offsets = {name: rng.randrange(len(d)) if len(d) else 0 for name, d in domains.items()}
    for i in range(SAMPLES):
        fixed: dict[str, Any] = {}
        for name, domain in domains.items():
            if not domain:
                continue
            if i < 2:  # all lowest, then all highest
                fixed[name] = domain[0 if i == 0 else -1]
            elif i % 2 == 0:  # walk each domain, shifted so domains do not move in lockstep
                fixed[name] = domain[(i // 2 + offsets[name]) % len(domain)]
        for name, spec in endless.items():
            if i < 2 and spec.type in ("int", "float"):
                fixed[name] = spec.params["min" if i == 0 else "max"]
        yield fixed


def _names(expr: Any) -> set[str]:
    try:
        return expressions.referenced_names(expr)
    except expressions.ExpressionError:
        return set()


def _domain(spec: ValueSpec) -> Any:
    """Every value a generator can draw, when that is a finite, indexable sequence."""
    p = spec.params
    if spec.type == "int":
        if (p["max"] - p["min"]) // p.get("step", 1) > 10**6:
            return None
        return range(p["min"], p["max"] + 1, p.get("step", 1))
    if spec.type == "choice":
        weights = p.get("weights") or [1] * len(p["options"])
        return [o for o, w in zip(p["options"], weights, strict=True) if w > 0]
    if spec.type == "sample":
        count = 1
        for i in range(p["k"]):  # the number of ordered draws, stopping once it is too many
            count *= len(p["options"]) - i
            if count > PROOF_LIMIT:
                return None
        return [list(drawn) for drawn in itertools.permutations(p["options"], p["k"])]
    return None


def _example_gaps(case: TestCase) -> list[tuple[str, str, LLMGap]]:
    """(half, field, gap) of every gap that needs example fills, when the case has any."""
    if not case.examples:
        return []
    return [
        (half, path, gap)
        for half, template in case.templates().items()
        for path, _ in template.fields()
        for gap in template.segments(path)
        if isinstance(gap, LLMGap) and gap.instruction not in COMMON_GAPS
    ]
