"""A class at once: N participants join `cogbias class serve` within a window and answer.

Starts the real command in a child process (`cogbias class serve --port 0`), opens a session
with `cogbias class open`, then lets N-1 HTTP participants (aiohttp, each with its own cookie
jar) and one real browser (headless Chromium via Playwright, in a thread) join at random
moments spread over the window. Each participant loads the question, waits a moment as a
person reading it would, and answers. Measured in this one run:
  - every answer stored exactly once (the answers table against the participants);
  - the time to serve a participant's page, over all joins and for the N-th join;
  - the time from the last answer until `count_answers` (what the teacher's page reads every
    second), read every 20 ms by a watcher thread with its own connection, shows all N
    (negative: the watcher saw it before the participant's client got the server's reply).

    .venv/bin/python bench/classroom.py [--sizes 60,200,500] [--window 10] [--no-browser]

Targets (issue 33): 60 joining within 10 s, every answer stored once, the 60th join's page
in < 200 ms, the teacher's count current within 2 s of the last answer.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from class_helpers import serving  # noqa: E402

from cogbias.classroom import sessions  # noqa: E402
from cogbias.store import Store  # noqa: E402


async def one_participant(
    base: str, code: str, start: float, delay: float, think: float, joins: list[tuple[float, float]]
) -> float:
    """Join at `start + delay`, read for `think` s, answer; returns when the answer was stored."""
    await asyncio.sleep(max(0.0, start + delay - time.perf_counter()))
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as client:
        began = time.perf_counter()
        async with client.get(f"{base}/s/{code}") as page:
            text = await page.text()
        joins.append((began, time.perf_counter() - began))
        key = "a" if 'value="a"' in text and random.random() < 0.5 else "b"
        await asyncio.sleep(think)
        async with client.post(
            f"{base}/s/{code}", data={"answer": key}, allow_redirects=False
        ) as answered:
            if answered.status != 303:
                raise RuntimeError(f"answer refused: HTTP {answered.status}")
        return time.perf_counter()


def browser_participant(base: str, code: str, delay: float, out: dict[str, float]) -> None:
    """One real participant: Chromium opens the page, picks the first option, sends it."""
    from playwright.sync_api import sync_playwright

    from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page()
        time.sleep(delay)
        began = time.perf_counter()
        page.goto(f"{base}/s/{code}")
        out["page"] = time.perf_counter() - began
        page.locator("input[name=answer]").first.check()
        page.get_by_role("button", name="Send my answer").click()
        page.get_by_text("Your answer is in").wait_for(timeout=30_000)
        out["answered"] = time.perf_counter()
        browser.close()


def open_session(db: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cogbias", "class", "open", "--study", "classics", "--test",
         "theatre_ticket", "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


class CountWatcher(threading.Thread):
    """The teacher's page in miniature: reads `count_answers` every 20 ms in its own
    connection, and notes when the total first reached n and the slowest read."""

    def __init__(self, db: Path, code: str, n: int) -> None:
        super().__init__(daemon=True)
        self.db, self.code, self.n = db, code, n
        self.seen_all = 0.0
        self.slowest = 0.0

    def run(self) -> None:
        with Store(self.db) as store:
            while True:
                began = time.perf_counter()
                total = sum(sessions.count_answers(store, self.code).values())
                self.slowest = max(self.slowest, time.perf_counter() - began)
                if total >= self.n:
                    self.seen_all = time.perf_counter()
                    return
                time.sleep(0.02)


def exactly_once(db: Path, code: str, n: int) -> str:
    with Store(db) as store:
        answers = store.class_answers(code)
        counts = sessions.count_answers(store, code)
    balance = "/".join(str(v) for v in counts.values())
    ok = "yes" if len(answers) == n else f"NO ({len(answers)} stored)"
    return f"{ok}, split {balance}"


async def room(base: str, code: str, n: int, window: float, browser: bool) -> dict[str, object]:
    rng = random.Random(n)
    joins: list[tuple[float, float]] = []
    start = time.perf_counter()
    seen: dict[str, float] = {}
    thread = None
    clients = n - 1 if browser else n
    if browser:
        thread = threading.Thread(
            target=browser_participant, args=(base, code, window * 0.5, seen), daemon=True
        )
        thread.start()
    ends = await asyncio.gather(
        *(
            one_participant(base, code, start, rng.uniform(0, window), rng.uniform(0.5, 3), joins)
            for _ in range(clients)
        )
    )
    if thread is not None:
        thread.join(timeout=120)
        ends.append(seen.get("answered", 0.0))
    joins.sort()
    return {"joins": [t for _, t in joins], "last": max(ends), "browser": seen}


def report(
    n: int, window: float, result: dict[str, object], lag: float, count_ms: float, once: str
) -> None:
    times = [t * 1000 for t in result["joins"]]  # type: ignore[union-attr]
    times_sorted = sorted(times)
    p95 = times_sorted[int(0.95 * (len(times) - 1))]
    browser = result["browser"]
    shown = f", browser page {browser['page'] * 1000:.0f} ms" if browser else ""  # type: ignore[index]
    print(
        f"{n:5} in {window:g} s | stored once: {once} | page median {statistics.median(times):.0f} "
        f"ms, p95 {p95:.0f} ms, max {max(times):.0f} ms, last join {times[-1]:.0f} ms{shown} | "
        f"count current {lag * 1000:.0f} ms after the last answer (slowest count {count_ms:.1f} ms)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,200,500")
    parser.add_argument("--window", type=float, default=10.0, help="seconds over which they join")
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "class.db"
        Store(db).close()
        with serving(db) as base:
            print(f"server {base}; sessions of the theatre ticket question", flush=True)
            for n in (int(s) for s in args.sizes.split(",")):
                code = open_session(db)
                watcher = CountWatcher(db, code, n)
                watcher.start()
                result = asyncio.run(room(base, code, n, args.window, not args.no_browser))
                watcher.join(timeout=30)
                lag = watcher.seen_all - float(result["last"])  # type: ignore[arg-type]
                once = exactly_once(db, code, n)
                report(n, args.window, result, lag, watcher.slowest * 1000, once)


if __name__ == "__main__":
    main()
