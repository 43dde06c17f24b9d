"""Debiasing interventions: one definition of each, for paired runs and studies alike.

The idea of each, and the names, follow BiasBuster (Echterhoff et al. 2024, §4): telling the
model that biases exist (awareness, §4.1), showing it an example of the biased decision
(contrastive) or of a biased and an unbiased one side by side (counterfactual, §4.2), and
letting it rewrite the prompt before it answers (self-help, §4.3); `cot` asks it to reason
step by step before answering (the prompting methods' `zs_cot` uses the Malberg paper's own
line instead). Every text here is in our words. A study that brings its own wording (the
BiasBuster study keeps the paper's, `data/studies/biasbuster.toml`) uses that; a study test's
contrastive and counterfactual examples are its own, since they show that test's decision.
The 30 paired test cases have no examples of their own, so a paired run's contrastive and
counterfactual texts describe a biased decision in general terms.

A paired run applies one intervention (`--intervention`, one run each, as prompting methods
are) identically to both halves of every pair: a note before the question, a line after it,
or, for `self_help`, a first call in which the model rewrites the question and a second in
which it answers its own rewrite (both kept: `decisions.*_rewrite`, and the cache).
"""

from __future__ import annotations

import re

NONE = "none"
AWARENESS = "awareness"
CONTRASTIVE = "contrastive"
COUNTERFACTUAL = "counterfactual"
COT = "cot"
SELF_HELP = "self_help"
INTERVENTIONS: tuple[str, ...] = (NONE, AWARENESS, CONTRASTIVE, COUNTERFACTUAL, COT, SELF_HELP)

AWARENESS_NOTE = (
    "Be aware that cognitive biases can sway decisions like this one; decide on the facts alone."
)
CONTRASTIVE_NOTE = (
    "An example of a decision made badly: a manager was asked the same question twice, once "
    "as it was and once with a detail added that had no bearing on the right choice (how the "
    "question was worded, a number mentioned in passing, what others had chosen), and chose "
    "differently the second time. Do not decide that way: let only what matters decide."
)
COUNTERFACTUAL_NOTE = (
    "Two examples of the same decision. Made badly: a manager asked the same question twice, "
    "the second time with a detail added that had no bearing on the right choice (how the "
    "question was worded, a number mentioned in passing, what others had chosen), chose "
    "differently the second time. Made well: another manager, asked the same two questions, "
    "saw that the detail changed nothing that matters and chose the same both times. Decide "
    "as the second manager did."
)
COT_LINE = "Before you give your answer, think the decision through step by step."
# What goes before the question (the paired runs' texts; a study may bring its own).
NOTES = {
    AWARENESS: AWARENESS_NOTE,
    CONTRASTIVE: CONTRASTIVE_NOTE,
    COUNTERFACTUAL: COUNTERFACTUAL_NOTE,
}

REWRITE_MARKER = "[rewritten text]"
# The markers a rewrite may open with: BiasBuster's own (§4.3) and ours.
REWRITE_MARKERS = ("[start of revised prompt]", REWRITE_MARKER)
REWRITE_END_MARKERS = ("[end of revised prompt]", "[end of prompt]")
SELF_HELP_REQUEST = (
    "Rewrite the text between the markers so that nothing in it could push a reader towards "
    "an answer through a cognitive bias. Keep the task, the facts and the requested answer "
    "format.\n[text starts]\n{{prompt}}\n[text ends]\nBegin your reply with "
    f"{REWRITE_MARKER} and give only the rewritten text after it."
)
REWRITE_TOKENS = 600  # a rewritten prompt is about as long as the prompt
MAX_REWRITE_CHARS = REWRITE_TOKENS * 10  # an endpoint ignoring the limit must not grow prompts


def check(name: str) -> str:
    """`name` when it is an intervention; ValueError naming them otherwise."""
    if name not in INTERVENTIONS:
        raise ValueError(
            f"unknown intervention {str(name)[:30]!r}; use one of {', '.join(INTERVENTIONS)}"
        )
    return name


def rewrite_request(prompt: str, template: str = SELF_HELP_REQUEST) -> str:
    """The self-help request that asks for `prompt` rewritten (`{{prompt}}` in `template`)."""
    return template.replace("{{prompt}}", prompt)


def rewritten(text: str) -> str:
    """The prompt a self-help answer gives back: what follows the marker (or all of it),
    without further copies of the marker (an answer of nothing but markers is empty) and
    without a closing marker. BiasBuster's marker and ours are both read."""
    lowered = text.lower()
    found = [(lowered.find(m), m) for m in REWRITE_MARKERS if m in lowered]
    body = text
    if found:
        at, marker = min(found)
        body = text[at + len(marker) :]
    markers = "|".join(re.escape(m) for m in (*REWRITE_MARKERS, *REWRITE_END_MARKERS))
    return re.sub(markers, "", body, flags=re.IGNORECASE).strip()


def rewrite_problem(rewrite: str) -> str | None:
    """Why a rewrite cannot be the next prompt (empty, or longer than a rewrite may be)."""
    if not rewrite:
        return "the rewritten prompt is empty"
    if len(rewrite) > MAX_REWRITE_CHARS:
        return (
            f"the rewritten prompt has {len(rewrite):,} characters, more than the "
            f"{MAX_REWRITE_CHARS:,} a rewrite may have"
        )
    return None
