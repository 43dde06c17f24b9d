"""Prompting methods: how the decision question is put to a model (a run dimension).

Each study asks in its paper's words, all stated in `data/prompting.toml`:

- the question: Malberg et al.'s DEC prompt for their test cases (layout `sections`); the
  token-bias items are asked as they are ("Baseline: directly answering the question without
  additional instructions", Jiang et al. 2024, Section 4). The item's layout chooses.
- `baseline`: the question, nothing else
- `zs_cot`: the same, ending with the paper's "Let us think step by step."
- `one_shot` / `few_shot`: one or three worked examples first, as earlier conversation turns
- `one_shot_cot` / `few_shot_cot`: the examples answer with their reasoning, plus the CoT line
- `weak_control_zs_cot`, `control_zs_cot`, `weak_control_os_cot`, `control_os_cot`: the
  paper's Appendix B hints (weak or strong) before the zero- or one-shot CoT prompt (H6)

A method may rename the first example's protagonist, `one_shot@Bob`: the paper's H2; where
the data gives the paper's own version for that name (Appendix A's Bob), that version is shown.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.core.records import BASELINE_PROMPTING
from cogbias.core.templates import LETTERED, QUESTION, SECTIONS, Filled, render_decision_text
from cogbias.library.testcases import DATA_DIR

BASELINE = BASELINE_PROMPTING
HINTED = {
    "weak_control_zs_cot": "weak",
    "control_zs_cot": "strong",
    "weak_control_os_cot": "weak",
    "control_os_cot": "strong",
}
METHODS = ("baseline", "zs_cot", "one_shot", "few_shot", "one_shot_cot", "few_shot_cot", *HINTED)
SHOTS = {
    "one_shot": 1,
    "few_shot": 3,
    "one_shot_cot": 1,
    "few_shot_cot": 3,
    "weak_control_os_cot": 1,
    "control_os_cot": 1,
}
EXEMPLAR_FILE = DATA_DIR / "prompting.toml"
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z .'-]{0,39}$")

Messages = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Exemplar:
    """A solved decision task shown before the real one."""

    name: str
    situation: str
    prompt: str
    options: tuple[str, ...]
    answer: int
    reasoning: str
    versions: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)

    def renamed(self, new: str) -> Exemplar:
        """The paper's own version for `new` when the data has one, else a name swap."""
        if new in self.versions:
            v = self.versions[new]
            return Exemplar(
                new,
                v["situation"],
                v["prompt"],
                tuple(v["options"]),
                int(v["answer"]),
                v.get("reasoning", ""),
            )
        if not self.name:
            return self
        pattern = re.compile(rf"\b{re.escape(self.name)}\b")

        def swap(text: str) -> str:
            return pattern.sub(new, text)

        return Exemplar(
            new,
            swap(self.situation),
            swap(self.prompt),
            tuple(swap(o) for o in self.options),
            self.answer,
            swap(self.reasoning),
        )

    def task(self, layout: str = SECTIONS) -> str:
        """The example shown as the real item is shown (its options written out as the
        item's would be; an item that does not write its options out sees them lettered)."""
        layout = LETTERED if layout == QUESTION else layout
        return render_decision_text(Filled(self.situation, self.prompt, self.options, layout))

    def reply(self, cot: bool, layout: str = SECTIONS) -> str:
        layout = LETTERED if layout == QUESTION else layout
        if layout == SECTIONS:
            choice = f"Option {self.answer + 1}"
        else:
            choice = f"({chr(ord('a') + self.answer)}) {self.options[self.answer]}"
        choice = choice.rstrip(".")
        return f"{self.reasoning} So the answer is {choice}." if cot else f"{choice}."


@dataclass(frozen=True)
class Prompting:
    """A parsed prompting method: `method` or `method@NewName`."""

    method: str
    rename: str | None = None

    @property
    def cot(self) -> bool:
        return self.method.endswith("cot")

    @property
    def shots(self) -> int:
        return SHOTS.get(self.method, 0)


def parse(text: str) -> Prompting:
    """Check a prompting method string; a bad one raises ValueError saying what is allowed."""
    method, _, rename = text.strip().partition("@")
    if method not in METHODS:
        raise ValueError(f"unknown prompting method {text!r}; use one of {', '.join(METHODS)}")
    if rename:
        if not SHOTS.get(method):
            raise ValueError(
                f"{text!r}: only methods with examples can rename one (e.g. one_shot@Bob)"
            )
        if not _NAME_RE.match(rename):
            raise ValueError(
                f"{text!r}: the new name must be letters (at most 40), e.g. one_shot@Bob"
            )
    return Prompting(method, rename or None)


@functools.lru_cache(maxsize=4)
def _wording(path: Path = EXEMPLAR_FILE) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def load_exemplars(path: Path = EXEMPLAR_FILE) -> tuple[Exemplar, ...]:
    return tuple(
        Exemplar(
            e.get("name", ""),
            e["situation"],
            e["prompt"],
            tuple(e["options"]),
            int(e["answer"]),
            e.get("reasoning", ""),
            dict(e.get("as", {})),
        )
        for e in _wording(path)["exemplars"]
    )


def question_for(layout: str) -> str:
    """The decision question (with `{task}`) in the words of the study whose layout this is."""
    questions = _wording()["questions"]
    return questions.get(layout, questions[SECTIONS])


def cot_line() -> str:
    return str(_wording()["methods"]["cot"])


def item_kind(options: tuple[str, ...]) -> str:
    """ "syllogism" for a Yes/No item, else "conjunction": which of the paper's hints fits."""
    return "syllogism" if {o.strip().lower() for o in options} == {"yes", "no"} else "conjunction"


def decision_messages(
    task: str, method: str, question: str, layout: str = SECTIONS, kind: str = "conjunction"
) -> Messages:
    """The chat messages that ask `task`; `question` is the decision prompt with `{task}`."""
    prompting = parse(method)
    ask = question.format(task=task)
    if prompting.method == BASELINE:
        return (("user", ask),)
    hint = ""
    if prompting.method in HINTED:
        hint = _wording()["hints"][HINTED[prompting.method]][kind] + "\n\n"
    cot = ""
    if prompting.cot and "step by step" not in hint:
        cot = f"\n\n{cot_line()}"
    turns: list[tuple[str, str]] = []
    exemplars = load_exemplars()[: prompting.shots]
    for i, exemplar in enumerate(exemplars):
        if i == 0 and prompting.rename:
            exemplar = exemplar.renamed(prompting.rename)
        turns += [
            ("user", question.format(task=exemplar.task(layout)) + cot),
            ("assistant", exemplar.reply(prompting.cot, layout)),
        ]
    turns.append(("user", ask + cot))
    if hint:  # the hint opens the conversation, once, before any example
        turns[0] = ("user", hint + turns[0][1])
    return tuple(turns)
