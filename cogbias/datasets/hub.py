"""The published benchmark on the Hugging Face Hub (`tum-nlp/cognitive-biases-in-llms`).

One CSV row per test case: `bias`, `scenario`, `control`, `treatment` (full prompts with their
"Option N:" lists) and `metric_params` (`k`, `x_1`, `x_2`). Each row becomes a ready instance
of the dataset, carrying its own metric parameters (x_1 → y1, x_2 → y2), so `cogbias run
--dataset` scores every pair exactly as the dataset card says and any model can be placed
beside the paper's.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cogbias.core.metrics import MetricParams, params_problem
from cogbias.core.records import Instance, stable_id
from cogbias.core.templates import Filled
from cogbias.datasets import importing
from cogbias.datasets.common import (
    MAX_OPTIONS,
    CsvFile,
    DatasetError,
    Format,
    ImportSummary,
    Progress,
    bias_key,
    bounded,
    finite,
    number,
    parse_literal,
    parse_prompt,
)
from cogbias.store import Store

KIND = "malberg2024-hub"
DEFAULT_NAME = "malberg2024-hub"
HUB_URL = "https://huggingface.co/datasets/tum-nlp/cognitive-biases-in-llms/resolve/main"
# The file name inside the Hub repository; override with --hub-file or COGBIAS_HUB_FILE if
# the repository names it differently.
HUB_FILE = "full_dataset.csv"
COLUMNS = ("bias", "scenario", "control", "treatment", "metric_params")


def hub_url(file: str | None = None) -> str:
    """Where the benchmark is downloaded from (COGBIAS_HUB_URL points tests at a local server)."""
    base = os.environ.get("COGBIAS_HUB_URL", HUB_URL).rstrip("/")
    name = file or os.environ.get("COGBIAS_HUB_FILE", HUB_FILE)
    return f"{base}/{urllib.parse.quote(name)}"


DEADLINE_S = 1800.0  # a whole download (the Hub file is ~100 MB); COGBIAS_DOWNLOAD_DEADLINE
STALL_S = 60.0  # a window in which at least STALL_BYTES must arrive; COGBIAS_DOWNLOAD_STALL
STALL_BYTES = 1024


class _Stalled(Exception):
    """The server sends too little, too slowly, or for too long."""


def download(
    url: str,
    dest_dir: str | Path,
    progress: Progress | None = None,
    deadline: float | None = None,
    stall: float | None = None,
) -> Path:
    """Download a file over HTTP(S) into dest_dir, atomically: the bytes go to a `.part`
    file that is renamed when complete and removed on every other exit (an error, Ctrl-C,
    SIGTERM; one left by a killed process is removed by the next download). A download ends
    after `deadline` seconds overall, and when less than STALL_BYTES arrive in `stall`
    seconds: a server that trickles a byte every few seconds is not waited for forever."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https"):
        raise DatasetError(url, "only http and https URLs can be downloaded")
    deadline = deadline or _seconds("COGBIAS_DOWNLOAD_DEADLINE", DEADLINE_S)
    stall = stall or _seconds("COGBIAS_DOWNLOAD_STALL", STALL_S)
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / (Path(parsed.path).name or "dataset.csv")
    _sweep(dest_dir)
    partial = dest_dir / f"{target.name}.{os.getpid()}.part"
    try:
        with _terminate_as_exit():
            done, total = _fetch(url, partial, target.name, progress, deadline, stall)
        if total and done != total:
            raise DatasetError(url, f"download stopped after {done} of {total} bytes; try again")
        partial.replace(target)
    except urllib.error.HTTPError as exc:
        raise DatasetError(
            url,
            f"the server answered {exc.code} {exc.reason}; check the URL (COGBIAS_HUB_URL, "
            "--hub-file) or download the file yourself and pass its path",
        ) from None
    except _Stalled as exc:
        raise DatasetError(url, f"{exc}; try again later, or download the file yourself and "
                           "pass its path") from None  # fmt: skip
    except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise DatasetError(
            url, f"could not download ({reason}); check the network or pass a local FILE"
        ) from None
    finally:
        partial.unlink(missing_ok=True)
    return target


def _fetch(
    url: str, partial: Path, label: str, progress: Progress | None, deadline: float, stall: float
) -> tuple[int, int]:
    """Copy the response into `partial`; (bytes received, Content-Length or 0)."""
    started = window_start = time.monotonic()
    done = window_done = 0
    # the socket waits at most `stall` for any byte; the loop checks the rest
    with urllib.request.urlopen(url, timeout=min(stall, deadline)) as response:  # noqa: S310 - scheme checked
        total = int(response.headers.get("Content-Length") or 0)
        with partial.open("wb") as out:
            while chunk := response.read1(1 << 16):
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(label, done, total)
                now = time.monotonic()
                if now - started > deadline:
                    raise _Stalled(f"the download took longer than {deadline:g} s "
                                   f"({done:,} bytes so far)")  # fmt: skip
                if now - window_start >= stall:
                    if done - window_done < STALL_BYTES:
                        raise _Stalled(f"the download stalled: {done - window_done} bytes in "
                                       f"{now - window_start:.0f} s")  # fmt: skip
                    window_start, window_done = now, done
    return done, total


