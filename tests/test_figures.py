"""Paper-ready figures: `cogbias figure` writes SVG and PNG with every label whole and inside."""

from __future__ import annotations

import functools
import math
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from cogbias.cli.main import main
from cogbias.library import testcases
from cogbias.runs import kinds
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from cogbias.store.demo import ensure_demo
from cogbias.views import figures
from tests.app_helpers import make_results_db
from tests.dataset_helpers import MOHR_DIR
from tests.study_helpers import study_run

ROOT = Path(__file__).resolve().parent.parent
MODELS = [
    "openrouter/meta-llama/llama-3.1-405b-instruct",
    "openrouter/anthropic/claude-3.5-sonnet-20241022",
    "openrouter/google/gemini-1.5-pro-002",
    "openrouter/mistralai/mistral-large-2411",
    "openrouter/qwen/qwen-2.5-72b-instruct",
    "openrouter/deepseek/deepseek-chat-v2.5",
    "openai/gpt-4o-2024-08-06",
    "openai/gpt-4o-mini-2024-07-18",
    "openrouter/meta-llama/llama-3.1-8b-instruct",
    "random",
]
SVG = "{http://www.w3.org/2000/svg}"
FONTS = Path("/usr/share/fonts/truetype/liberation")


@pytest.fixture(scope="module")
def wide_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """30 built-in biases x 10 models with long names: 3 or 12 scored pairs per cell (small
    cells carry a two-line label "+0.33  (n=3)")."""
    cases = sorted(testcases.load_library_report().cases.values(), key=lambda c: c.id)
    cases = [c for c in cases if c.is_builtin][:30]
    assert len(cases) == 30
    rows = []
    for i, case in enumerate(cases):
        for j, model in enumerate(MODELS):
            for k in range(3 if (i + j) % 2 else 12):
                rows.append((case.id, model, [-1.0, 0.5, 1.0, 0.0][(i + j + k) % 4]))
    db = tmp_path_factory.mktemp("figures") / "wide.db"
    with Store(db) as store:
        store.create_run("r1", {"models": []}, len(rows))
        with store.atomic():
            store.insert_rows(
                "decisions",
                ["id", "run_id", "instance_id", "test_case", "model", "status", "score"],
                [(f"d{n}", "r1", f"i{n}", b, m, "ok", x) for n, (b, m, x) in enumerate(rows)],
            )
    return db, [c.name for c in cases]


def _cli(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cogbias", "figure", *words],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COGBIAS_DEMO": "0"},
    )


def _matrix(transform: str) -> tuple[float, ...]:
    """The affine matrix (a, b, c, d, e, f) of an SVG transform of translates and rotates."""
    m = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    for op, args in re.findall(r"(translate|rotate)\(([^)]*)\)", transform or ""):
        values = [float(v) for v in re.split(r"[ ,]+", args.strip())]
        if op == "translate":
            step = (1.0, 0.0, 0.0, 1.0, values[0], values[1] if len(values) > 1 else 0.0)
        else:
            r = math.radians(values[0])
            step = (math.cos(r), math.sin(r), -math.sin(r), math.cos(r), 0.0, 0.0)
        m = _times(m, step)
    return m


def _times(m: tuple[float, ...], n: tuple[float, ...]) -> tuple[float, ...]:
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2,
            a * e2 + c * f2 + e, b * e2 + d * f2 + f)  # fmt: skip


def _width(text: str, size: float, bold: bool) -> float:
    """The text's width in the font the figure is measured in (Liberation Sans)."""
    font = FONTS / ("LiberationSans-Bold.ttf" if bold else "LiberationSans-Regular.ttf")
    if not font.exists():
        return len(text) * size * 0.6
    return _font(str(font), round(size)).getlength(text)


