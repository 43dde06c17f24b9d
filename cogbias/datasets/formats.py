"""The formats `cogbias import` reads, in the order the command lists them.

To add an importer: write its module in `cogbias/datasets/` with an import function and a
`FORMAT` (`common.Format`: its name, its arguments, how to run it), and add it here.
"""

from __future__ import annotations

from cogbias.datasets import generic, hub, malberg_format, mohr_format, peek_format
from cogbias.datasets.common import Format

FORMATS: tuple[Format, ...] = (
    hub.FORMAT,
    malberg_format.FORMAT,
    mohr_format.FORMAT,
    peek_format.FORMAT,
    generic.FORMAT,
)
