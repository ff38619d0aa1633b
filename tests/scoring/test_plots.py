"""Tests for scoring.reports.plots: well-formed, accessible, escaped SVG with marks inside the viewBox."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from scoring.reports import plots as P

SVG = "{http://www.w3.org/2000/svg}"
NASTY = "BLEU <&\"> 'quoted' & more"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def view_box(root: ET.Element) -> tuple[float, float, float, float]:
    return tuple(float(v) for v in root.get("viewBox").split())


def marks(root: ET.Element, cls: str = "mark") -> list[ET.Element]:
    return [el for el in root.iter() if cls in (el.get("class") or "").split()]


def texts(root: ET.Element) -> list[str]:
    return ["".join(el.itertext()) for el in root.iter(f"{SVG}text")]


def assert_inside_view_box(root: ET.Element) -> None:
    x0, y0, w, h = view_box(root)
    checked = 0
    for el in root.iter():
        for attr in ("x", "cx", "x1", "x2"):
            if el.get(attr) is not None:
                v = float(el.get(attr))
                assert x0 <= v <= x0 + w, (el.tag, attr, v)
                checked += 1
        for attr in ("y", "cy", "y1", "y2"):
            if el.get(attr) is not None:
                v = float(el.get(attr))
                assert y0 <= v <= y0 + h, (el.tag, attr, v)
                checked += 1
        if el.get("width") is not None and el.get("x") is not None:
            assert float(el.get("x")) + float(el.get("width")) <= x0 + w + 1e-9
        if el.get("height") is not None and el.get("y") is not None:
            assert float(el.get("y")) + float(el.get("height")) <= y0 + h + 1e-9
    assert checked > 0


def assert_accessible(root: ET.Element, title: str) -> None:
    assert root.get("role") == "img"
    assert root.get("aria-label") == title
    assert root.find(f"{SVG}title").text == title
    assert root.get("width") is None and root.get("height") is None  # scales with the page
    assert "system-ui" in root.get("font-family")
    assert root.find(f".//{SVG}script") is None


def no_nan_attributes(svg: str) -> None:
    assert not re.search(r'="[^"]*\b(nan|inf)\b', svg, flags=re.IGNORECASE)


FOREST_ROWS = [
    {"label": NASTY, "value": 0.31, "lo": 0.2, "hi": 0.42},
    {"label": "BERTScore", "value": -0.12, "lo": -0.3, "hi": 0.05},
    {"label": "COMET", "value": 0.0, "lo": -0.05, "hi": 0.05},
]


# ---------------------------------------------------------------------------------------------
# interval_chart
# ---------------------------------------------------------------------------------------------


def test_interval_chart_structure_and_escaping():
    title = 'Kendall tau <by metric> & "CI"'
    svg = P.interval_chart(FOREST_ROWS, title, "Kendall tau-b")
    root = parse(svg)
    assert_accessible(root, title)
    assert len(marks(root)) == len(FOREST_ROWS)
    assert len(marks(root, "interval")) == len(FOREST_ROWS)
    assert NASTY in texts(root)  # round-trips exactly through escaping
    assert "<&" not in svg.replace("<&#", "")  # raw characters never leak into markup
    assert len(marks(root, "zero")) == 1
    assert "0.31 [0.20, 0.42]" in texts(root)
    assert_inside_view_box(root)
    no_nan_attributes(svg)


def test_interval_chart_marks_follow_values():
    root = parse(P.interval_chart(FOREST_ROWS, "t", "x"))
    cx = [float(m.get("cx")) for m in marks(root)]
    zero_x = float(marks(root, "zero")[0].get("x1"))
    assert cx[0] > zero_x > cx[1]  # 0.31 right of zero, -0.12 left of it
    assert cx[2] == pytest.approx(zero_x)
    ys = [float(m.get("cy")) for m in marks(root)]
    assert ys == sorted(ys)  # rows top to bottom in the given order


def test_the_accuracy_chart_draws_its_reference_line_at_chance():
    # Pairwise accuracy's "no better than chance" is 0.5, not 0: the walk-through found the dashed
    # line at 0, where no metric can be.
    rows = [{"label": "a", "value": 0.5, "lo": 0.45, "hi": 0.55}]
    root = parse(P.interval_chart(rows, "t", "x", (0, 1), reference=0.5))
    line_x = float(marks(root, "zero")[0].get("x1"))
    assert float(marks(root)[0].get("cx")) == pytest.approx(line_x)
    # And the report page's own chart uses it.
    from scoring.reports.page import report_page

    results = {
        "correlation": [
            {
                "label": "m",
                "mean_tau": 0.1,
                "ci_low": 0.0,
                "ci_high": 0.2,
                "pairwise_accuracy": 0.5,
                "pairwise_ci_low": 0.4,
                "pairwise_ci_high": 0.6,
            }
        ]
    }
    # Drawn once, in the phone layout that serves every width: the line sits at chance.
    both = str(report_page(results)["accuracy_chart"])
    svgs = re.findall(r"<svg.*?</svg>", both, re.S)
    assert len(svgs) == 1
    for svg in svgs:
        chart = parse(svg)
        assert float(marks(chart, "zero")[0].get("x1")) == pytest.approx(
            float(marks(chart)[0].get("cx"))
        )


def test_interval_chart_missing_values_and_range():
    rows = [
        {"label": "a", "value": float("nan"), "lo": None, "hi": None},
        {"label": "b", "value": 1.7, "lo": 1.2, "hi": 2.5},  # outside (-1, 1): axis widens
    ]
    svg = P.interval_chart(rows, "t", "x")
    root = parse(svg)
    assert len(marks(root)) == 1
    assert "no data" in texts(root)
    assert_inside_view_box(root)
    no_nan_attributes(svg)
    auto = parse(P.interval_chart(rows, "t", "x", x_range=None))
    assert_inside_view_box(auto)
    empty = parse(P.interval_chart([], "t", "x"))
    assert marks(empty) == []


# ---------------------------------------------------------------------------------------------
# heatmap
# ---------------------------------------------------------------------------------------------


def test_heatmap_cells_values_and_nan():
    labels = [NASTY, "model B", "C"]
    matrix = [[None, 0.7, 0.2], [0.3, None, float("nan")], [0.8, np.nan, None]]
    svg = P.heatmap(labels, matrix, "Win rate <row beats column>")
    root = parse(svg)
    assert_accessible(root, "Win rate <row beats column>")
    cells = marks(root, "cell")
    assert len(cells) == 9
    empty = marks(root, "empty")
    assert len(empty) == 5  # diagonal (3) + two nan cells
    # Empty cells are grey and carry no value text; filled cells print their value.
    for cell in empty:
        assert cell.get("fill") == P.EMPTY
    values = ["".join(t.itertext()) for t in marks(root, "value")]
    assert sorted(values) == ["0.20", "0.30", "0.70", "0.80"]
    groups = [g for g in root.iter(f"{SVG}g") if g.get("class") == "cell-group"]
    assert len(groups) == 4  # filled cells only
    assert all(g.find(f"{SVG}text") is not None for g in groups)
    assert texts(root).count(NASTY) == 2  # row and column label
    assert_inside_view_box(root)
    no_nan_attributes(svg)


def test_heatmap_colour_is_monotone_in_value():
    root = parse(P.heatmap(["a", "b"], [[0.0, 1.0], [0.5, 0.25]], "t"))
    fills = {}
    for g in root.iter(f"{SVG}g"):
        if g.get("class") == "cell-group":
            value = "".join(g.find(f"{SVG}text").itertext())
            fills[float(value)] = g.find(f"{SVG}rect").get("fill")

    def lightness(hex_colour):
        return sum(int(hex_colour[k : k + 2], 16) for k in (1, 3, 5))

    order = [lightness(fills[v]) for v in sorted(fills)]
    assert order == sorted(order, reverse=True)  # darker as the value grows


def test_heatmap_shape_mismatch():
    with pytest.raises(ValueError):
        P.heatmap(["a", "b"], [[0.1, 0.2]], "t")


# ---------------------------------------------------------------------------------------------
# scatter
# ---------------------------------------------------------------------------------------------


def test_scatter_points_jitter_and_bounds():
    rng = np.random.default_rng(0)
    points = [(float(r), float(-r + rng.normal())) for r in rng.integers(1, 7, size=120)]
    points.append((float("nan"), 1.0))
    svg = P.scatter(points, 'Score vs rank "BLEU" <&>', "Clinician rank", "Metric score")
    root = parse(svg)
    assert_accessible(root, 'Score vs rank "BLEU" <&>')
    dots = marks(root)
    assert len(dots) == 120
    assert_inside_view_box(root)
    no_nan_attributes(svg)
    # Deterministic jitter: same seed, same picture; other seed, other x; y never jittered.
    assert svg == P.scatter(points, 'Score vs rank "BLEU" <&>', "Clinician rank", "Metric score")
    other = parse(P.scatter(points, "x", "r", "s", jitter_seed=1))
    assert [d.get("cx") for d in marks(other)] != [d.get("cx") for d in dots]
    assert [d.get("cy") for d in marks(other)] == [d.get("cy") for d in dots]
    # Jitter stays small: points of rank 1 and rank 2 never overlap horizontally.
    xs = {}
    for (x, _), d in zip([p for p in points if not math.isnan(p[0])], dots, strict=True):
        xs.setdefault(x, []).append(float(d.get("cx")))
    assert max(xs[1.0]) < min(xs[2.0])


def test_scatter_degenerate_inputs():
    for pts in ([], [(1.0, 2.0)], [(3.0, 5.0), (3.0, 5.0)]):
        svg = P.scatter(pts, "t", "x", "y")
        root = parse(svg)
        assert len(marks(root)) == len(pts)
        assert_inside_view_box(root)
        no_nan_attributes(svg)


# ---------------------------------------------------------------------------------------------
# bar_chart
# ---------------------------------------------------------------------------------------------


def test_bar_chart_bars_whiskers_and_labels():
    rows = [
        {"label": NASTY, "value": 0.8, "lo": 0.7, "hi": 0.9},
        {"label": "B", "value": -0.4, "lo": -0.5, "hi": -0.3},
        {"label": "C", "value": None, "lo": None, "hi": None},
    ]
    svg = P.bar_chart(rows, "Leaderboard & <friends>", "Bradley-Terry strength")
    root = parse(svg)
    assert_accessible(root, "Leaderboard & <friends>")
    bars = marks(root)
    assert len(bars) == 2
    assert len(marks(root, "interval")) == 2
    assert NASTY in texts(root) and "n/a" in texts(root)
    zero_y = float(marks(root, "zero")[0].get("y1"))
    up, down = bars
    # Positive bar ends at the zero line from above, negative bar hangs below it (coordinates
    # are written to two decimals: a sum of two may differ from the line's by 0.01).
    assert float(up.get("y")) + float(up.get("height")) == pytest.approx(zero_y, abs=0.011)
    assert float(down.get("y")) == pytest.approx(zero_y, abs=0.011)
    assert float(up.get("height")) == pytest.approx(2 * float(down.get("height")), rel=1e-3)
    assert_inside_view_box(root)
    no_nan_attributes(svg)


@pytest.mark.parametrize("n", [1, 4, 12])
def test_bar_chart_mark_count(n):
    rows = [{"label": f"model {k}", "value": k / n, "lo": 0, "hi": 1} for k in range(n)]
    root = parse(P.bar_chart(rows, "t", "share"))
    assert len(marks(root)) == n
    assert_inside_view_box(root)


def test_charts_carry_no_inline_style_the_csp_would_refuse() -> None:
    svg = P.interval_chart([{"label": "a", "value": 0.1, "lo": 0.0, "hi": 0.2}], "t", "x")
    assert "style=" not in svg


# --- a phone layout whose text keeps its size --------------------------------------------------
LONG = "Learned from clinicians (pairwise LR, CV by patient)"


@pytest.mark.parametrize(
    "draw",
    [
        lambda c: P.interval_chart(
            [{"label": LONG, "value": 0.4, "lo": 0.1, "hi": 0.6}] * 3,
            "Agreement with clinicians: mean per-review Kendall's tau-b",
            "Kendall's tau-b (cluster bootstrap over instructions)",
            compact=c,
        ),
        lambda c: P.heatmap(
            ["gpt-4-32k@32768", "mpt-7b-instruct@2048", "vicuna-13b@2048", "b", "c", "d"],
            [[0.5] * 6] * 6,
            "Win rate (row vs column)",
            compact=c,
        ),
        lambda c: P.scatter(
            [(1, 2.0), (2, 3.0)], "BLEU against clinician rank", "Rank", "BLEU", compact=c
        ),
        lambda c: P.bar_chart(
            [
                {"label": f"model-number-{k}@32768", "value": 0.5, "lo": 0.4, "hi": 0.6}
                for k in range(6)
            ],
            "Share judged correct (cluster bootstrap over instructions)",
            "Share correct",
            compact=c,
        ),
    ],
    ids=["interval", "heatmap", "scatter", "bar"],
)
def test_the_phone_layout_is_as_wide_as_a_phone_and_keeps_its_marks_inside(draw):
    wide, narrow = parse(draw(False)), parse(draw(True))
    # Drawn 340 px wide on a 390-px phone, the wide layout's 12-unit text fell to 5-7 px.
    assert view_box(wide)[2] > 420
    assert view_box(narrow)[2] <= 380, view_box(narrow)
    assert_inside_view_box(narrow)
    drawn = [len(marks(root)) + len(marks(root, "cell")) for root in (wide, narrow)]
    assert drawn[0] and drawn[0] == drawn[1]


def test_phone_labels_stay_clear_of_the_lines_behind_them():
    """The phone layouts print labels over the plot (a row's name above its interval, a bar's
    value beyond its whisker): each carries a white halo so grid lines and the dashed reference
    never run through the letters, and a negative bar's value has room above the axis."""
    forest = P.interval_chart(
        [{"label": "Clinician vs clinician (ceiling)", "value": 0.4, "lo": 0.2, "hi": 0.6}],
        "t",
        "x",
        compact=True,
    )
    root = parse(forest)
    row_labels = [
        t for t in root.iter(f"{SVG}text") if t.text == "Clinician vs clinician (ceiling)"
    ]
    assert row_labels and all(
        t.get("paint-order") == "stroke" and t.get("stroke") == "#ffffff" for t in row_labels
    )
    rows = [
        {"label": m, "value": v, "lo": v - 0.3, "hi": v + 0.3}
        for m, v in (("east", 0.19), ("south", -0.05), ("north", -0.23))
    ]
    bars = parse(P.bar_chart(rows, "t", "log-strength", compact=True))
    values = {t.text: float(t.get("y")) for t in bars.iter(f"{SVG}text")}
    axis_bottom = max(float(r.get("y")) + float(r.get("height")) for r in marks(bars))
    lowest_whisker = max(float(line.get("y1")) for line in marks(bars, "interval"))
    # "-0.23" sits below its whisker's end and above the plot's bottom edge, not on either.
    assert values["-0.23"] > lowest_whisker + 8
    assert axis_bottom <= lowest_whisker
