"""The dataset card of a Hub folder (`views.hub_export`): README.md with the YAML header the
Hugging Face Hub and `datasets` read, and a methods section generated from the stored specs.

The header lists one config per table (`configs`: its name and Parquet file) and, per config,
its features (`dataset_info`) read back from the Parquet file just written, so the card and
the files cannot disagree. Every string in the header is written as a JSON string (valid
YAML, one line, every control character and non-ASCII character escaped): a name holding
`---`, a newline or a colon stays a value. In the Markdown body every name from the store
(models, test cases, runs, datasets) goes through `views.safe_text.escape_markdown`, so
`[link](x)` or `<script>` in a name is shown as those characters. The license is the
publisher's choice: the card says `other` and asks them, in the header and the text, to set it.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cogbias.core.run_record import Run
from cogbias.runs import kinds
from cogbias.runs.paired_plan import RunSpec
from cogbias.runs.study_plan import StudySpec
from cogbias.views.safe_text import escape_markdown

MAX_RUNS_DESCRIBED = 20  # a dataset answered by more runs: the rest are in the runs table
MAX_NAMES = 40  # names listed in one sentence before "and N more"
# Parquet type (as pyarrow names it) -> the `datasets` dtype the card declares
DTYPES = {"string": "string", "int64": "int64", "double": "float64", "bool": "bool"}
DESCRIPTIONS = {
    "pairs": "one row per model decision on a control/treatment pair, joined to its instance "
    "(both texts as the model read them, the answers, the metric and the score)",
    "turns": "one row per model call of the study's conversations, with the answer as the "
    "study's metric counts it (`coded`)",
    "instances": "the filled control/treatment pairs (test instances) the decisions answered",
    "runs": "the runs that made the decisions: spec (JSON, without keys), status, counts, "
    "tokens and cost",
}
LICENSE_NOTE = (
    "set the license you publish under (an SPDX id such as cc-by-4.0), or keep `other` "
    "and add `license_name` and `license_link`"
)


@dataclass
class HubTable:
    """One table written: its config name, its file (relative to the folder), its columns,
    and what its rows held (rows, and how many of each status and failure kind)."""

    name: str
    path: str
    columns: dict[str, str]
    rows: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    failure_kinds: Counter[str] = field(default_factory=Counter)
    published: int = 0  # rows of a dataset's published decisions (`import:` runs)

    def counted(self, batches: Iterable[list[dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
        """`batches`, passed through while their statuses are counted (for the card)."""
        for batch in batches:
            for row in batch:
                if row.get("status"):
                    self.statuses[str(row["status"])] += 1
                self.published += str(row.get("run_id") or "").startswith("import:")
                if row.get("status") == "failed":
                    self.failure_kinds[str(row.get("failure_kind") or "transient")] += 1
            yield batch


def cogbias_version() -> str:
    """The installed cogbias' version, as its package metadata says (what `pip` installed)."""
    try:
        return importlib.metadata.version("cogbias")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "(version unknown: not installed)"


def _q(text: object) -> str:
    """A YAML scalar for any text: a JSON string is YAML, on one line, nothing unescaped."""
    return json.dumps(str(text), ensure_ascii=True)


def _dtype(kind: Any) -> dict[str, str]:
    """`{"dtype": ...}` or `{"list": ...}` for a Parquet column's type."""
    import pyarrow as pa

    if pa.types.is_list(kind):
        return {"list": DTYPES[str(kind.value_type)]}
    return {"dtype": DTYPES[str(kind)]}


def yaml_header(title: str, tables: Sequence[HubTable], folder: Path) -> str:
    """The card's YAML front matter: license, name, one config per table with its file, and
    each config's features as the Parquet file holds them. No `splits`: `datasets` wants
    their size in bytes as it measures it, and counts the rows itself."""
    import pyarrow.parquet as pq

    lines = ["---", f"# license: {LICENSE_NOTE}", "license: other", f"pretty_name: {_q(title)}"]
    lines += ["tags:", f"- {_q('cogbias')}", f"- {_q('cognitive-bias')}", "configs:"]
    for i, table in enumerate(tables):
        lines += [f"- config_name: {_q(table.name)}"] + ["  default: true"] * (i == 0)
        lines += ["  data_files:", f"  - split: {_q('train')}", f"    path: {_q(table.path)}"]
    lines.append("dataset_info:")
    for table in tables:
        lines += [f"- config_name: {_q(table.name)}", "  features:"]
        for column in pq.read_schema(folder / table.path):
            ((key, dtype),) = _dtype(column.type).items()
            lines += [f"  - name: {_q(column.name)}", f"    {key}: {_q(dtype)}"]
    return "\n".join([*lines, "---", ""])


def card(
    title: str,
    tables: Sequence[HubTable],
    runs: Sequence[Run],
    pinned: Mapping[str, Mapping[str, tuple[str, str | None]]],
    folder: Path,
    model: str | None = None,
) -> str:
    """The whole README.md: header, what the folder holds, how to load it, the methods."""
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"# {escape_markdown(title)}",
        "",
        f"Exported by cogbias {cogbias_version()} on {made}"
        + (f", the decisions of model {escape_markdown(model)} only" if model else "")
        + ". One Parquet file per table, each a config of this dataset:",
        "",
    ]
    body += [f"- `{t.name}` (`{t.path}`, {t.rows} rows): {DESCRIPTIONS[t.name]}." for t in tables]
    body += [
        "",
        "The columns are those of `cogbias export` (cogbias' docs/datasets.md): answers are "
        "0-based option indices in the original option order, so `score` can be recomputed "
        "from the answers and the metric columns.",
        "",
        "## License",
        "",
        f"Not chosen yet: the header says `license: other`. Before publishing, {LICENSE_NOTE}. "
        "The texts the models read may carry the license of the test cases or dataset they "
        "came from.",
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        f'{tables[0].name} = load_dataset("path/to/this/folder", "{tables[0].name}", '
        'split="train")',
        "```",
        "",
        "## Methods",
        "",
    ]
    body += [*methods(tables, runs, pinned), ""]
    return yaml_header(title, tables, folder) + "\n" + "\n".join(body)


