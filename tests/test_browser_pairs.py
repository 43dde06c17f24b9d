"""Pairs as the model saw them, statistics on hover, and Compare, in a real browser.

The app starts on a fresh home with the demo results, plus a scripted OpenAI-compatible model
on 127.0.0.1 that always answers with the *text* of the option shown second (and an extractor
that finds that text), so what Learn shows can be checked against what the model was sent.
Each journey saves a screenshot to artifacts/screenshots/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.browser_helpers import (
    CHROMIUM,
    add_option,
    app_environment,
    choose,
    go,
    no_exception,
    settle,
    shot,
    shown_choice,
    shows,
    shows_at_least,
    visit,
)
from tests.dataset_helpers import MOHR_DIR
from tests.fake_llm_server import FakeLLMServer, _last_user_text

pytestmark = pytest.mark.browser
MODEL_LABEL = "Scripted test model (openai/scripted)"

if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed (/usr/bin/chromium)", allow_module_level=True)
pytest.importorskip("playwright.sync_api")


def _options(prompt: str) -> dict[int, str]:
    return {int(n): text.strip() for n, text in re.findall(r"Option (\d+): (.+)", prompt)}


def scripted(request: dict[str, Any]) -> str:
    """Fills: schema-shaped words. Decisions: presented option 2's text. Extraction: its number."""
    import json

    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        keys = fmt["json_schema"]["schema"]["required"]
        words = ["a", "purchasing", "a regional hospital", "choose a new supplier"]
        return json.dumps({k: words[i % len(words)] for i, k in enumerate(keys)})
    prompt = _last_user_text(request)
    options = _options(prompt)
    if prompt.startswith("Below are the answer options"):
        answer = prompt.split("Answer:", 1)[1]
        for number, text in sorted(options.items(), key=lambda kv: -len(kv[1])):
            if re.search(rf"(?<!\w){re.escape(text)}(?!\w)", answer):
                return f"Option {number}"
        return "No option selected"
    return f"Weighing it up, I would go with: {options[2]}."


