"""Page times as a person feels them: the app in headless Chromium, every page of the menu.

Starts `streamlit run app.py` as `scripts/app` does, on a fresh COGBIAS_HOME (so the first
load imports the demo snapshot), then measures in one browser (started beforehand, as a
user's browser is):
  - server ready: from starting the process until its health check answers;
  - first page: from starting the process until Learn has finished drawing (the browser
    opens the address as soon as the server is ready); also shown from the page request;
  - each page switch: from the click in the menu until the page's script has finished and
    nothing on it is stale (twice per page: first visit and return visit), after `--read`
    seconds on the first page, as a person reads it before clicking (the app warms Explore's
    imports up then: `app.py`).
With --db the app opens that database instead of the demo (e.g. 600,000 decisions built by
`bench/explore.py --db PATH`), which is how the "< 2 s at scale" goal is measured.

    .venv/bin/python bench/pages.py [--db PATH] [--rounds 2] [--read 5]
    .venv/bin/python bench/pages.py --rounds 0     # the first page only

Goals on an idle 2-core machine: first page < 3 s from process start on a fresh home, every
switch < 1 s at the demo's size and < 2 s with 600,000 decisions.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS, SETTLED, running_app  # noqa: E402

MENU = ["Learn", "Templates", "Preview", "Class", "Projector", "Run", "Explore", "Compare",
        "Datasets", "Studies", "Token bias", "Models"]  # fmt: skip
HIDES_MENU = {"Projector"}  # a page for the room's screen: no sidebar to click away from
# The page is done when Streamlit runs no script, marks nothing stale and shows its title.
DONE = f"""() => ({SETTLED})() && !!document.querySelector('[data-testid="stMain"] h1')"""


def finished(tab, timeout_ms: float = 120_000) -> None:
    tab.wait_for_function(DONE, timeout=timeout_ms, polling=50)


def switch(tab, title: str) -> float:
    """Seconds from the menu click until `title`'s page is drawn."""
    before = tab.locator('[data-testid="stMain"] h1').first.inner_text()
    started = time.perf_counter()
    tab.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
    tab.wait_for_function(
        "(old) => { const h = document.querySelector('[data-testid=\"stMain\"] h1');"
        " return h && h.innerText !== old; }",
        arg=before,
        timeout=120_000,
        polling=50,
    )
    finished(tab)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="a database to open instead of the demo")
    parser.add_argument(
        "--rounds", type=int, default=2, help="visits per page (default 2; 0: the first page only)"
    )
    parser.add_argument(
        "--read", type=float, default=5.0, help="seconds on the first page before the switches"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "COGBIAS_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        env.pop("COGBIAS_DB", None)
        if args.db:
            env["COGBIAS_DB"], env["COGBIAS_DEMO"] = str(args.db.resolve()), "0"
        what = f"database {args.db}" if args.db else "fresh home, demo snapshot"
        load = os.getloadavg()[0]
        print(f"{what}; load average {load:.1f} on {os.cpu_count()} cores")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            tab = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            started = time.perf_counter()
            with running_app(env, Path(tmp) / "streamlit.log") as url:
                ready = time.perf_counter()
                tab.goto(url)
                finished(tab)
                done = time.perf_counter()
                print(f"{'server ready':<24} {ready - started:6.2f} s from process start")
                print(
                    f"{'first page (Learn)':<24} {done - started:6.2f} s from process start"
                    f" ({done - ready:.2f} s from the page request)"
                )
                if args.rounds:
                    time.sleep(args.read)
                    switches(tab, args.rounds)
            browser.close()


def switches(tab, rounds: int) -> None:
    """Every page of the menu `rounds` times, from Templates round to Learn; prints the times."""
    menu = tab.get_by_test_id("stSidebarNav")
    titles = [t for t in MENU[1:] + MENU[:1] if menu.get_by_role("link", name=t).count()]
    times: dict[str, list[float]] = {t: [] for t in titles}
    for _ in range(rounds):
        for title in titles:
            times[title].append(switch(tab, title))
            if title in HIDES_MENU:  # back to the page before it (untimed), whose menu shows
                tab.go_back()
                finished(tab)
    for title, seconds in times.items():
        shown = "  ".join(f"{s:5.2f}" for s in seconds)
        print(f"{'switch to ' + title:<24} {shown} s")
    slowest = max(max(s) for s in times.values())
    print(f"slowest switch: {slowest:.2f} s")


if __name__ == "__main__":
    main()