def methods(
    tables: Sequence[HubTable],
    runs: Sequence[Run],
    pinned: Mapping[str, Mapping[str, tuple[str, str | None]]],
) -> list[str]:
    """Paragraphs saying what ran, from the stored specs, and what failed."""
    main = tables[0]
    failed = sum(main.failure_kinds.values())
    kinds_text = ", ".join(f"{n} {kind}" for kind, n in sorted(main.failure_kinds.items()))
    paragraphs = [
        f"The `{main.name}` table holds {main.rows} rows: "
        + ", ".join(f"{n} {status}" for status, n in sorted(main.statuses.items()))
        + (
            f". The {failed} failed rows ({kinds_text}) are kept with their error "
            "and `failure_kind`; the summary statistics leave them out."
            if failed
            else ". No row failed."
        )
    ]
    if main.published:
        paragraphs.append(
            f"{main.published} rows are the dataset's published decisions (their `run_id` "
            "starts with `import:`), imported as they were published"
            + (": no run described below made them." if runs else "; no run here made them.")
        )
    for run in runs[:MAX_RUNS_DESCRIBED]:
        paragraphs.append(run_methods(run, pinned.get(run.id, {})))
    if len(runs) > MAX_RUNS_DESCRIBED:
        paragraphs.append(f"{len(runs) - MAX_RUNS_DESCRIBED} more runs: see the `runs` table.")
    return [p for paragraph in paragraphs for p in (paragraph, "")][:-1]


def _names(values: Sequence[Any]) -> str:
    shown = ", ".join(escape_markdown(v) for v in values[:MAX_NAMES])
    return shown + (f" and {len(values) - MAX_NAMES} more" if len(values) > MAX_NAMES else "")


def run_methods(run: Run, pinned: Mapping[str, tuple[str, str | None]]) -> str:
    """One run's methods paragraph: who answered what, how, and what it cost."""
    name = f" ({escape_markdown(run.name)})" if run.name else ""
    kind_name = run.kind.name if run.kind else "unknown"
    head = f"Run {escape_markdown(run.id)}{name}, a {kind_name} run, {escape_markdown(run.status)}"
    head += f" ({escape_markdown(run.created_at or 'date unknown')}): "
    try:
        kind, fields = kinds.read_stored(run.spec)
        text = study_methods(StudySpec(**fields)) if kind.name == "study" else ""
        text = text or paired_methods(RunSpec(**fields), pinned)
    except (TypeError, ValueError, KeyError):
        text = "its spec is not one this cogbias version can read; it is in the `runs` table."
    counts = f" {int(run.planned)} units planned, {int(run.done)} done, {int(run.failed)} failed"
    cost = f"; {int(run.tokens)} tokens" + (f", cost ${float(run.cost):.4f}" if run.cost else "")
    return head + text + counts + cost + "."


def paired_methods(spec: RunSpec, pinned: Mapping[str, tuple[str, str | None]]) -> str:
    """A paired (library, dataset or token-bias) run's spec in words."""
    text = (
        f"models {_names(spec.models)} at temperature {float(spec.temperature)}, "
        f"{int(spec.repeats)} repeat(s), seed {int(spec.seed)}; scorer {escape_markdown(spec.scoring)}, answers read as "
        f"{escape_markdown(spec.reading)}, prompting {escape_markdown(spec.prompting)}, option "
        f"order {escape_markdown(spec.option_order or 'as planned by default')}. "
    )
    if spec.dataset:
        per = f", at most {int(spec.per_bias)} per bias" if spec.per_bias else ""
        text += f"Instances from dataset {escape_markdown(spec.dataset)}{per}"
    else:
        text += (
            f"{int(spec.scenarios)} scenario(s) × {int(spec.instances)} instance(s) per test "
            f"case, gaps filled by {escape_markdown(spec.generator)} at temperature "
            f"{float(spec.generator_temperature)}"
        )
    if pinned:
        cases = [f"{case} ({digest[:12]})" for case, (digest, _) in sorted(pinned.items())]
        text += f"; test cases (content hash) {_names(cases)}"
    elif spec.biases:
        text += f"; test cases {_names(spec.biases)}"
    return text + "."


def study_methods(spec: StudySpec) -> str:
    """A study run's spec in words."""
    everything = "all of the study's"
    return (
        f"study {escape_markdown(spec.study)} (source hash "
        f"{escape_markdown(str(spec.study_hash)[:12] or 'unknown')}) "
        f"with models {_names(spec.models)}; tests {_names(spec.tests) or everything}; "
        f"temperatures {', '.join(str(float(t)) for t in spec.temperatures) or 'the study sweep'}; "
        "variants "
        f"{_names(spec.variants) or everything}; mitigations {_names(spec.mitigations)}; "
        f"{int(spec.repeats) or 'the study default number of'} repeat(s), at most "
        f"{int(spec.max_attempts) or 'the study default number of'} attempt(s), "
        f"seed {int(spec.seed)}."
    )