@pytest.fixture(scope="module")
def app_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A home holding the demo results, plus what Explore must not mix in or leave white: the
    thesis' effect sizes (mohr2025), a token-bias study's random run, and a scripted model's
    run on two biases only (its other cells have no pair; its scores are all identical)."""
    from cogbias.datasets import import_mohr, tokenbias_study
    from cogbias.llm import settings
    from cogbias.runs import executor, paired_plan
    from cogbias.store import Store, demo

    home = tmp_path_factory.mktemp("pairs-home")
    with FakeLLMServer(responder=scripted) as fake, pytest.MonkeyPatch.context() as env:
        env.setenv("COGBIAS_HOME", str(home))
        env.setenv("COGBIAS_DB", str(home / "app.db"))
        settings.add_custom_model(
            "openai/scripted", "Scripted test model", fake.base_url, json_schema=True,
            path=home / "models.toml",
        )  # fmt: skip

        def fill() -> None:
            with Store(home / "app.db") as store:
                store.load_tables(demo.read_snapshot(demo.SNAPSHOT))
                import_mohr(store, MOHR_DIR)
                tokenbias_study.materialise(store)
                tokens = paired_plan.RunSpec(models=["random"], dataset="tokenbias")
                executor.execute(paired_plan.plan(tokens, store), store)
                few = paired_plan.RunSpec(
                    models=["openai/scripted"], biases=["anchoring", "framing_effect"],
                    instances=3, api_base=fake.base_url,
                )  # fmt: skip
                executor.execute(paired_plan.plan(few, store), store)

        # Runs use asyncio.run, which cannot start inside Playwright's loop in this thread.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(fill).result()
        yield home, fake.base_url


@pytest.fixture(scope="module")
def app_env(app_home: tuple[Path, str]) -> dict[str, str]:
    home, _ = app_home
    return app_environment(home, demo=True)


def test_learn_live_pair_lists_options_as_the_model_saw_them(page: Any) -> None:
    choose(page, "Bias", "Framing Effect")
    choose(page, "Decision model", MODEL_LABEL)
    choose(page, "Generator (fills the blue gaps)", MODEL_LABEL)
    settle(page)  # the model's choice has been drawn
    # its profile lists log-probabilities, so Learn offers them first; sampled answers here
    page.get_by_text("Sampled answer (read, then scored)").click()
    settle(page)
    page.get_by_role("button", name="Run this pair").click()
    page.get_by_text("◀ chosen").first.wait_for(timeout=120_000)
    settle(page)
    no_exception(page)
    assert page.get_by_test_id("stAlertContentError").count() == 0
    blocks = page.get_by_test_id("stText").all_inner_texts()
    option_lists = [b for b in blocks if "◀ chosen" in b]
    answers = [b for b in blocks if b.startswith("Weighing it up")]
    assert len(option_lists) == 2 and len(answers) == 2
    for options, answer in zip(option_lists, answers, strict=True):
        chosen = next(line for line in options.splitlines() if "◀ chosen" in line)
        assert chosen.startswith("Option 2: ")  # the scripted model picks the second shown
        text = chosen.removeprefix("Option 2: ").replace("◀ chosen", "").strip()
        assert answer == f"Weighing it up, I would go with: {text}."
    shows(page.get_by_text("tiny demonstration model"))
    shows_at_least(page.get_by_text("random baseline", exact=False))
    shot(page, "5_learn_live_pair", page.get_by_text("Generator: Scripted test model"))


def heatmap(page: Any) -> Any:
    chart = page.get_by_test_id("stVegaLiteChart").first
    chart.locator("g.mark-rect path[aria-label]").first.wait_for()
    settle(page)
    return chart


def hover_text(page: Any, bias: str, model: str) -> str:
    """The tooltip of one heatmap cell (its transparent top mark carries the aria label)."""
    target = heatmap(page).locator(f'path[aria-label^="model: {model}; bias_name: {bias};"]')
    page.mouse.move(0, 0)
    target.hover()
    tooltip = page.locator("#vg-tooltip-element")
    tooltip.wait_for(state="visible")
    page.wait_for_function(
        "([b, m]) => { const t = document.querySelector('#vg-tooltip-element');"
        " return t && t.innerText.includes(b) && t.innerText.includes(m); }",
        arg=[bias, model],
    )
    return str(tooltip.inner_text())


def cell_line(page: Any, title: str) -> str:
    """The sentence under "Paired responses" that sums up the chosen cell."""
    return str(page.get_by_test_id("stMarkdown").filter(has_text=title).first.inner_text())


def grid_cells(table: Any) -> list[str]:
    """The texts of a data grid's rendered cells (its accessible table, one per cell)."""
    return [str(t).strip() for t in table.locator("th, td").all_inner_texts()]


def grid_rows(table: Any) -> list[dict[str, str]]:
    """A data grid's rendered rows as {header: text} (from its accessible table)."""
    rows = table.locator("tr").evaluate_all(
        "rs => rs.map(r => Array.from(r.querySelectorAll('th, td')).map(c => c.innerText.trim()))"
    )
    header, *body = rows
    return [dict(zip(header, row, strict=False)) for row in body if len(row) == len(header)]


def ci_bounds(text: str) -> tuple[float, float]:
    low, high = re.findall(r"([+-]?\d\.\d\d) to ([+-]?\d\.\d\d)", text)[0]
    return float(low), float(high)


def test_explore_hover_shows_n_ci_and_significance(page: Any) -> None:
    """Point 6: the hover says whose interval it is (the cell's own, not BH-adjusted) beside
    the BH verdict, and a cell of identical scores shows a real interval, not +0.00 to +0.00."""
    go(page, "Explore")
    text = hover_text(page, "Disposition Effect", "random")  # the example
    assert "n (scored pairs)" in text and "95% CI of this cell alone" in text
    assert "significant after BH over all cells" in text
    cut = page.locator("#vg-tooltip-element td.key").evaluate_all(
        "ks => ks.filter(k => k.scrollWidth > k.clientWidth).map(k => k.innerText)"
    )
    assert cut == [], f"tooltip keys cut off on screen: {cut}"  # each key is read whole
    low, high = ci_bounds(text)
    assert -1 <= low < high <= 1
    shows(page.get_by_text("its 95% CI (of that cell alone)", exact=False))
    shows(page.get_by_text("which can disagree", exact=False))
    shot(page, "6_explore_hover")
    # the scripted model chose the same option in both halves of every pair: all scores 0
    same = hover_text(page, "Anchoring", "openai/scripted")
    assert re.search(r"n \(scored pairs\)\W*3\b", same), same
    low, high = ci_bounds(same)
    assert low < 0 < high, same  # never "0.00 to 0.00" from three identical scores
    assert "+0.00 to +0.00" not in same and "0.00 to 0.00" not in same
    shot(page, "6b_explore_identical_scores_hover")
    choose(page, "Bias", "Anchoring")
    choose(page, "Model", "openai/scripted")
    settle(page)
    line = cell_line(page, "Anchoring × openai/scripted")
    assert "95% CI of this cell alone" in line and "not adjusted for the other cells" in line
    assert "not significant after the BH correction over all cells" in line
    low, high = ci_bounds(line)
    assert low < 0 < high
    no_exception(page)


