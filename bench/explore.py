"""Explore at scale: 600,000 decisions (30 biases x 20 models x 1,000 pairs).

Builds such a store (synthetic scores, real schema, bulk inserts), then times
  1. the heatmap data: `cells.heatmap_summary` (SQL aggregates) against the per-decision
     path (`Store.scores` + `analysis.summarize`), and checks both give the same table;
  2. the Explore page: a cold `AppTest` run of app_pages/explore.py (script done, chart built);
  3. with --browser: the page served by `streamlit run` in headless Chromium, from
     navigation until all 600 heatmap cells are drawn (first load and a reload).

    .venv/bin/python bench/explore.py [--browser] [--db PATH] [--per-cell 1000]

Targets on a 2-core machine: under 2 s for the data and for the render.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cogbias.library import testcases as library  # noqa: E402
from cogbias.store import Store, dumps  # noqa: E402
from cogbias.studies import analysis, cells  # noqa: E402

SCORES = (-1.0, -0.5, -1 / 3, 0.0, 1 / 3, 0.5, 1.0)
RUN_ID = "run-bench-explore"


def build(path: Path, n_models: int, per_cell: int) -> tuple[int, float]:
    """Write the store; returns (decisions, seconds)."""
    started = time.perf_counter()
    biases = list(library.load_library(include_user=False))[:30]
    models = [f"bench/model-{i:02d}" for i in range(n_models)]
    rng = random.Random(7)
    half = dumps(
        {"situation": "A manager decides.", "prompt": "Which option?", "options": ["a", "b"]}
    )
    with Store(path) as store:
        store.create_run(RUN_ID, {"models": models}, len(biases) * len(models) * per_cell, "bench")
        with store.atomic():
            store.insert_rows(
                "instances",
                [
                    "id",
                    "test_case",
                    "scenario",
                    "control",
                    "treatment",
                    "n_options",
                    "metric",
                    "status",
                ],
                (
                    (f"{b}-{i}", b, f"scenario {i % 200}", half, half, 2, "{}", "ok")
                    for b in biases
                    for i in range(per_cell)
                ),
            )
        rows = 0
        for model_index, model in enumerate(models):
            shift = {b: rng.uniform(-0.3, 0.5) for b in biases}
            batch = []
            for b in biases:
                for i in range(per_cell):
                    failed = rng.random() < 0.03
                    score = None if failed else max(-1.0, min(1.0, rng.choice(SCORES) + shift[b]))
                    batch.append(
                        (
                            f"{model_index}-{b}-{i}",
                            RUN_ID,
                            f"{b}-{i}",
                            b,
                            model,
                            "failed" if failed else "ok",
                            score,
                            "Option 1",
                            "Option 2",
                        )
                    )
            with store.atomic():
                rows += store.insert_rows(
                    "decisions",
                    ["id", "run_id", "instance_id", "test_case", "model", "status", "score",
                     "control_answer", "treatment_answer"],
                    batch,
                )  # fmt: skip
        store.refresh_run_counts(RUN_ID)
        store.update_run(RUN_ID, status="done")
    return rows, time.perf_counter() - started


def time_data(path: Path) -> None:
    with Store(path) as store:
        t0 = time.perf_counter()
        fast = cells.heatmap_summary(store)
        t_sql = time.perf_counter() - t0
        t0 = time.perf_counter()
        slow = analysis.summarize(analysis.scores_frame(store.scores()))
        t_pandas = time.perf_counter() - t0
        t0 = time.perf_counter()
        cells.heatmap_summary(store, run_id=RUN_ID)
        t_run = time.perf_counter() - t0
    same = (fast[["n", "failures"]].to_numpy() == slow[["n", "failures"]].to_numpy()).all() and (
        (fast["mean"] - slow["mean"]).abs().max() < 1e-9
    )
    print(f"heatmap data, SQL aggregates (all results):   {t_sql:6.3f} s   ({len(fast)} cells)")
    print(f"heatmap data, SQL aggregates (one run):       {t_run:6.3f} s")
    print(f"heatmap data, Store.scores + summarize:       {t_pandas:6.3f} s   "
          f"(x{t_pandas / t_sql:.1f} slower; same table: {same})")  # fmt: skip


def time_apptest(path: Path) -> None:
    from streamlit.testing.v1 import AppTest

    os.environ["COGBIAS_DB"] = str(path)
    os.environ["COGBIAS_DEMO"] = "0"
    os.chdir(ROOT)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    # A user reads the first page before opening Explore: app.py's warm-up (Altair, SciPy)
    # runs then, not during the timed visit.
    for thread in threading.enumerate():
        if thread.name == "cogbias-warm-up":
            thread.join(timeout=60)
    at.switch_page("app_pages/explore.py")
    import streamlit as st

    st.cache_data.clear()
    t0 = time.perf_counter()
    at.run()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    at.run()
    warm = time.perf_counter() - t0
    charts = len(at.get("arrow_vega_lite_chart")) + len(at.get("vega_lite_chart"))
    print(f"Explore page script (AppTest), cold cache:    {cold:6.3f} s   (charts: {charts}, "
          f"errors: {[e.value for e in at.exception] or 'none'})")  # fmt: skip
    print(f"Explore page script (AppTest), rerun:         {warm:6.3f} s")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_browser(path: Path, cells: int) -> None:
    """Navigation start -> all heatmap cells drawn, in three situations."""
    from playwright.sync_api import sync_playwright

    port = _free_port()
    env = {**os.environ, "COGBIAS_DB": str(path), "COGBIAS_DEMO": "0"}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true"]  # fmt: skip
    server = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    selector = '[data-testid="stVegaLiteChart"] g.mark-rect path[aria-label]'
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )

            def new_tab():  # a fresh browser profile: nothing cached
                return browser.new_context(viewport={"width": 1600, "height": 1200}).new_page()

            page = new_tab()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # server up, first page (Learn) served
                try:
                    page.goto(f"http://127.0.0.1:{port}/", timeout=5000)
                    page.get_by_text("Learn: cognitive biases").wait_for(timeout=30000)
                    break
                except Exception:
                    time.sleep(0.5)
            time.sleep(2)  # as a person would: the app warms up while the first page is read
            for label, tab in (
                ("first visit (server cache cold, new browser)", new_tab()),
                ("new browser, server cache warm", new_tab()),
                ("same browser again (both warm)", None),
            ):
                page = tab or page
                t0 = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/explore")
                page.get_by_text("Explore results").wait_for(timeout=60000)
                script = time.perf_counter() - t0
                page.wait_for_function(
                    f"document.querySelectorAll('{selector}').length >= {cells}", timeout=120000
                )
                drawn = time.perf_counter() - t0
                print(
                    f"Explore in Chromium, {label:<46} {drawn:6.3f} s  (title after {script:.2f} s)"
                )
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", type=Path, help="reuse or create this file (default: a temp file)")
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--per-cell", type=int, default=1000)
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="cogbias-bench-")
    path = args.db or Path(folder) / "explore.db"
    if not path.exists():
        rows, seconds = build(path, args.models, args.per_cell)
        print(f"built {rows:,} decisions in {seconds:.1f} s ({path.stat().st_size / 1e6:.0f} MB)")
    time_data(path)
    time_apptest(path)
    if args.browser:
        time_browser(path, 30 * args.models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
