"""Runner throughput and overhead against a local OpenAI-compatible server with 1 s latency.

    .venv/bin/python bench/runner.py [--concurrency 16,64,256] [--seconds 8]

For each concurrency C it measures, each in a fresh process so peak RSS and CPU are its own:
  openai   a bare `openai.AsyncOpenAI` loop (a floor for comparison),
  litellm  a bare `litellm.acompletion` loop,
  runner   the real `cogbias run dataset bench ...` command, as a subprocess, deciding the
           pairs of an imported dataset (plan, client, cache, scoring, store), on the lean
           OpenAI-compatible path the model profile chooses,
  runner-litellm  the same command with COGBIAS_LLM_TRANSPORT=litellm,
  cached   the same command again on a copy of the database whose runs were removed but whose
           response cache was kept: every answer comes from the cache (0 HTTP calls),
  library  `cogbias run pairs --generator openai/fake ...`: a library run whose instances
           are generated first (two gap-filling calls each), then decided.
It prints calls/s, the ratio to the ideal C / L, the whole process's CPU milliseconds per call
(start-up included: it is what a user waits for) and its peak RSS. The server runs in its own
process (async, sleeping); its own CPU is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
LATENCY = 1.0
PROMPT = [{"role": "user", "content": "Choose one. Option 1: yes Option 2: no"}]


def distinct_fills(request: dict) -> str:
    """Gap fills that differ with the prompt (as a real generator's would), so that no two
    instances of the library run ask identical questions; other answers as the default."""
    from fake_llm_server import default_responder

    fmt = request.get("response_format") or {}
    if fmt.get("type") != "json_schema":
        return default_responder(request)
    digest = hashlib.sha256(json.dumps(request["messages"]).encode()).hexdigest()[:8]
    return json.dumps({k: f"{k} {digest}" for k in fmt["json_schema"]["schema"]["required"]})


def serve() -> None:
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer(distinct_fills, latency=LATENCY) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin


async def bare_openai(base_url: str, concurrency: int, calls: int) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-no-key-required", max_retries=0)
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await client.chat.completions.create(model="fake", messages=PROMPT, max_tokens=8)

    await asyncio.gather(*(one() for _ in range(calls)))
    return calls


async def bare_litellm(base_url: str, concurrency: int, calls: int) -> int:
    from cogbias.llm import get_litellm

    litellm = get_litellm()
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            await litellm.acompletion(
                model="openai/fake",
                messages=[{"role": "user", "content": f"{PROMPT[0]['content']} #{i}"}],
                api_base=base_url,
                api_key="sk-no-key-required",
                max_tokens=8,
            )

    await asyncio.gather(*(one(i) for i in range(calls)))
    return calls


def setup_dataset(db: Path, pairs: int) -> None:
    """A dataset of `pairs` test cases, each asking distinct questions (so that neither the
    cache nor single flight merges any two calls), in a fresh database (setup: not measured)."""
    from cogbias.core.templates import Filled
    from cogbias.library import testcases as library
    from cogbias.runs import pipeline
    from cogbias.store import Store

    cases = list(library.load_library(include_user=False).values())
    rows = []
    for i in range(pairs):
        instance = pipeline.generate_offline(cases[i % len(cases)], f"bench scenario {i}", seed=i)
        instance.id, instance.dataset = f"bench-{i}", "bench"
        for half in ("control", "treatment"):
            filled = instance.half(half)
            unique = Filled(f"Case {i}. {filled.situation}", filled.prompt, filled.options)
            setattr(instance, half, unique)
        rows.append(instance.to_row())
    with Store(db) as store:
        store.save_instances(rows)
        store.save_dataset("bench", "bench", "bench/runner.py", pairs, {})


def run_command(
    db: Path, base_url: str, concurrency: int, env: dict[str, str], what: list[str] | None = None
) -> dict[str, float]:
    """`cogbias run` (on the dataset, or `what`) as a child process: wall, CPU and peak RSS."""
    what = what or ["dataset", "bench"]
    cmd = [sys.executable, "-m", "cogbias", "run", *what, "--models", "openai/fake",
           "--api-base", base_url, "--concurrency", str(concurrency), "--db", str(db),
           "--scoring", "choice"]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "cogbias run failed")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}


def forget_runs(db: Path) -> None:
    con = sqlite3.connect(db)
    with con:
        con.execute("delete from decisions")
        con.execute("delete from runs")
    con.close()


def worker(mode: str, base_url: str, concurrency: int, calls: int) -> None:
    import openai  # noqa: F401 - import costs are not per-call work

    if mode == "litellm":
        from cogbias.llm import get_litellm

        get_litellm()
    measure = {"cpu0": time.process_time(), "wall0": time.perf_counter()}
    if mode == "openai":
        done = asyncio.run(bare_openai(base_url, concurrency, calls))
    else:
        done = asyncio.run(bare_litellm(base_url, concurrency, calls))
    wall, cpu = time.perf_counter() - measure["wall0"], time.process_time() - measure["cpu0"]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"calls": done, "wall": wall, "cpu": cpu, "rss_mb": rss_mb}))


def measure_commands(base_url: str, c: int, calls: int, modes: list[str]) -> dict[str, dict]:
    """The runner modes: one dataset, the command run as a user runs it."""
    out: dict[str, dict] = {}
    # a pair is 2 calls (one answer a half; an extraction only for an answer that names no
    # option, which the test server's never do)
    pairs = calls // 2
    with tempfile.TemporaryDirectory() as tmp:
        for mode in [m for m in modes if m.startswith("runner")]:
            db = Path(tmp) / f"{mode}.db"
            setup_dataset(db, pairs)
            env = {**os.environ}
            if mode == "runner-litellm":
                env["COGBIAS_LLM_TRANSPORT"] = "litellm"
            out[mode] = run_command(db, base_url, c, env)
            out[mode]["calls"] = http_calls(db)
            if mode == "runner" and "cached" in modes:
                forget_runs(db)
                out["cached"] = {**run_command(db, base_url, c, env), "calls": http_calls(db)}
        if "library" in modes:
            instances = max(calls // 6 // 30, 1)  # 30 biases; 2 fills + 4 decision calls each
            what = ["pairs", "--generator", "openai/fake", "--scenarios", str(instances)]
            db = Path(tmp) / "library.db"
            out["library"] = run_command(db, base_url, c, {**os.environ}, what)
            out["library"]["calls"] = http_calls(db)
    return out


def http_calls(db: Path) -> int:
    """Calls that reached the server: every successful one left one row in the cache (the
    test server never fails here), and calls the cache or single flight merged left none."""
    con = sqlite3.connect(db)
    try:
        return int(con.execute("select count(*) from llm_calls").fetchone()[0])
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", default="16,64,256")
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="target duration of each measurement"
    )
    parser.add_argument("--modes", default="openai,litellm,runner,runner-litellm,cached,library")
    parser.add_argument(
        "--planned", type=int, help="planned calls at every C (default: C x --seconds / L)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    if args.worker:
        return worker(args.worker, args.base_url, int(args.concurrency), args.calls)

    # A user's installed cogbias is compiled once; this machine's PYTHONDONTWRITEBYTECODE
    # would make every measured command compile its ~300 modules again (~0.2 s of CPU).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "cogbias")], check=True)
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    base_url = server.stdout.readline().strip()
    print(f"server {base_url}, latency {LATENCY:.1f} s; each row is its own process\n")
    print(
        f"{'C':>5} {'mode':<15} {'calls':>6} {'wall s':>7} {'calls/s':>8} {'ideal':>7} {'ratio':>6} "
        f"{'RSS MB':>7} {'CPU ms/call':>11}"
    )
    modes = args.modes.split(",")
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            calls = args.planned or max(int(c * args.seconds / LATENCY), 8)
            calls -= calls % 4
            results: dict[str, dict] = {}
            for mode in [m for m in modes if m in ("openai", "litellm")]:
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", mode, "--base-url", base_url,
                     "--concurrency", str(c), "--calls", str(calls)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
            results.update(measure_commands(base_url, c, calls, modes))
            for mode, r in results.items():
                rate, ideal = r["calls"] / r["wall"], c / LATENCY
                print(
                    f"{c:>5} {mode:<15} {r['calls']:>6} {r['wall']:>7.1f} {rate:>8.1f} {ideal:>7.1f} "
                    f"{rate / ideal:>6.2f} {r['rss_mb']:>7.0f} {1000 * r['cpu'] / r['calls']:>11.2f}",
                    flush=True,
                )
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