def test_explore_shows_only_paired_results_and_points_elsewhere(
    page: Any, app_home: tuple[Path, str]
) -> None:
    """Point 7: token-bias hypotheses never become heatmap rows, the picker offers no
    effect-size or token-bias dataset, and the page names the page that reads each."""
    from cogbias.library import testcases
    from cogbias.store import Store
    from cogbias.studies import cells

    home, _ = app_home
    with Store(home / "app.db") as store:
        hypotheses = cells.token_bias_test_cases(store)
    assert hypotheses, "the fixture's token-bias study has hypotheses"
    cases = testcases.load_library_report().cases
    token_rows = {cases[h].name if h in cases else h for h in hypotheses}
    go(page, "Explore")
    labels = (
        heatmap(page)
        .locator("path[aria-label]")
        .evaluate_all("es => es.map(e => e.getAttribute('aria-label'))")
    )
    rows = {re.search(r"bias_name: ([^;]+);", label)[1] for label in labels}
    assert rows and not rows & token_rows
    assert "Anchoring" in rows
    note = page.get_by_text("Not shown here, because", exact=False).first.inner_text()
    assert "tokenbias is on the Token bias page" in note
    assert "mohr2025 is on the Datasets page (effect sizes)" in note
    box = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Results", exact=True))
    box.locator("input").click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    assert "All results in this database" in options
    assert not [o for o in options if "mohr2025" in o or o.startswith("Dataset tokenbias")]
    assert page.get_by_text("No cognitive-bias decisions", exact=False).count() == 0
    assert page.get_by_text("No decisions here yet", exact=False).count() == 0
    no_exception(page)
    shot(page, "7_explore_only_paired_results")


def test_explore_pairs_and_cells_show_no_display_artefacts(page: Any) -> None:
    """Point 8: no "None", no "-0.00", no 4-digit decimals in the pair view and its table; the
    choice columns say whose numbering they use; a cell without pairs is drawn grey."""
    go(page, "Explore")
    chart = heatmap(page)
    cells = chart.locator("path[aria-label]")
    rows = {re.search(r"bias_name: ([^;]+);", a)[1] for a in
            cells.evaluate_all("es => es.map(e => e.getAttribute('aria-label'))")}  # fmt: skip
    shows(cells, 3 * len(rows))  # every bias x model has a cell, pairs or not
    grey = chart.locator('g.mark-rect path[fill="#e9ecef"]')
    shows_at_least(grey, len(rows) - 2)  # the scripted model ran two biases only
    assert "no pairs" in hover_text(page, "Halo Effect", "openai/scripted")
    shows(page.get_by_text("Grey: no scored pair", exact=False))
    shot(page, "8_explore_grey_cells")
    page.get_by_text("Failure rate", exact=True).click()
    settle(page)
    fills = (
        heatmap(page)
        .locator("g.mark-rect path")
        .evaluate_all("es => es.map(e => e.getAttribute('fill'))")
    )
    assert "rgb(255, 255, 255)" in fills, "0% failed is drawn white, as the caption says"
    assert "#e9ecef" in fills  # and a cell without pairs grey in this view too
    shows(page.get_by_text("white is 0%", exact=False))
    shot(page, "8a_explore_failure_rate")
    page.get_by_text("Mean score", exact=True).click()
    settle(page)
    choose(page, "Bias", "Anchoring")
    choose(page, "Model", "random")
    settle(page)
    table = page.locator("table[role=grid]").filter(has_text="test case's numbering").first
    table.wait_for(state="attached")
    cells = grid_cells(table)
    assert "control: chosen option (test case's numbering)" in cells
    assert [c for c in cells if re.fullmatch(r"\d+ · \S.*", c)], "a choice shows its text"
    line = cell_line(page, "Anchoring × random")
    pairs = page.get_by_test_id("stExpander").filter(has_text="Pair 1:")
    shown = "\n".join([*cells, line, *pairs.all_inner_texts()])
    assert not re.search(r"\b(None|nan)\b", shown), shown
    assert not re.search(r"-0\.0+\b", shown), shown
    assert not re.search(r"\d\.\d{4}", shown), shown
    shows(page.get_by_text("numbered in the test case's own order", exact=False))
    shot(page, "8b_explore_pair_table", page.get_by_role("heading", name="Paired responses"))
    page.get_by_text("The numbers behind the heatmap").click()
    numbers = page.locator("table[role=grid]").filter(has_text="95% CI of this cell alone").first
    numbers.wait_for(state="attached")
    rows = grid_rows(numbers)
    assert rows and all(not re.search(r"\b(None|nan)\b", v) for r in rows for v in r.values())
    for row in rows:  # scores three decimals and no sign on zero; p three significant digits
        for column in ("mean score", "null (uniform answers)"):
            assert re.fullmatch(r"–|0\.000|[+-]\d\.\d{3}", row[column]), row
        assert re.fullmatch(r"–|[+-]?\d\.\d\d to [+-]?\d\.\d\d", row["95% CI of this cell alone"])
        assert not re.search(r"-0\.00\b", row["95% CI of this cell alone"]), row
        assert re.fullmatch(r"–|1|0\.0*[1-9]\d{0,2}|\d(\.\d+)?e-\d+", row["p (BH-adjusted)"]), row
    no_exception(page)


