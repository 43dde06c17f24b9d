"""Why a paired run cannot be asked as specified, in words that say what to change: checked
when it is planned (`paired_plan`), and by `cogbias pair` before its one pair."""

from __future__ import annotations

from cogbias.core.reading import READ_EXTRACTION, READINGS
from cogbias.llm.profiles import resolve
from cogbias.runs import scorers


def temperature_refusal(
    model: str, api_base: str | None, temperature: float, thinking: bool = False
) -> str | None:
    """Why `model` cannot be asked at `temperature` (its profile's `max_temperature`: a
    provider's API refuses more, Anthropic's above 1; and, when asked to think, its
    `thinking_temperature`: Anthropic's extended thinking takes 1 alone), or None."""
    profile = resolve(model, api_base)
    limit, only = profile.max_temperature, profile.thinking_temperature
    if temperature > limit:
        return (
            f"{model} accepts temperatures up to {limit:g}, not {temperature:g}: choose a "
            f"temperature of at most {limit:g}, or leave {model} out"
        )
    if thinking and profile.reasoning and only is not None and temperature != only:
        return (
            f"{model} thinks only at temperature {only:g} (its provider refuses any other "
            f"while it thinks): add --temperature {only:g}, or leave out --reasoning-effort "
            "and --thinking-budget for it"
        )
    return None


def reading_refusal(reading: str, scoring: str) -> str | None:
    """Why a run cannot read its answers by `reading`, or None (the CLI's `pair` asks too)."""
    if reading not in READINGS:
        return f"unknown reading {str(reading)[:40]!r}: use {' or '.join(READINGS)}"
    if problem := scorers.unknown(scoring):
        return problem
    if reading == READ_EXTRACTION and not scorers.get(scoring).reads_answers:
        return (
            f"--reading {reading} reads a sampled answer, and --scoring {scoring} samples "
            f"none: use --scoring {scorers.DEFAULT} with it"
        )
    return None