def _seconds(variable: str, default: float) -> float:
    """A positive number of seconds from the environment, else `default`."""
    try:
        value = float(os.environ.get(variable, ""))
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


def _sweep(folder: Path) -> None:
    """Remove the `.part` files (NAME.PID.part) of downloads whose process is gone (a kill
    -9 leaves one: no process can clean up after it)."""
    from cogbias.store import pid_alive

    for stale in folder.glob("*.*.part"):
        pid = stale.name.removesuffix(".part").rsplit(".", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            stale.unlink(missing_ok=True)


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM ends the process through `finally` (removing the `.part`) instead of at once;
    only the main thread can set a handler (the app downloads in a worker thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)

    def leave(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def read_instances(path: Path, name: str, progress: Progress | None = None) -> Iterator[Instance]:
    """Validate and convert each row; the first problem raises a DatasetError naming it."""
    csv_file = CsvFile(path, COLUMNS, progress)
    for record in csv_file.records():
        values, row, line = record.values, record.row, record.line

        fail = record.fail
        bias = values["bias"].strip()
        if not bias:
            raise fail("bias", "is empty")
        halves: dict[str, Filled] = {}
        for half in ("control", "treatment"):
            parsed = parse_prompt(bounded(values[half], half, fail))
            if parsed is None:
                raise fail(half, 'has no answer options (lines "Option 1: …", "Option 2: …")')
            halves[half] = Filled(parsed.situation, parsed.prompt, parsed.options)
        if len(halves["control"].options) != len(halves["treatment"].options):
            raise fail(
                "treatment",
                f"has {len(halves['treatment'].options)} options but the control has "
                f"{len(halves['control'].options)}",
            )
        n = len(halves["control"].options)
        if n > MAX_OPTIONS:
            raise fail("control", f"has {n} answer options; at most {MAX_OPTIONS} are allowed")
        params = _metric(values["metric_params"], csv_file.name, row, line)
        metric = MetricParams(k=params["k"], y1=params["x_1"], y2=params["x_2"])
        problem = params_problem(metric, n)
        if problem:  # the card calls y1, y2 x_1, x_2
            raise fail("metric_params", problem.replace("y1", "x_1").replace("y2", "x_2"))
        yield Instance(
            id=stable_id("dataset", name, row, values),
            test_case=bias_key(bias, "bias", fail),
            test_case_hash="",
            scenario=bounded(values["scenario"], "scenario", fail),
            control=halves["control"],
            treatment=halves["treatment"],
            metric=metric,
            instance_index=row,
            values={"metric_params": params, "bias_name": bias},
            dataset=name,
        )


def _metric(text: str, file: str, row: int, line: int) -> dict[str, float]:
    """`{'k': 1, 'x_1': 3, 'x_2': 3}` as a Python dict literal or as JSON."""
    column = "metric_params"
    value: Any = parse_literal(text, file, row, column, line)
    if not isinstance(value, dict):
        raise DatasetError(
            file,
            f"expected a dict with k, x_1, x_2, found {type(value).__name__}",
            row,
            column,
            line,
        )
    for key in ("k", "x_1", "x_2"):
        if key not in value:
            raise DatasetError(file, f"has no '{key}' (expected k, x_1, x_2)", row, column, line)
        if finite(value[key]) is None:
            shown = repr(value[key]) if len(repr(value[key])) <= 40 else "a huge number"
            kind = "a finite number" if number(value[key]) else "a number"
            raise DatasetError(file, f"'{key}' must be {kind}, found {shown}", row, column, line)
    return {key: float(value[key]) for key in ("k", "x_1", "x_2")}


def import_hub(
    store: Store,
    path: str | Path | None = None,
    name: str = DEFAULT_NAME,
    replace: bool = False,
    progress: Progress | None = None,
    download_dir: str | Path | None = None,
    hub_file: str | None = None,
) -> ImportSummary:
    """Import the Hub CSV from a local file, or download it first when no path is given."""
    if path is None:
        from cogbias.library.testcases import user_dir

        folder = Path(download_dir) if download_dir else user_dir().parent / "downloads"
        path = download(hub_url(hub_file), folder, progress)
    path = Path(path)
    if not path.is_file():
        raise DatasetError(path, "no such file")
    started = time.monotonic()
    with importing.Import(store, name, KIND, [path], replace) as job:
        if job.unchanged:
            return job.summary
        job.add_instances((i, True) for i in read_instances(path, name, progress))
        job.finish(source=str(path))
    job.summary.seconds = time.monotonic() - started
    return job.summary


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", nargs="?", help="local CSV (default: download it from the Hub)")
    p.add_argument("--hub-file", help="file name inside the Hub repository")
    p.add_argument(
        "--download-dir", help="where a download is kept (default: ~/.cogbias/downloads)"
    )


FORMAT = Format(
    "malberg2024-hub",
    "the paper's 30,000 test cases from the Hugging Face Hub (or a local copy)",
    _arguments,
    lambda store, args, progress: import_hub(
        store,
        args.file,
        name=args.name,
        replace=args.replace,
        progress=progress,
        download_dir=args.download_dir,
        hub_file=args.hub_file,
    ),
    default_name="malberg2024-hub",
)
