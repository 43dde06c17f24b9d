"""Learn's "Run this pair" as a person feels it: from the click until both halves are drawn.

Starts `streamlit run app.py` on a fresh COGBIAS_HOME, as `bench/pages.py` does, opens Learn in
headless Chromium and waits `--read` seconds on it (as a person reads it before clicking), then
clicks "Run this pair" with the defaults (the local model decides, the offline examples fill
the gaps) for each seed of `--seeds`: each seed is another scenario, so no click is answered
from the response cache. A click is done when the page has settled and its result (the score's
sentence, or what went wrong) is on it. The first click is the one that pays for anything not
yet started; the others are "warm". Prints each click's time, the first page's time, and the
machine's load average before and after (the machine is shared: compare runs at like load).

    .venv/bin/python bench/learn_live.py                  # framing_effect, seeds 1,2,3
    .venv/bin/python bench/learn_live.py --bias "Anchoring" --seeds 4,5 --read 0
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.pages import finished  # noqa: E402
from tests.browser_helpers import CHROMIUM, CHROMIUM_ARGS, SETTLED, running_app  # noqa: E402

# The click's result: the sentence under the pair (st.info / st.warning) or an error box.
RESULT = """() => ({settled})() && !!document.querySelector(
    '[data-testid="stAlertContentInfo"], [data-testid="stAlertContentWarning"],'
    + ' [data-testid="stAlertContentError"]')""".replace("{settled}", SETTLED)


def click(tab, seed: int) -> tuple[float, str]:
    """Seconds from the click on "Run this pair" (after setting the seed) until its result is
    drawn, and that result's text."""
    box = tab.get_by_label("Seed")
    box.fill(str(seed))
    box.press("Enter")
    tab.wait_for_timeout(300)
    finished(tab)
    started = time.perf_counter()
    tab.get_by_role("button", name="Run this pair").click()
    tab.wait_for_timeout(100)  # the script starts: the result of the seed before is gone
    tab.wait_for_function(RESULT, timeout=600_000, polling=50)
    elapsed = time.perf_counter() - started
    alert = tab.locator(
        '[data-testid="stAlertContentInfo"], [data-testid="stAlertContentWarning"], '
        '[data-testid="stAlertContentError"]'
    )
    return elapsed, alert.last.inner_text()


def choose_bias(tab, name: str) -> None:
    box = tab.get_by_test_id("stSelectbox").filter(has=tab.get_by_text("Bias", exact=True))
    box.locator("input").click()
    box.locator("input").fill(name[:20])
    tab.get_by_role("option", name=name).first.click()
    tab.wait_for_timeout(300)
    finished(tab)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bias", default="Framing Effect", help="as the Bias box names it")
    parser.add_argument("--seeds", default="1,2,3", help="one click per seed (a scenario each)")
    parser.add_argument("--read", type=float, default=5.0, help="seconds on Learn before a click")
    parser.add_argument("--show", action="store_true", help="print each click's result")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "COGBIAS_HOME": str(Path(tmp) / "home")}
        for name in ("COGBIAS_DB", "COGBIAS_GENERATOR", "COGBIAS_LOCAL_API_BASE"):
            env.pop(name, None)  # the defaults, and a server of the app's own
        print(
            f"{args.bias}; load average before {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            tab = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            started = time.perf_counter()
            with running_app(env, Path(tmp) / "streamlit.log") as url:
                tab.goto(url)
                finished(tab)
                print(
                    f"first page (Learn): {time.perf_counter() - started:.2f} s from process start"
                )
                if args.bias != "Learn's first":
                    choose_bias(tab, args.bias)
                time.sleep(args.read)
                times = []
                for seed in seeds:
                    elapsed, said = click(tab, seed)
                    times.append(elapsed)
                    print(f"seed {seed}: {elapsed:.2f} s from the click")
                    if args.show:
                        print("   " + said.replace("\n", " ")[:300])
            browser.close()
    if len(times) > 1:
        warm = times[1:]
        print(f"first click {times[0]:.2f} s; later clicks median {statistics.median(warm):.2f} s")
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
