"""A property test (issue 22, acceptance): random bytes, random nesting and random numbers
through every importer and `batch import` end in a success or a located message (one that
names the file), never "unexpected" or a traceback, within a memory bound and a time bound.

The inputs come from a seeded generator (the same cases every run, no extra dependency):
each case mutates one of the tests' own fixture files. All cases run in one child process
under `resource.setrlimit(RLIMIT_AS)`, each under an alarm, calling the CLI's `main` as a
person's command line would.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from cogbias.store import Store
from tests.dataset_helpers import FIXTURES, HUB_CSV

ROOT = Path(__file__).resolve().parent.parent
SEED = int(os.environ.get("PROPERTY_SEED", "22"))
PER_KIND = int(
    os.environ.get("PROPERTY_CASES", "4")
)  # cases per importer and kind of damage: modest, the whole test takes seconds
MEMORY_MB = 1536  # address space of the child (the interpreter and pyarrow map ~600 MB)
CASE_SECONDS = 20  # a case still running after this is a hang

# The child: set the bounds, then run each case's command line, reporting what it printed.
RUNNER = r"""
import contextlib, io, json, resource, signal, sys
limit = int(sys.argv[2]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from cogbias.cli.main import main

class Hang(Exception):
    pass

def alarm(signum, frame):
    raise Hang()

signal.signal(signal.SIGALRM, alarm)
for case in json.loads(open(sys.argv[1], encoding="utf-8").read()):
    err = io.StringIO()
    signal.alarm(int(sys.argv[3]))
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(case["argv"])
            except SystemExit as exc:
                code = exc.code
    except Hang:
        code = "hang"
    except MemoryError:
        code = "memory"
    except BaseException as exc:
        code = "raised " + type(exc).__name__ + ": " + str(exc)[:200]
    finally:
        signal.alarm(0)
    text = err.getvalue()
    longest = max([len(line) for line in text.splitlines()] or [0])
    print(json.dumps({"id": case["id"], "code": code, "stderr": text[:1500] + text[-1500:],
                      "longest": longest}),
          flush=True)
"""


# ------------------------------------------------------------------ the damage


def random_number(rng: random.Random) -> str:
    return rng.choice([
        lambda: str(rng.randint(-(10 ** rng.randint(1, 400)), 10 ** rng.randint(1, 400))),
        lambda: f"{rng.uniform(-9, 9):.3f}e{rng.randint(-400, 400)}",
        lambda: rng.choice(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "-0"]),
        lambda: rng.choice(["1e300", "-1e308", "1.7976931348623157e308", "5e-324", "1_000"]),
        lambda: str(rng.randint(-3, 3)),
    ])()  # fmt: skip


def random_nesting(rng: random.Random) -> str:
    depth = rng.choice([3, 99, 101, 1_000, 50_000])
    if rng.random() < 0.5:
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


def random_bytes(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(4)
    if kind == 0 or not data:  # nothing of the original
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 3000)))
    if kind == 1:  # a few bytes changed
        out = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:  # bytes inserted
        at = rng.randrange(len(data))
        return data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))) + data[at:]
    return data[: rng.randrange(len(data))]  # cut off


def mutate_csv(rng: random.Random, data: bytes, value: str) -> bytes:
    """`value` in a random cell of a random row (the header stays)."""
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    row = rng.randrange(1, len(rows)) if len(rows) > 1 else 0
    rows[row][rng.randrange(len(rows[row]))] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def mutate_json(rng: random.Random, data: bytes, value: str, lines: bool = False) -> bytes:
    """`value` (raw JSON text) in place of a random scalar of the document (of one line)."""
    texts = data.decode("utf-8").splitlines() if lines else [data.decode("utf-8")]
    index = rng.randrange(len(texts))
    document = json.loads(texts[index])
    marker = "\u0000MARK\u0000"
    paths: list[tuple[object, object]] = []
    stack: list[object] = [document]
    while stack:
        node = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node)  # type: ignore[union-attr]
        for key, child in children:
            if isinstance(child, dict | list):
                stack.append(child)
            else:
                paths.append((node, key))
    node, key = rng.choice(paths)
    node[key] = marker  # type: ignore[index]
    texts[index] = json.dumps(document).replace(json.dumps(marker), value)
    return ("\n".join(texts) + "\n").encode("utf-8")


# ------------------------------------------------------------------ the importers


def folder_copy(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for path in source.rglob("*"):
        if path.is_file():
            (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            (target / path.relative_to(source)).write_bytes(path.read_bytes())
    return target


def hub_as_jsonl() -> bytes:
    with HUB_CSV.open(encoding="utf-8", newline="") as handle:
        return "".join(json.dumps(row) + "\n" for row in csv.DictReader(handle)).encode()


GENERIC_MAP = ["--map", "bias=bias", "--map", "control=control", "--map", "treatment=treatment",
               "--map", "metric_params=metric_params"]  # fmt: skip


def importers(
    tmp: Path,
) -> dict[str, tuple[Callable[[Path], list[Path]], Callable[[Path], list[str]]]]:
    """name -> (lay out a fresh copy of its input in a folder: the files that may be damaged;
    the command line for that folder)."""

    def hub(folder: Path) -> list[Path]:
        folder.mkdir(parents=True)
        (folder / "dataset.csv").write_bytes(HUB_CSV.read_bytes())
        return [folder / "dataset.csv"]

    def jsonl(folder: Path) -> list[Path]:
        folder.mkdir(parents=True)
        (folder / "pairs.jsonl").write_bytes(hub_as_jsonl())
        return [folder / "pairs.jsonl"]

    def code(folder: Path) -> list[Path]:
        folder_copy(FIXTURES / "malberg2024-format", folder)
        return sorted(folder.rglob("*.csv"))

    def thesis(folder: Path) -> list[Path]:
        folder_copy(FIXTURES / "mohr2025-format", folder)
        return sorted(folder.glob("*.csv"))

    def tokenbias(folder: Path) -> list[Path]:
        folder_copy(FIXTURES / "tokenbias-format", folder)
        return sorted(folder.glob("*.json"))

    return {
        "malberg2024-hub": (hub, lambda f: ["import", "malberg2024-hub", str(f / "dataset.csv")]),
        "generic-csv": (hub, lambda f: ["import", "generic", str(f / "dataset.csv"), *GENERIC_MAP]),
        "generic-jsonl": (jsonl, lambda f: ["import", "generic", str(f / "pairs.jsonl"), *GENERIC_MAP]),
        "malberg2024": (code, lambda f: ["import", "malberg2024", str(f)]),
        "mohr2025": (thesis, lambda f: ["import", "mohr2025", str(f)]),
        "peek2024": (tokenbias, lambda f: ["import", "peek2024", str(f)]),
    }  # fmt: skip


def damage(rng: random.Random, path: Path, kind: str) -> None:
    data = path.read_bytes()
    if kind == "bytes":
        path.write_bytes(random_bytes(rng, data))
        return
    value = random_number(rng) if kind == "numbers" else random_nesting(rng)
    if path.suffix == ".csv":
        path.write_bytes(mutate_csv(rng, data, value))
    else:
        path.write_bytes(mutate_json(rng, data, value, lines=path.suffix == ".jsonl"))


def batch_base(tmp: Path) -> tuple[Path, bytes]:
    """A database with a planned run whose requests were exported, and a valid engine output
    answering every one of them."""
    db = tmp / "batch-base.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cogbias", *args, "--db", str(db)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    run_id = run("run", "pairs", "--biases", "anchoring,framing_effect", "--models", "openai/x",
                 "--api-base", "http://127.0.0.1:9/v1", "--generator", "examples", "--plan-only")  # fmt: skip
    requests = tmp / "requests.jsonl"
    run("batch", "export", run_id, "-o", str(requests))
    lines = []
    for line in requests.read_text(encoding="utf-8").splitlines():
        key = json.loads(line)["custom_id"]
        body = {"choices": [{"message": {"role": "assistant", "content": "Option 1"}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2}}  # fmt: skip
        lines.append(json.dumps({"custom_id": key, "response": {"status_code": 200, "body": body}}))
    return db, ("\n".join(lines) + "\n").encode()


# ------------------------------------------------------------------ the property


def test_damaged_inputs_end_in_success_or_a_located_message(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cases: list[dict[str, object]] = []
    names: dict[str, list[str]] = {}
    for name, (layout, argv) in importers(tmp_path).items():
        for kind in ("bytes", "nesting", "numbers"):
            for n in range(PER_KIND):
                case = f"{name}-{kind}-{n}"
                folder = tmp_path / case
                files = layout(folder)
                target = rng.choice(files)
                damage(rng, target, kind)
                db = tmp_path / f"{case}.db"
                cases.append({"id": case, "argv": [*argv(folder), "--db", str(db)]})
                names[case] = [target.name, folder.name]
    base_db, output = batch_base(tmp_path)
    for kind in ("bytes", "nesting", "numbers"):
        for n in range(PER_KIND):
            case = f"batch-{kind}-{n}"
            results = tmp_path / f"{case}.jsonl"
            results.write_bytes(output)
            damage(rng, results, kind)
            db = tmp_path / f"{case}.db"
            db.write_bytes(base_db.read_bytes())
            cases.append({"id": case, "argv": ["batch", "import", str(results), "--db", str(db)]})
            names[case] = [results.name]
    listing = tmp_path / "cases.json"
    listing.write_text(json.dumps(cases), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(listing), str(MEMORY_MB), str(CASE_SECONDS)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=CASE_SECONDS * len(cases), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = [json.loads(line) for line in done.stdout.splitlines()]
    assert [o["id"] for o in outcomes] == [c["id"] for c in cases]
    bad = []
    for outcome in outcomes:
        code, err = outcome["code"], outcome["stderr"]
        message = [line for line in err.splitlines() if line.startswith("error:")]
        located = code == 0 or (
            code in (1, 2) and message and any(n in err for n in names[outcome["id"]])
        )
        readable = outcome["longest"] <= 2_000  # no message quotes a huge cell whole
        if not located or not readable or "unexpected" in err or "Traceback" in err:
            bad.append(f"{outcome['id']}: {code} {err[-400:]!r}")
    assert not bad, "\n".join(bad)
    successes = sum(o["code"] == 0 for o in outcomes)
    assert 0 < successes < len(outcomes)  # the damage is neither always harmless nor always fatal
    with Store(tmp_path / "malberg2024-hub-numbers-0.db") as store:
        assert store.datasets() is not None  # each database is still a readable store
