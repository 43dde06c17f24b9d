"""The experimental factors of a paired run beside its prompting method: how hard a reasoning
model thinks (`reasoning_effort`, `thinking_budget`) and the debiasing intervention
(`intervention`). Each is one value per run, a field of `RunSpec` (in the run id only when
not the default), so runs that differ in it alone ask the same instances and compare pair by
pair (`studies.factor_effects`, Compare's "factor" mode, `cogbias results compare`).

Here: what a plan refuses (before any call), how it describes them, and what it expects the
thinking to cost (an estimate: `llm.thinking.ESTIMATED`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cogbias.core.reasoning import EFFORTS
from cogbias.llm import thinking
from cogbias.llm.profiles import resolve
from cogbias.runs import prompting as prompting_methods
from cogbias.runs import scorers
from cogbias.studies import interventions

# A factor by its name on the command line and in Compare: the spec field it varies and its
# levels in order (an effort's levels from least to most; the stored default first).
FACTORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "effort": ("reasoning_effort", EFFORTS),
    "intervention": ("intervention", interventions.INTERVENTIONS),
}


def refusal(spec: Any) -> str | None:
    """Why a paired spec's effort, budget or intervention cannot be asked, or None."""
    try:
        thinking.check_effort(spec.reasoning_effort)
        thinking.check_budget(spec.thinking_budget)
        interventions.check(spec.intervention)
    except ValueError as exc:
        return str(exc)
    effort_given = spec.reasoning_effort is not None or spec.thinking_budget is not None
    probabilities = scorers.get(spec.scoring).needs == scorers.OPTION_PROBABILITIES
    if probabilities and (effort_given or spec.intervention != interventions.NONE):
        return (
            f"--scoring {spec.scoring} asks for the option's letter alone, so it takes no "
            "--reasoning-effort, --thinking-budget or --intervention: use --scoring choice"
        )
    if spec.intervention == interventions.COT and prompting_methods.parse(spec.prompting).cot:
        return (
            f"--intervention cot asks for step-by-step reasoning, which the prompting method "
            f"'{spec.prompting}' asks already: choose one of them"
        )
    if effort_given:
        silent = not_reasoning(spec.models, spec.api_base)
        if silent:
            flag = "--reasoning-effort" if spec.reasoning_effort else "--thinking-budget"
            return (
                f"{flag} is for models that reason, and {', '.join(silent)} is not known to "
                "(its registry entry, or litellm's model map, would say so): run it without "
                f"{flag}, or state `reasoning = true` in its models.toml entry if it does"
            )
    return None


def thinks(spec: Any) -> bool:
    """Whether a paired spec asks its reasoning models to think (an effort other than
    `none`, or a budget): what a model thinking at one temperature alone is held to
    (`refusals.temperature_refusal`)."""
    return spec.reasoning_effort not in (None, "none") or spec.thinking_budget is not None


def not_reasoning(models: Sequence[str], api_base: str | None) -> list[str]:
    """The models among `models` that write text and do not reason (`random` is neither)."""
    profiles = [resolve(m, api_base) for m in models]
    return [p.id for p in profiles if p.writes_text and not p.reasoning]


def described(spec: Any) -> str:
    """The plan's words for the run's factors ('' for a run with none)."""
    parts = []
    if spec.reasoning_effort is not None:
        parts.append(f"reasoning effort {spec.reasoning_effort}")
    if spec.thinking_budget is not None:
        parts.append(f"thinking budget {spec.thinking_budget:,} tokens")
    if spec.intervention != interventions.NONE:
        parts.append(f"intervention {spec.intervention}")
    return f" ({'; '.join(parts)})" if parts else ""


def thinking_per_call(model: str, spec: Any) -> int:
    """The thinking tokens a plan expects one call of `model` to spend (an estimate)."""
    profile = resolve(model, spec.api_base)
    return thinking.estimated(
        profile.reasoning, profile.reasoning_effort, spec.reasoning_effort, spec.thinking_budget
    )


def thinking_note(models: Sequence[str], spec: Any, calls_per_model: int) -> str:
    """'; about N thinking tokens (an estimate: …)' for a run of reasoning models, else ''."""
    total = sum(thinking_per_call(m, spec) for m in models) * calls_per_model
    if not total:
        return ""
    return (
        f"; about {total:,} thinking tokens (an estimate, from a rough figure per effort "
        "level; each answer's own count is recorded)"
    )
