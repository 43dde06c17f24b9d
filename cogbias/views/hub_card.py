"""The dataset card of a Hub folder (`views.hub_export`): README.md with the YAML header the
Hugging Face Hub and `datasets` read, and the methods a report gives (`views.report_methods`,
from the stored specs), written as Markdown.

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

import json
import platform
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cogbias.core.records import DecisionStatus
from cogbias.core.redact import redactor
from cogbias.views.report_html import cell
from cogbias.views.report_methods import version
from cogbias.views.report_parts import Section, Table
from cogbias.views.safe_text import escape_markdown

# Parquet type (as pyarrow names it) -> the `datasets` dtype the card declares
DTYPES = {"string": "string", "int64": "int64", "double": "float64", "bool": "bool"}
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
    columns: Mapping[str, str]
    description: str = ""  # what one row is (a run kind's `ExportTable.description`)
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
                if row.get("status") == DecisionStatus.FAILED:
                    self.failure_kinds[str(row.get("failure_kind") or "transient")] += 1
            yield batch


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
    methods: Sequence[Section],
    folder: Path,
    model: str | None = None,
) -> str:
    """The whole README.md: header, what the folder holds, how to load it, the methods
    (`methods`: `views/report_methods.py`'s sections of what ran, as a report says it).
    Redacted whole, as a report is: no key, even in a run's name."""
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [
        f"# {escape_markdown(title)}",
        "",
        f"Exported by cogbias {version()} on {made} (Python {platform.python_version()})"
        + (f", the decisions of model {escape_markdown(model)} only" if model else "")
        + ". One Parquet file per table, each a config of this dataset:",
        "",
    ]
    body += [f"- `{t.name}` (`{t.path}`, {t.rows} rows): {t.description}." for t in tables]
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
    for paragraph in rows_paragraphs(tables):
        body += [paragraph, ""]
    body += sections_markdown(methods)
    return redactor()(yaml_header(title, tables, folder) + "\n" + "\n".join(body))


def rows_paragraphs(tables: Sequence[HubTable]) -> list[str]:
    """What the main table's rows are: how many of each status, what failed and why, and
    how many are a dataset's published decisions (no run of cogbias made those)."""
    main = tables[0]
    failed = sum(main.failure_kinds.values())
    kinds_text = ", ".join(f"{n} {kind}" for kind, n in sorted(main.failure_kinds.items()))
    paragraphs = [
        f"The `{main.name}` table holds {main.rows} rows: "
        + ", ".join(f"{n} {escape_markdown(s)}" for s, n in sorted(main.statuses.items()))
        + (
            f". The {failed} failed rows ({escape_markdown(kinds_text)}) are kept with their "
            "error and `failure_kind`; the summary statistics leave them out."
            if failed
            else ". No row failed."
        )
    ]
    if main.published:
        paragraphs.append(
            f"{main.published} rows are the dataset's published decisions (their `run_id` "
            "starts with `import:`), imported as they were published: no run described "
            "below made them."
        )
    return paragraphs


def _cell(value: Any) -> str:
    """A table cell as Markdown text: escaped, and a `|` that cannot end the cell."""
    return escape_markdown(cell(value)[0]).replace("|", "\\|")


def table_markdown(table: Table) -> list[str]:
    """A methods table as a Markdown table under its caption."""
    frame = table.frame
    lines = [f"**{escape_markdown(table.caption)}**", ""]
    lines.append("| " + " | ".join(_cell(c) for c in frame.columns) + " |")
    lines.append("|" + " --- |" * len(frame.columns))
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |"
              for row in frame.itertuples(index=False, name=None)]  # fmt: skip
    return lines


def sections_markdown(sections: Sequence[Section]) -> list[str]:
    """The methods sections `views/report_methods.py` generates (the report's own), as
    Markdown: every text escaped, one heading per section."""
    lines: list[str] = []
    for section in sections:
        lines += [f"### {escape_markdown(section.heading)}", ""]
        for paragraph in section.paragraphs:
            lines += [escape_markdown(paragraph), ""]
        for table in section.tables:
            lines += [*table_markdown(table), ""]
        if section.items:
            lines += [*(f"- {escape_markdown(item)}" for item in section.items), ""]
    return lines
