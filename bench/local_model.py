"""Where a live pair's time goes on the local model: server start, then each half's request.

For each thread count of `--threads`, one child process (`COGBIAS_LOCAL_THREADS` set, a server
of its own) starts the local SmolLM2 server and times it, then asks the halves of `--pairs`
framing-effect pairs the way a live pair does: `probabilities` (the letter prompt, one token,
20 log-probabilities, no prompt cache: evaluated whole) and `choice` (the "Option N" prompt
with its grammar, llama.cpp's prompt cache on, so the treatment reuses the control's prefix).
Prints, per request kind, the median wall time and llama.cpp's own timings (prompt tokens
evaluated and their milliseconds, tokens generated and theirs); what remains is HTTP and
Python. The machine's load average is printed before and after: it is shared.

    .venv/bin/python bench/local_model.py                  # threads 1,2; 3 pairs
    .venv/bin/python bench/local_model.py --threads 1 --pairs 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def ask(base: str, body: dict) -> dict:
    request = urllib.request.Request(
        base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as answer:
        data = json.load(answer)
    timings = data.get("timings") or {}
    return {
        "wall": time.perf_counter() - started,
        "prompt_n": timings.get("prompt_n", 0),
        "prompt_ms": timings.get("prompt_ms", 0.0),
        "predicted_n": timings.get("predicted_n", 0),
        "predicted_ms": timings.get("predicted_ms", 0.0),
    }


def bodies(instance, kind: str) -> list[dict]:
    """The request bodies of both halves of a live pair of `kind`."""
    from cogbias.core.templates import render_decision_text
    from cogbias.llm import logprobs
    from cogbias.runs import decide, grammars, probabilities

    found = []
    for half in ("control", "treatment"):
        filled = instance.half(half)
        n = len(filled.options)
        order = list(range(n))
        if kind == "probabilities":
            text = probabilities.LABEL_PROMPT.format(
                task=probabilities.render_labelled(filled, order)
            )
            extra = {"max_tokens": 1, "grammar": logprobs.label_grammar(n)}
            extra |= {"logprobs": True, "top_logprobs": 20, "cache_prompt": False}
        else:
            question = decide.DEC_PROMPT + decide.OPTION_SUFFIX
            text = question.format(task=render_decision_text(filled, order))
            extra = {"max_tokens": 32, "grammar": grammars.decision_grammar(n)}
        messages = [{"role": "user", "content": text}]
        found.append({"model": "smollm2", "messages": messages, "temperature": 0, **extra})
    return found


def child(pairs: int) -> None:
    """In the child: start the server, ask the pairs, print one JSON line of figures."""
    started = time.perf_counter()
    from cogbias.llm import local

    base = local.ensure_local_server()
    start_s = time.perf_counter() - started
    from cogbias.library import testcases as library
    from cogbias.library.scenarios import load_scenarios
    from cogbias.runs import pipeline

    case = library.get_test_case("framing_effect")
    figures: dict[str, list[dict]] = {"probabilities": [], "choice": []}
    for scenario in load_scenarios()[20 : 20 + pairs]:
        instance = pipeline.run_sync(pipeline.generate(None, case, scenario.text, "examples"))
        for kind, found in figures.items():
            for i, body in enumerate(bodies(instance, kind)):
                found.append({**ask(base, body), "half": i})
    print(json.dumps({"start_s": start_s, "threads": local.local_threads(), **figures}))


def report(line: dict) -> None:
    print(f"threads {line['threads']}: server start {line['start_s']:.2f} s")
    for kind in ("probabilities", "choice"):
        for half, name in ((0, "control"), (1, "treatment")):
            rows = [r for r in line[kind] if r["half"] == half]
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "half"}
            rest = med["wall"] * 1000 - med["prompt_ms"] - med["predicted_ms"]
            print(
                f"  {kind:<13} {name:<9} wall {med['wall']:5.2f} s: prompt {med['prompt_n']:4.0f}"
                f" tokens in {med['prompt_ms']:6.0f} ms, {med['predicted_n']:2.0f} generated in"
                f" {med['predicted_ms']:5.0f} ms, other {rest:4.0f} ms"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="COGBIAS_LOCAL_THREADS values")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.pairs)
        return
    print(f"load average before {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for threads in args.threads.split(","):
        env = {**os.environ, "COGBIAS_LOCAL_THREADS": threads, "PYTHONPATH": str(ROOT)}
        env.pop("COGBIAS_LOCAL_API_BASE", None)
        cmd = [sys.executable, __file__, "--child", "--pairs", str(args.pairs)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode:
            raise SystemExit(done.stderr)
        report(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
