"""A class at once: N participants join `cogbias class serve` within a window and answer; and
a prankster who stuffs answers into the same server.

Starts the real command in a child process (`cogbias class serve --port 0`), opens a session
with `cogbias class open`, then lets N-1 HTTP participants (aiohttp, each with its own cookie
jar) and one real browser (headless Chromium via Playwright, in a thread) join at random
moments spread over the window. Each participant loads the question, waits a moment as a
person reading it would, and answers; a page the server refuses for now (429 too fast, 503
busy) is tried again after its Retry-After, as the page's own refresh does. With
`--address one` every HTTP participant comes from one address (a school behind one NAT),
with `each` from one of its own (X-Forwarded-For, which the server trusts from this
machine). Measured in this one run:
  - every answer stored exactly once (the answers table against the participants);
  - the time to serve a participant's page, over all joins and for the N-th join, and how
    many pages were refused for now (and tried again);
  - the time from the last answer until `count_answers` (what the teacher's page reads every
    second), read every 20 ms by a watcher thread with its own connection, shows all N
    (negative: the watcher saw it before the participant's client got the server's reply).

`--stuff` measures the prankster of issue 45 instead: a class of `--class-size` honest
participants answers the theatre ticket question with the humans' shares (46 % and 88 %
"Yes", Tversky & Kahneman 1981), then one client drops its cookie and reopens the question
`--tries` times as fast as it can (10 at a time), answering "Yes" only when handed the lost
ticket. It prints the class's result before and after, how many of its answers were stored
against the join limit's burst, the conditions it was handed (the session's balanced order:
no choice) and the refusals the teacher's page shows.

    .venv/bin/python bench/classroom.py [--sizes 60,200,500] [--window 10] [--no-browser]
        [--address one|each]
    .venv/bin/python bench/classroom.py --stuff [--class-size 40] [--tries 200]

Targets (issue 33): 60 joining within 10 s, every answer stored once, the 60th join's page
in < 200 ms, the teacher's count current within 2 s of the last answer. Issue 45: 60 behind
one address all join within 10 s; 200 stuffed attempts in 2 s change the result by at most
the join limit's burst, and the stuffer's conditions follow the session's order.
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
from collections import Counter
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from class_helpers import serving  # noqa: E402

from cogbias.classroom import sessions  # noqa: E402
from cogbias.store import Store  # noqa: E402


async def served(
    client: aiohttp.ClientSession, method: str, url: str, **kwargs: object
) -> tuple[int, str, int]:
    """A request tried again after each "too fast" or "busy" reply's Retry-After, as the
    page's refresh does: (status, text, how many times it was refused first)."""
    refused = 0
    while True:
        async with client.request(method, url, allow_redirects=False, **kwargs) as response:
            text = await response.text()
            if response.status not in (429, 503):
                return response.status, text, refused
            wait = float(response.headers.get("Retry-After", "1"))
        refused += 1
        await asyncio.sleep(wait)


async def one_participant(
    base: str,
    code: str,
    start: float,
    delay: float,
    think: float,
    joins: list[tuple[float, float, int]],
    address: str | None,
) -> float:
    """Join at `start + delay`, read for `think` s, answer; returns when the answer was stored."""
    await asyncio.sleep(max(0.0, start + delay - time.perf_counter()))
    headers = {"X-Forwarded-For": address} if address else None
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar, headers=headers) as client:
        began = time.perf_counter()
        _, text, refused = await served(client, "GET", f"{base}/s/{code}")
        joins.append((began, time.perf_counter() - began, refused))
        key = "a" if 'value="a"' in text and random.random() < 0.5 else "b"
        await asyncio.sleep(think)
        status, _, _ = await served(client, "POST", f"{base}/s/{code}", data={"answer": key})
        if status != 303:
            raise RuntimeError(f"answer refused: HTTP {status}")
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


def address_of(mode: str, i: int) -> str | None:
    """The X-Forwarded-For of participant i: one shared address, or one of its own."""
    return "203.0.113.1" if mode == "one" else f"10.{i // 250}.{i % 250}.1"


async def room(
    base: str, code: str, n: int, window: float, browser: bool, mode: str
) -> dict[str, object]:
    rng = random.Random(n)
    joins: list[tuple[float, float, int]] = []
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
            one_participant(
                base,
                code,
                start,
                rng.uniform(0, window),
                rng.uniform(0.5, 3),
                joins,
                address_of(mode, i),
            )
            for i in range(clients)
        )
    )
    if thread is not None:
        thread.join(timeout=120)
        ends.append(seen.get("answered", 0.0))
    joins.sort()
    return {
        "joins": [t for _, t, _ in joins],
        "refused": sum(r for _, _, r in joins),
        "last_joined": max(b + t for b, t, _ in joins) - start,
        "last": max(ends),
        "browser": seen,
    }


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
        f"refused for now {result['refused']}, all joined {result['last_joined']:.1f} s "
        f"after the start | count current {lag * 1000:.0f} ms after the last answer "
        f"(slowest count {count_ms:.1f} ms)",
        flush=True,
    )


