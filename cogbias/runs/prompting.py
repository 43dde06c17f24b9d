"""Prompting methods: how the decision question is put to a model (a run dimension).

The token-bias paper (Jiang et al. 2024) compares the same items under several prompting
methods; cogbias lets any run choose one:

- `baseline`: the standard decision prompt, unchanged (so baseline runs keep their cache keys)
- `zs_cot`: the same, ending with "Let's think step by step."
- `one_shot` / `few_shot`: one or three worked examples first, as earlier conversation turns
- `one_shot_cot` / `few_shot_cot`: the examples answer with their reasoning, plus the CoT line

Examples live in `data/prompting.toml`. A method may rename the first example's protagonist,
`one_shot@Bob`, which is the paper's H2 manipulation applied to the prompt instead of the item.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cogbias.core.records import BASELINE_PROMPTING
from cogbias.core.templates import Filled, render_decision_text
from cogbias.library.testcases import DATA_DIR

BASELINE = BASELINE_PROMPTING
METHODS = ("baseline", "zs_cot", "one_shot", "few_shot", "one_shot_cot", "few_shot_cot")
SHOTS = {"one_shot": 1, "few_shot": 3, "one_shot_cot": 1, "few_shot_cot": 3}
COT_LINE = "Let's think step by step."
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

    def renamed(self, new: str) -> Exemplar:
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

    def task(self) -> str:
        return render_decision_text(Filled(self.situation, self.prompt, self.options))

    def reply(self, cot: bool) -> str:
        choice = f"Option {self.answer + 1}"
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
def load_exemplars(path: Path = EXEMPLAR_FILE) -> tuple[Exemplar, ...]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return tuple(
        Exemplar(
            e.get("name", ""),
            e["situation"],
            e["prompt"],
            tuple(e["options"]),
            int(e["answer"]),
            e.get("reasoning", ""),
        )
        for e in data["exemplars"]
    )


def decision_messages(task: str, method: str, question: str) -> Messages:
    """The chat messages that ask `task`; `question` is the decision prompt with `{task}`."""
    prompting = parse(method)
    ask = question.format(task=task)
    if prompting.method == BASELINE:
        return (("user", ask),)
    cot = f"\n\n{COT_LINE}" if prompting.cot else ""
    turns: list[tuple[str, str]] = []
    exemplars = load_exemplars()[: prompting.shots]
    for i, exemplar in enumerate(exemplars):
        if i == 0 and prompting.rename:
            exemplar = exemplar.renamed(prompting.rename)
        turns += [
            ("user", question.format(task=exemplar.task()) + cot),
            ("assistant", exemplar.reply(prompting.cot)),
        ]
    turns.append(("user", ask + cot))
    return tuple(turns)