def test_a_reversed_pair_says_so_and_lists_options_reversed(page: Any) -> None:
    go(page, "Explore")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    for bias in ("Anchoring", "Framing Effect", "Halo Effect", "Loss Aversion", "Status Quo Bias"):
        choose(page, "Bias", bias)
        choose(page, "Model", "local/smollm2")
        settle(page)
        flipped = page.get_by_test_id("stExpander").filter(has_text="options reversed")
        if flipped.count():
            break
    else:
        pytest.fail("no reversed pair in five biases of the demo results")
    flipped.first.locator("summary").click()
    note = flipped.first.get_by_text("shown to the model in reverse order")
    note.wait_for()
    options = flipped.first.get_by_test_id("stText").all_inner_texts()
    listed = next(b for b in options if b.startswith("A: "))  # the demo: probability-scored
    assert "\nB: " in listed and "Option " not in listed
    no_exception(page)
    shot(page, "7_reversed_pair", flipped)


def test_compare_shows_paired_differences_and_disagreements(page: Any) -> None:
    go(page, "Compare")
    page.get_by_text("Where they disagree most").wait_for()
    page.get_by_test_id("stVegaLiteChart").first.locator("path").first.wait_for()
    settle(page)
    no_exception(page)
    shows_at_least(page.get_by_text("Wilcoxon signed-rank", exact=False))
    page.get_by_text("The numbers", exact=True).click()
    numbers = page.locator("table[role=grid]").filter(has_text="mean difference A − B").first
    numbers.wait_for(state="attached")
    rows = grid_rows(numbers)
    assert rows and all(not re.search(r"\b(None|nan)\b", v) for r in rows for v in r.values())
    for row in rows:  # point 8 on Compare: fixed digits, no sign on zero, a dash when missing
        assert re.fullmatch(r"0\.000|[+-]\d\.\d{3}", row["mean difference A − B"]), row
        assert re.fullmatch(r"–|[+-]?\d\.\d\d to [+-]?\d\.\d\d", row["95% CI (t, cut to [-2, 2])"])
    shot(page, "8c_compare_numbers", page.get_by_text("The numbers", exact=True))
    choose(page, "Bias", "Escalation of Commitment")
    settle(page)
    shot(page, "8_compare", page.get_by_role("heading", name="Compare two models"))
    shot(page, "8b_compare_disagreements", page.get_by_text("Where they disagree most"))