HUMANS_YES = {"lost_ticket": 0.46, "lost_bill": 0.88}  # Tversky & Kahneman (1981)


async def honest_class(base: str, code: str, n: int) -> None:
    """n participants, each from an address of its own, answering "Yes" with the humans'
    share of their condition."""
    rng = random.Random(45)

    async def one(i: int) -> None:
        headers = {"X-Forwarded-For": address_of("each", 1000 + i)}
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar, headers=headers) as client:
            _, text, _ = await served(client, "GET", f"{base}/s/{code}")
            condition = "lost_ticket" if "ticket is gone" in text else "lost_bill"
            key = "a" if rng.random() < HUMANS_YES[condition] else "b"
            await served(client, "POST", f"{base}/s/{code}", data={"answer": key})

    await asyncio.gather(*(one(i) for i in range(n)))


async def stuffer(base: str, code: str, tries: int, workers: int = 10) -> dict[str, object]:
    """The prankster: `tries` cookie-less opens of the question, `workers` at a time, from
    one address, answering "Yes" whenever handed the lost ticket."""
    handed: list[str] = []
    statuses: Counter[int] = Counter()
    left = iter(range(tries))

    async def worker() -> None:
        headers = {"X-Forwarded-For": "192.0.2.66"}
        for _ in left:
            jar = aiohttp.CookieJar(unsafe=True)  # a new participant every time
            async with aiohttp.ClientSession(cookie_jar=jar, headers=headers) as client:
                async with client.get(f"{base}/s/{code}") as page:
                    text = await page.text()
                statuses[page.status] += 1
                if page.status != 200:
                    continue
                condition = "lost_ticket" if "ticket is gone" in text else "lost_bill"
                handed.append(condition)
                if condition == "lost_ticket":
                    async with client.post(f"{base}/s/{code}", data={"answer": "a"}) as posted:
                        statuses[posted.status] += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return {"handed": handed, "statuses": statuses, "seconds": time.perf_counter() - began}


def yes_shares(db: Path, code: str) -> str:
    with Store(db) as store:
        answers = store.class_answers(code)
    parts = []
    for condition in HUMANS_YES:
        mine = [a.answer for a in answers if a.condition == condition]
        share = mine.count("a") / len(mine) if mine else float("nan")
        parts.append(f"{condition} {share:.0%} Yes of {len(mine)}")
    return ", ".join(parts)


def stuffing(base: str, db: Path, class_size: int, tries: int) -> None:
    from cogbias.classroom import limits

    code = open_session(db)
    asyncio.run(honest_class(base, code, class_size))
    before = yes_shares(db, code)
    with Store(db) as store:
        stored_before = len(store.class_answers(code))
    result = asyncio.run(stuffer(base, code, tries))
    time.sleep(3)  # the server writes its refusals per session every 2 s
    with Store(db) as store:
        stuffed = len(store.class_answers(code)) - stored_before
        throttled = sessions.throttled_count(store, code)
    handed: list[str] = result["handed"]  # type: ignore[assignment]
    seconds = float(result["seconds"])  # type: ignore[arg-type]
    bound = limits.JOIN_BURST + limits.JOIN_RATE * seconds
    print(
        f"class of {class_size}: {before}\n"
        f"stuffer: {tries} cookie-less opens in {seconds:.2f} s, replies "
        f"{dict(sorted(result['statuses'].items()))}; placed {len(handed)} times "  # type: ignore[union-attr]
        f"(join burst {limits.JOIN_BURST} + {limits.JOIN_RATE:g}/s x {seconds:.2f} s = "
        f"{bound:.0f}), handed lost_ticket {handed.count('lost_ticket')} / lost_bill "
        f"{handed.count('lost_bill')}; answers stored {stuffed}\n"
        f"after: {yes_shares(db, code)}; the teacher's page shows {throttled} refused as too fast",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="60,200,500")
    parser.add_argument("--window", type=float, default=10.0, help="seconds over which they join")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--address", choices=["one", "each"], default="each")
    parser.add_argument("--stuff", action="store_true", help="the prankster bench instead")
    parser.add_argument("--class-size", type=int, default=40)
    parser.add_argument("--tries", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "class.db"
        Store(db).close()
        with serving(db) as base:
            print(f"server {base}; sessions of the theatre ticket question", flush=True)
            if args.stuff:
                stuffing(base, db, args.class_size, args.tries)
                return
            for n in (int(s) for s in args.sizes.split(",")):
                code = open_session(db)
                watcher = CountWatcher(db, code, n)
                watcher.start()
                result = asyncio.run(
                    room(base, code, n, args.window, not args.no_browser, args.address)
                )
                watcher.join(timeout=30)
                lag = watcher.seen_all - float(result["last"])  # type: ignore[arg-type]
                once = exactly_once(db, code, n)
                report(n, args.window, result, lag, watcher.slowest * 1000, once)


if __name__ == "__main__":
    main()
