"""Runner throughput and overhead against a local OpenAI-compatible server with 1 s latency.

    .venv/bin/python bench/runner.py [--concurrency 1,16,64,256] [--seconds 8]

For each concurrency C it measures, each in a fresh process so peak RSS and CPU are its own:
  openai   a bare `openai.AsyncOpenAI` loop (the floor),
  litellm  a bare `litellm.acompletion` loop (what our client is built on),
  runner   `cogbias` deciding pairs of a dataset through the full runner (cache, store, scoring).
and prints calls/s, the ratio to the ideal C / L, peak RSS and CPU milliseconds per call.
The server runs in its own process (async, sleeping), so it is never the bottleneck.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
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


def serve() -> None:
    from fake_llm_server import FakeLLMServer

    with FakeLLMServer(latency=LATENCY) as server:
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


def through_runner(base_url: str, concurrency: int, calls: int, measure: dict[str, float]) -> int:
    from cogbias import library, pipeline, runner
    from cogbias.store import Store

    pairs = max(calls // 4, 1)  # a pair is 4 calls: answer + extraction, for both halves
    cases = list(library.load_library(include_user=False).values())
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.db") as store:
        rows = []
        for i in range(pairs):
            instance = pipeline.generate_offline(
                cases[i % len(cases)], f"bench scenario {i}", seed=i
            )
            instance.id, instance.dataset = f"bench-{i}", "bench"
            rows.append(instance.to_row())
        store.save_instances(rows)
        spec = runner.RunSpec(models=["openai/fake"], dataset="bench", api_base=base_url)
        plan = runner.plan(spec, store)
        measure["cpu0"], measure["wall0"] = (
            time.process_time(),
            time.perf_counter(),
        )  # setup excluded
        result = runner.execute(plan, store, concurrency=concurrency)
        assert result["status"] == "done", result
        return pairs * 4


def worker(mode: str, base_url: str, concurrency: int, calls: int) -> None:
    import openai  # noqa: F401 - import costs are not per-call work

    if mode == "runner":
        import cogbias.runner  # noqa: F401
    if mode in ("runner", "litellm"):
        from cogbias.llm import get_litellm

        get_litellm()
    measure = {"cpu0": time.process_time(), "wall0": time.perf_counter()}
    if mode == "openai":
        done = asyncio.run(bare_openai(base_url, concurrency, calls))
    elif mode == "litellm":
        done = asyncio.run(bare_litellm(base_url, concurrency, calls))
    else:
        done = through_runner(base_url, concurrency, calls, measure)
    wall, cpu = time.perf_counter() - measure["wall0"], time.process_time() - measure["cpu0"]
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"calls": done, "wall": wall, "cpu": cpu, "rss_mb": rss_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--concurrency", default="1,16,64,256")
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="target duration of each measurement"
    )
    parser.add_argument("--modes", default="openai,litellm,runner")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    if args.worker:
        return worker(args.worker, args.base_url, int(args.concurrency), args.calls)

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    base_url = server.stdout.readline().strip()
    print(f"server {base_url}, latency {LATENCY:.1f} s; each row is its own process\n")
    print(
        f"{'C':>5} {'mode':<8} {'calls':>6} {'calls/s':>8} {'ideal':>7} {'ratio':>6} {'RSS MB':>7} {'CPU ms/call':>11}"
    )
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            calls = max(int(c * args.seconds / LATENCY), 8)
            calls -= calls % 4
            for mode in args.modes.split(","):
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", mode, "--base-url", base_url,
                     "--concurrency", str(c), "--calls", str(calls)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                r = json.loads(out.stdout.strip().splitlines()[-1])
                rate, ideal = r["calls"] / r["wall"], c / LATENCY
                print(
                    f"{c:>5} {mode:<8} {r['calls']:>6} {rate:>8.1f} {ideal:>7.1f} {rate / ideal:>6.2f} "
                    f"{r['rss_mb']:>7.0f} {1000 * r['cpu'] / r['calls']:>11.2f}",
                    flush=True,
                )
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