@functools.cache
def _font(path: str, size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.truetype(path, size=size)


def _texts(svg: str) -> tuple[float, float, list[tuple[str, list[tuple[float, float]]]]]:
    """The SVG's width and height, and each <text> line with its two ends in figure pixels."""
    root = ET.fromstring(svg)
    width, height = float(root.get("width", 0)), float(root.get("height", 0))
    found: list[tuple[str, list[tuple[float, float]]]] = []

    def walk(node: ET.Element, m: tuple[float, ...]) -> None:
        m = _times(m, _matrix(node.get("transform", "")))
        if node.tag == SVG + "text":
            size = float(node.get("font-size", "10px").rstrip("px"))
            bold = node.get("font-weight") == "bold"
            lines = [t.text or "" for t in node.findall(SVG + "tspan")] or [node.text or ""]
            for i, line in enumerate(lines):
                w = _width(line, size, bold)
                anchor = node.get("text-anchor", "start")
                x0 = {"start": 0.0, "middle": -w / 2, "end": -w}[anchor]
                y = i * (size + 2)
                ends = [(m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])
                        for x in (x0, x0 + w)]  # fmt: skip
                found.append((line, ends))
            return
        for child in node:
            walk(child, m)

    walk(root, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0))
    return width, height, found


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def _at_300_ppi(size: tuple[int, int], width: float, height: float) -> bool:
    """The PNG is the SVG's size at 300 pixels per inch (the SVG's 96), give or take rounding."""
    return all(
        abs(got - want * 300 / 96) <= 1 for got, want in zip(size, (width, height), strict=True)
    )


