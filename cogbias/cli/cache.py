"""`cogbias cache stats|prune|clear`: see, prune or clear the LLM response cache."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta

from cogbias.cli.options import _table


def _cache_stats(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    with Store(args.db) as store:
        rows = store.cache_stats()
    if not rows:
        print("the cache is empty", file=sys.stderr)
        return 0
    _table(rows, ["model", "answers", "tokens", "cost", "oldest", "newest"])
    return 0


MAX_AGE_DAYS = 36_500  # older than any cache; a larger age overflows the date it is counted from
_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([dhm])")


def _cache_prune(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    match = _AGE.fullmatch(args.older_than.strip())
    if not match:
        raise ValueError(f"--older-than {args.older_than!r}: give an age like 30d, 12h or 90m")
    unit = {"d": "days", "h": "hours", "m": "minutes"}[match.group(2)]
    if float(match.group(1)) / {"days": 1, "hours": 24, "minutes": 1440}[unit] > MAX_AGE_DAYS:
        raise ValueError(
            f"--older-than {args.older_than!r}: at most {MAX_AGE_DAYS:,} days (100 years)"
        )
    cutoff = datetime.now(UTC) - timedelta(**{unit: float(match.group(1))})
    with Store(args.db) as store:
        removed = store.prune_cache(cutoff.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), args.model)
    print(f"removed {removed} cached answer(s) older than {args.older_than}", file=sys.stderr)
    return 0


def _cache_clear(args: argparse.Namespace) -> int:
    from cogbias.store import Store

    with Store(args.db) as store:
        removed = store.prune_cache(model=args.model)
    print(f"removed {removed} cached answer(s)", file=sys.stderr)
    return 0
