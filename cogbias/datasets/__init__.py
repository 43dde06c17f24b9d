"""Importers for published datasets and generic files.

- `import_hub`: the paper's 30,000 test cases from the Hugging Face Hub (or a local copy).
- `import_malberg`: the paper's code output (`full_dataset.csv` + `decision_results/*.csv`).
- `import_generic`: any CSV / JSONL / Parquet file with a `ColumnMapping`.
- `import_peek`: the token-bias paper's synthetic `…_gold.json` / `…_random.json` pairs.
- `import_mohr`: the Mohr 2025 thesis' effect sizes, prompts and model features.

Every import is one transaction and idempotent; problems raise `DatasetError` naming the file,
row and column.
"""

from cogbias.datasets.common import DatasetError, ImportSummary, bias_id, parse_prompt
from cogbias.datasets.generic import FIELDS, ColumnMapping, import_generic
from cogbias.datasets.hub import download, hub_url, import_hub
from cogbias.datasets.importing import import_run_id
from cogbias.datasets.malberg_format import import_malberg
from cogbias.datasets.mohr_format import import_mohr
from cogbias.datasets.peek_format import import_peek
from cogbias.datasets.tables import columns_of, read_table

__all__ = [
    "FIELDS",
    "ColumnMapping",
    "DatasetError",
    "ImportSummary",
    "bias_id",
    "columns_of",
    "download",
    "hub_url",
    "import_generic",
    "import_hub",
    "import_malberg",
    "import_peek",
    "import_mohr",
    "import_run_id",
    "parse_prompt",
    "read_table",
]