def test_explore_heatmap_30_by_10_has_every_label_whole_inside(
    wide_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, biases = wide_db
    out = tmp_path / "explore.svg"
    done = _cli("explore-heatmap", "--run", "r1", "--db", str(db), "-o", str(out))
    assert done.returncode == 0, done.stderr
    width, height, texts = _texts(out.read_text(encoding="utf-8"))
    lines = [t for t, _ in texts]
    for name in biases + MODELS:
        assert lines.count(name) == 1, f"{name!r} is not one whole label"
    assert not [t for t in lines if "…" in t], "a label was cut"
    assert width <= figures.WIDTHS["page"], "wider than a journal page"
    for text, ends in texts:
        for x, y in ends:
            assert -1 <= x <= width + 1 and -1 <= y <= height + 1, (text, x, y, width, height)
    # Small cells say their n on a second line: "+0.50" above "(n=3)", both whole.
    assert "(n=3)" in lines and not [t for t in lines if "  (n=" in t]

    png = tmp_path / "explore.png"
    done = _cli("explore-heatmap", "--run", "r1", "--db", str(db), "-o", str(png))
    assert done.returncode == 0, done.stderr
    assert _at_300_ppi(_png_size(png.read_bytes()), width, height)


def test_column_width_grows_rather_than_cutting(
    wide_db: tuple[Path, list[str]], tmp_path: Path
) -> None:
    db, biases = wide_db
    with Store(db) as store:
        chart = figures.figure_chart("explore-heatmap", store, run_id="r1", width="column")
    width, height, texts = _texts(figures.figure_bytes(chart, "svg").decode())
    lines = [t for t, _ in texts]
    assert all(lines.count(name) == 1 for name in biases + MODELS)
    assert width > figures.WIDTHS["column"]  # 30 x 10 cannot fit 3.5 in: it grows


def test_cli_errors_are_one_line_and_name_what_is_wrong(
    wide_db: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = wide_db
    cases = [
        (["nosuch", "--run", "r1"], "out.svg", "no figure 'nosuch'"),
        (["explore-heatmap", "--run", "gone"], "out.svg", "no run gone"),
        (["explore-heatmap", "--dataset", "gone"], "out.svg", "no dataset gone"),
        (["explore-heatmap", "--run", "r1"], "out.pdf", "ends in .svg or .png"),
        (["study-heatmap", "--run", "r1"], "out.svg", "not a study run"),
        (["mohr-heatmap"], "out.svg", "needs --dataset"),
    ]
    for words, name, message in cases:
        code = main(["figure", *words, "--db", str(db), "-o", str(tmp_path / name)])
        err = capsys.readouterr().err
        assert code != 0 and message in err and "Traceback" not in err, (words, err)
        assert not (tmp_path / name).exists()
    (tmp_path / "taken.svg").write_text("mine")
    code = main(["figure", "explore-heatmap", "--db", str(db), "-o", str(tmp_path / "taken.svg")])
    assert code != 0 and "--force" in capsys.readouterr().err
    assert (tmp_path / "taken.svg").read_text() == "mine"
    assert main(["figure", "explore-heatmap", "--db", str(db), "-o",
                 str(tmp_path / "taken.svg"), "--force"]) == 0  # fmt: skip
    assert (tmp_path / "taken.svg").read_text().startswith("<svg")
    missing = tmp_path / "none.db"
    assert main(["figure", "explore-heatmap", "--db", str(missing), "-o", str(tmp_path / "a.svg")])
    assert "no database" in capsys.readouterr().err and not missing.exists()
    assert main(["figure", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in figures.FIGURES)


def _renders(name: str, store: Store, **source: object) -> None:
    chart = figures.figure_chart(name, store, **source)  # type: ignore[arg-type]
    width, height, texts = _texts(figures.figure_bytes(chart, "svg").decode())
    assert texts and width > 0 and height > 0, name
    assert not [t for t, _ in texts if "…" in t], f"{name}: a label was cut"
    assert _at_300_ppi(_png_size(figures.figure_bytes(chart, "png")), width, height), name


def test_every_paired_figure_renders_for_the_demo(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    assert ensure_demo(db)
    with Store(db) as store:
        run_id = kinds.records(store)[0].id
        for name in ("explore-heatmap", "compare-forest", "figure7-heatmap", "figure6-dendrogram"):
            _renders(name, store, run_id=run_id)
        with pytest.raises(figures.FigureError, match="capability score"):
            figures.figure_chart("figure5-bubbles", store, run_id=run_id)


def test_figure5_compare_study_and_mohr_render(tmp_path: Path) -> None:
    db = tmp_path / "models.db"
    scored = ("openai/gpt-4o-2024-08-06", "openai/gpt-4o-mini-2024-07-18", "random")
    run_id = make_results_db(db, models=scored, instances=4)
    spec = StudySpec("biasbuster", ["random"], tests=["framing", "anchoring"],
                     mitigations=["none", "awareness"], repeats=1)  # fmt: skip
    study = study_run(db, spec)
    from cogbias.datasets.mohr_format import import_mohr

    with Store(db) as store:
        _renders("figure5-bubbles", store, run_id=run_id)
        _renders("compare-forest", store, run_id=run_id, models=scored[:2])
        _renders("study-heatmap", store, run_id=study)
        _renders("study-heatmap", store, run_id=study, by="model", width="column")
        import_mohr(store, MOHR_DIR)
        _renders("mohr-heatmap", store, dataset=store.datasets()[0]["name"])
        with pytest.raises(figures.FigureError, match="no model 'nobody'"):
            figures.figure_chart("compare-forest", store, run_id=run_id, models=["nobody", "x"])


def _download_labels(at: Any) -> list[str]:
    return [element.proto.label for element in at.get("download_button")]


def test_app_pages_render_a_figure_only_on_request_and_once(
    app_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    make_results_db(app_db, models=("random", "openai/gpt-4o-2024-08-06"), instances=4)
    rendered: list[str] = []
    real = figures.figure_bytes
    monkeypatch.setattr(
        figures, "figure_bytes", lambda chart, fmt: rendered.append(fmt) or real(chart, fmt)
    )
    for page, key in (("explore.py", "explore_figure"), ("compare.py", "cmp_figure")):
        at = AppTest.from_file(str(ROOT / "app_pages" / page), default_timeout=120).run()
        at.run()  # reruns (a click elsewhere, a page switch) render nothing
        assert not at.exception, at.exception
        assert rendered == [] and not [x for x in _download_labels(at) if "SVG" in x], page
        at.button(key=f"{key}_prepare").click().run()
        assert not at.exception, at.exception
        assert rendered == ["svg", "png"], page
        assert {"Download SVG", "Download PNG"} <= set(_download_labels(at)), page
        at.button(key=f"{key}_prepare").click().run()  # the same figure again: from the cache
        assert rendered == ["svg", "png"], page
        rendered.clear()