def test_the_first_model_chip_stays_whole_when_two_are_chosen(browser: Any, app_url: str) -> None:
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    page.get_by_text("Learn: cognitive biases").wait_for()
    go(page, "Run")
    box = page.get_by_test_id("stMultiSelect").filter(
        has=page.get_by_text("Decision models", exact=True)
    )
    box.wait_for()
    settle(page)
    box.locator("input").click()
    box.locator("input").fill("SmolLM2")
    page.get_by_role("option").first.click()
    page.keyboard.press("Escape")
    settle(page)
    tags = box.get_by_test_id("stMultiSelectTagsContainer")
    label, whole, scrolled = tags.evaluate(
        "e => { const label = e.firstElementChild.firstElementChild.firstElementChild;"
        " return [label.innerText, label.scrollWidth <= label.clientWidth, e.scrollLeft]; }"
    )
    assert label == "Random baseline (random)" and whole, "the first chip is cut off"
    assert scrolled == 0  # nothing scrolled out of sight
    context.close()


def test_explore_keeps_its_choices_over_a_visit_to_another_page(page: Any) -> None:
    """Streamlit forgets a widget that a page switch did not draw: a teacher who looked up a
    pair on Learn came back to Explore on all results, mean scores and the default order."""
    go(page, "Explore")
    page.get_by_test_id("stVegaLiteChart").first.wait_for()
    results = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Results"))
    results.locator("input").click()
    run = next(o for o in page.get_by_role("option").all_inner_texts() if o.startswith("Run "))
    page.get_by_role("option", name=run, exact=True).click()
    settle(page)
    page.get_by_text("Failure rate", exact=True).click()
    settle(page)
    choose(page, "Rows", "by name")
    settle(page)
    visit(page, "Learn", page.get_by_role("button", name="Run this pair"))
    visit(page, "Explore", page.get_by_test_id("stVegaLiteChart").first)
    assert shown_choice(results) == run
    assert page.get_by_role("radio", name="Failure rate").is_checked()
    rows = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Rows"))
    assert shown_choice(rows) == "by name"
    shot(page, "explore_kept_after_a_page_switch")
    no_exception(page)
    compare_page = page.get_by_role("heading", name="Compare two models")
    visit(page, "Compare", compare_page)  # and Compare's two models, other than the defaults
    boxes = {
        name: page.get_by_test_id("stSelectbox").filter(has=page.get_by_text(name, exact=True))
        for name in ("Model A", "Model B")
    }
    assert [shown_choice(b) for b in boxes.values()] == ["local/smollm2", "random"]
    choose(page, "Model A", "random")
    settle(page)
    choose(page, "Model B", "openai/scripted")
    settle(page)
    visit(page, "Learn", page.get_by_role("button", name="Run this pair"))
    visit(page, "Compare", compare_page)
    assert [shown_choice(b) for b in boxes.values()] == ["random", "openai/scripted"]
    no_exception(page)


def test_run_and_studies_keep_their_set_up_over_a_visit_to_the_models_page(page: Any) -> None:
    """A researcher setting up a run who checks a key on the Models page comes back to the
    test cases, counts, models and study chosen, not to the defaults."""

    go(page, "Run")
    cases = add_option(page, "Test cases", "Framing Effect")
    instances = page.get_by_role("spinbutton", name="Instances each")
    instances.fill("3")
    instances.press("Enter")
    models = add_option(page, "Decision models", MODEL_LABEL)
    study_page = page.get_by_role("heading", name="Start a study run")
    visit(page, "Studies", study_page)
    choose(page, "Study", "mohr8")
    settle(page)
    visit(page, "Models", page.get_by_role("heading", name="Models and keys"))
    visit(page, "Run", page.get_by_role("button", name="Start run"))
    assert "Framing Effect" in cases.inner_text()
    assert instances.input_value() == "3"
    assert "Scripted test model" in models.inner_text()
    reader = page.get_by_test_id("stSelectbox").filter(
        has=page.get_by_text("Reader of unclear answers", exact=True)
    )
    assert shown_choice(reader) == "each decision model itself (as in the paper)"
    shot(page, "run_set_up_kept_after_a_page_switch")
    visit(page, "Studies", study_page)
    study = page.get_by_test_id("stSelectbox").filter(has=page.get_by_text("Study", exact=True))
    assert shown_choice(study) == "mohr8"
    no_exception(page)
