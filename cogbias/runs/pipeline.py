"""generate (fill gaps) · decide (answer + extract) · score — the paper's three functions.

The steps live in `cogbias.runs.generate` and `cogbias.runs.decide`; this module names them
together, as the app, the CLI's `pair`/`fill` and the tests call them. Nothing here touches
the database.
"""

from __future__ import annotations

from cogbias.core.records import Instance, stable_id
from cogbias.llm.profiles import RANDOM_MODEL
from cogbias.runs.decide import (
    DEC_PROMPT,
    EXTRACT_PROMPT,
    LOCAL_DEC_SUFFIX,
    HalfResult,
    PairAsk,
    decide_half,
    decide_pair,
    failed_decision,
    score_instance,
)
from cogbias.runs.generate import (
    FILL_CHARS,
    FILL_TOKENS,
    GEN_EXAMPLE,
    GEN_PROMPT,
    GenerationError,
    generate,
    generate_offline,
    random_generator_refusal,
    run_sync,
)

__all__ = [
    "DEC_PROMPT",
    "EXTRACT_PROMPT",
    "FILL_CHARS",
    "FILL_TOKENS",
    "GEN_EXAMPLE",
    "GEN_PROMPT",
    "LOCAL_DEC_SUFFIX",
    "RANDOM_MODEL",
    "GenerationError",
    "HalfResult",
    "Instance",
    "PairAsk",
    "decide_half",
    "decide_pair",
    "failed_decision",
    "generate",
    "generate_offline",
    "random_generator_refusal",
    "run_sync",
    "score_instance",
    "stable_id",
]
