"""What the batch tests share: the `cogbias` command as a user runs it, the columns a batch
run and an interactive run must store alike, and a responder that makes every pair take both
the decide and the extract round."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from fake_llm_server import _last_user_text, default_responder

ROOT = Path(__file__).resolve().parent.parent
PAIRS = (
    "select id, instance_id, model, control_order, control_answer, treatment_answer, "
    "control_extraction, treatment_extraction, control_choice, treatment_choice, score, status "
    "from decisions order by id"
)


def cogbias(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", *map(str, args)],
        cwd=ROOT, env={**os.environ}, capture_output=True, text=True, timeout=300, **kwargs,
    )  # fmt: skip


ANTHROPIC_MODEL = "anthropic/claude-haiku-4-5"
ANTHROPIC_KEY = (
    "fake-anthropic-batch-value-0123456789"  # no real key shape: redacted as an env value
)
KEY_ENV = "COGBIAS_TEST_ANTHROPIC_KEY"  # the variable every Anthropic test process reads


def anthropic_run(db: Path, base_url: str, *extra: object) -> list[object]:
    """`cogbias run pairs` of three biases on the Anthropic model at `base_url`."""
    return ["run", "pairs", "--db", db, "--biases", "anchoring,framing_effect,loss_aversion",
            "--generator", "examples", "--models", ANTHROPIC_MODEL, "--api-base", base_url,
            "--api-key-env", KEY_ENV, *extra]  # fmt: skip


def needs_extraction(request: dict) -> str:
    """Decisions the reader leaves to an extraction (one option negated, another chosen),
    and an extractor that names the chosen one: every pair takes both rounds."""
    prompt = _last_user_text(request)
    if prompt.startswith("Below are the answer options"):
        return "Option " + re.findall(r"; Option (\d+) fits", prompt)[-1]
    chosen = default_responder(request)
    other = 1 if chosen != "Option 1" else 2
    return f"I would not pick Option {other}; {chosen} fits."
