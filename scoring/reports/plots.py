"""Server-side SVG charts for the results pages: no JavaScript, scale to the page, print well.

Every function is pure and returns an SVG document as a string. Conventions:

* ``viewBox`` only (no fixed pixel width), so the chart scales with the page; ``role="img"``, an
  ``aria-label`` and a ``<title>`` (plus ``<desc>``) for assistive technology;
* every piece of user-supplied text goes through ``xml.sax.saxutils.escape``/``quoteattr``;
* black and greys for axes and text, plus one colour-blind-safe palette: Okabe-Ito blue for marks
  and a light-to-dark blue ramp (monotone in lightness, so it survives greyscale printing) for
  heatmaps, whose cells also print their value;
* the drawn data marks carry ``class="mark"`` (heatmap cells ``class="cell"``, empty ones
  ``class="cell empty"``), so tests and stylesheets can find them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np

__all__ = ["bar_chart", "heatmap", "interval_chart", "scatter"]

FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
INK = "#000000"
GREY = "#595959"  # axis labels and secondary text (7:1 contrast on white)
GRID = "#d9d9d9"
EMPTY = "#e0e0e0"  # heatmap cell without a value
ACCENT = "#0072B2"  # Okabe-Ito blue
# Sequential ramp for 0..1 (ColorBrewer Blues end points and midpoint).
RAMP = ((0.0, (0xF7, 0xFB, 0xFF)), (0.5, (0x6B, 0xAE, 0xD6)), (1.0, (0x08, 0x30, 0x6B)))

FONT_SIZE = 12.0
TITLE_SIZE = 14.0
# The width of a chart's phone layout (``compact=True``), in the same units: about the pixels a
# 390-px-wide screen gives a figure, so that text keeps about its size.
COMPACT_WIDTH = 360.0


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _n(value: float) -> str:
    """Compact coordinate: at most two decimals, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in {"-0", ""} else text


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.{digits}f}"


def _finite(value: Any) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _text_width(text: str, size: float = FONT_SIZE) -> float:
    """Rough rendered width of ``text`` (average glyph ~0.6 em)."""
    return len(text) * size * 0.6


LABEL_MAX_WIDTH = 250.0


def _wrap(text: str, max_width: float, size: float = FONT_SIZE) -> list[str]:
    """``text`` in lines no wider than ``max_width`` (a word longer than that stands alone)."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if current and _text_width(candidate, size) > max_width:
            lines.append(current)
            current = word
        else:
            current = candidate
    return [*lines, current] if current else lines or [""]


def _clip(text: str, max_width: float) -> str:
    """``text`` shortened with an ellipsis to fit ``max_width`` (the phone layouts' labels)."""
    if _text_width(text) <= max_width:
        return text
    keep = max(1, int(max_width / (FONT_SIZE * 0.6)) - 1)
    return text[:keep].rstrip() + "…"


def _attrs(**attrs: Any) -> str:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        if isinstance(value, float):
            value = _n(value)
        parts.append(f"{name}={quoteattr(str(value))}")
    return " ".join(parts)


def _text(x: float, y: float, content: str, **attrs: Any) -> str:
    return f"<text {_attrs(x=x, y=y, **attrs)}>{escape(content)}</text>"


# A white outline painted under a label's glyphs, so that a grid line, the dashed reference or a
# whisker passing behind it never runs through the letters (the phone layouts put labels over
# the plot area).
HALO = 'stroke="#ffffff" stroke-width="3.5" stroke-linejoin="round" paint-order="stroke"'


def _label(x: float, y: float, content: str, **attrs: Any) -> str:
    """:func:`_text` with the halo."""
    return f"<text {_attrs(x=x, y=y, **attrs)} {HALO}>{escape(content)}</text>"


def _document(width: float, height: float, title: str, desc: str, body: Iterable[str]) -> str:
    # A title wider than the chart (a phone layout) wraps; the chart moves down to make room.
    title_lines = _wrap(title, width - 20, TITLE_SIZE)
    extra = (TITLE_SIZE + 4) * (len(title_lines) - 1)
    height += extra
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'role="img" aria-label={quoteattr(title)} '
        f"font-family={quoteattr(FONT_FAMILY)} font-size={quoteattr(_n(FONT_SIZE))} "
        'preserveAspectRatio="xMidYMid meet">'
    )
    parts = [
        head,
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(desc)}</desc>",
        f'<rect x="0" y="0" width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>',
        *(
            _text(
                width / 2,
                22 + k * (TITLE_SIZE + 4),
                line,
                text_anchor="middle",
                font_size=TITLE_SIZE,
                font_weight="600",
                fill=INK,
            )
            for k, line in enumerate(title_lines)
        ),
        *([f'<g transform="translate(0 {_n(extra)})">', *body, "</g>"] if extra else body),
        "</svg>",
    ]
    return "\n".join(parts)


def _nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10.0 * magnitude


def _ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    step = _nice_step(hi - lo, target)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    k = 0
    while first + k * step <= hi + step * 1e-9:
        value = round(first + k * step, 10)
        ticks.append(0.0 if value == 0 else value)
        k += 1
    return ticks


def _tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step < 1 else 0
    if step < 1 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-9:
        decimals += 1
    return f"{value:.{decimals}f}"


def _padded_range(values: Sequence[float], include_zero: bool = False) -> tuple[float, float]:
    finite = [float(v) for v in values if _finite(v)]
    if include_zero:
        finite.append(0.0)
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi - lo < 1e-12:
        return lo - 0.5, hi + 0.5
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    if include_zero:
        lo, hi = (0.0 if min(finite) >= 0 else lo), (0.0 if max(finite) <= 0 else hi)
    return lo, hi


def _scale(lo: float, hi: float, a: float, b: float):
    span = hi - lo if hi != lo else 1.0

    def f(v: float) -> float:
        return a + (min(max(v, lo), hi) - lo) / span * (b - a)

    return f


def _ramp(value: float) -> str:
    v = min(max(value, 0.0), 1.0)
    for (p0, c0), (p1, c1) in zip(RAMP, RAMP[1:], strict=False):
        if v <= p1:
            t = (v - p0) / (p1 - p0)
            rgb = [round(a + (b - a) * t) for a, b in zip(c0, c1, strict=True)]
            return "#{:02x}{:02x}{:02x}".format(*rgb)
    return "#{:02x}{:02x}{:02x}".format(*RAMP[-1][1])


def _row_values(row: dict[str, Any]) -> tuple[str, float, float, float]:
    def get(key: str) -> float:
        value = row.get(key)
        return float(value) if _finite(value) else math.nan

    return str(row.get("label", "")), get("value"), get("lo"), get("hi")


# ---------------------------------------------------------------------------------------------
# Forest plot
# ---------------------------------------------------------------------------------------------


def interval_chart(
    rows: list[dict[str, Any]],
    title: str,
    x_label: str,
    x_range: tuple[float, float] | None = (-1.0, 1.0),
    reference: float = 0.0,
    *,
    compact: bool = False,
) -> str:
    """Horizontal point-and-interval chart (forest plot), one row per ``{label, value, lo, hi}``.

    A dashed line is drawn at ``reference`` (no agreement: 0 for tau, 0.5, chance, for pairwise
    accuracy) when it is in range; the axis is widened (never clipped) when a
    value or bound falls outside ``x_range``; ``x_range=None`` fits the data. Each row prints
    ``value [lo, hi]`` at the right; a row without a finite value says "no data".
    """
    parsed = [_row_values(r) for r in rows]
    data = [v for _, value, lo, hi in parsed for v in (value, lo, hi) if _finite(v)]
    if x_range is None:
        x_lo, x_hi = _padded_range(data)
    else:
        x_lo = min([float(x_range[0]), *data])
        x_hi = max([float(x_range[1]), *data])
        if x_hi - x_lo < 1e-12:
            x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    line_h = FONT_SIZE + 3
    value_w = 130.0
    if compact:
        # A phone's layout, 360 units wide so that text keeps about its size: each row's label
        # on its own lines above the interval, which then spans the width left of the value.
        width = COMPACT_WIDTH
        wrapped = [_wrap(label, width - 32) for label, *_ in parsed]
        label_w, plot_w = 22.0, width - value_w - 34
        row_heights = [line_h * len(lines) + 26 for lines in wrapped]
    else:
        # Long labels ("Learned from clinicians (pairwise LR, CV by patient)") wrap onto more
        # lines inside the label column instead of running off the left edge.
        wrapped = [_wrap(label, LABEL_MAX_WIDTH) for label, *_ in parsed]
        label_w = max([_text_width(line) for lines in wrapped for line in lines] + [40.0]) + 16
        plot_w = 440.0
        row_heights = [max(26.0, line_h * len(lines) + 10) for lines in wrapped]
        width = label_w + plot_w + value_w + 10
    row_tops = [sum(row_heights[:k]) for k in range(len(row_heights))]
    top = 44.0
    plot_h = sum(row_heights) if row_heights else 26.0
    x_label_lines = _wrap(x_label, width - 20) if compact else [x_label]
    height = top + plot_h + 56 + line_h * (len(x_label_lines) - 1)
    x0, x1 = label_w, label_w + plot_w
    sx = _scale(x_lo, x_hi, x0, x1)
    ticks = _ticks(x_lo, x_hi, 6)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0

    body: list[str] = []
    axis_y = top + plot_h
    for t in ticks:
        x = sx(t)
        body.append(f"<line {_attrs(x1=x, y1=top, x2=x, y2=axis_y, stroke=GRID)}/>")
        body.append(_text(x, axis_y + 16, _tick_label(t, step), text_anchor="middle", fill=GREY))
    if x_lo <= reference <= x_hi:
        z = sx(reference)
        body.append(
            f"<line {_attrs(class_='zero', x1=z, y1=top - 4, x2=z, y2=axis_y, stroke=INK)} "
            'stroke-dasharray="4 3"/>'
        )
    body.append(f"<line {_attrs(x1=x0, y1=axis_y, x2=x1, y2=axis_y, stroke=INK)}/>")
    if compact:  # the axis title may be wider than the axis: wrapped under the whole chart
        for n, line in enumerate(x_label_lines):
            body.append(
                _text(width / 2, axis_y + 36 + n * line_h, line, text_anchor="middle", fill=INK)
            )
    else:
        body.append(_text((x0 + x1) / 2, axis_y + 40, x_label, text_anchor="middle", fill=INK))

    for k, (label, value, lo, hi) in enumerate(parsed):
        body.append('<g class="row">')
        lines = wrapped[k]
        if compact:
            first = top + row_tops[k] + line_h
            y = first + line_h * (len(lines) - 1) + 14
            for n, line in enumerate(lines):
                body.append(_label(x0, first + n * line_h, line, fill=INK, font_weight="600"))
        else:
            y = top + row_tops[k] + row_heights[k] / 2
            first = y + 4 - line_h * (len(lines) - 1) / 2
            for n, line in enumerate(lines):
                body.append(_text(x0 - 8, first + n * line_h, line, text_anchor="end", fill=INK))
        if _finite(lo) and _finite(hi):
            body.append(
                f"<line {_attrs(class_='interval', x1=sx(lo), y1=y, x2=sx(hi), y2=y)} "
                f'stroke="{INK}" stroke-width="1.5"/>'
            )
            for bound in (lo, hi):
                body.append(
                    f"<line {_attrs(x1=sx(bound), y1=y - 5, x2=sx(bound), y2=y + 5)} "
                    f'stroke="{INK}" stroke-width="1.5"/>'
                )
        if _finite(value):
            tip = f"{label}: {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]"
            body.append(
                f"<circle {_attrs(class_='mark', cx=sx(value), cy=y, r=5.0)} "
                f'fill="{ACCENT}" stroke="{INK}" stroke-width="1">'
                f"<title>{escape(tip)}</title></circle>"
            )
            summary = (
                f"{_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]"
                if _finite(lo) and _finite(hi)
                else f"{_fmt(value)} (no interval)"
            )
        else:
            summary = "no data"
        body.append(_text(x1 + 10, y + 4, summary, fill=GREY if summary == "no data" else INK))
        body.append("</g>")
    desc = f"Point estimates with intervals for {len(parsed)} rows; x axis: {x_label}."
    return _document(width, height, title, desc, body)


# ---------------------------------------------------------------------------------------------
# Heatmap
# ---------------------------------------------------------------------------------------------


def heatmap(
    labels: list[str],
    matrix: Sequence[Sequence[float | None]],
    title: str,
    *,
    compact: bool = False,
) -> str:
    """Square heatmap of values in 0..1 (e.g. a win-rate matrix, rows vs columns).

    Each cell is coloured on a light-to-dark blue ramp and prints its value; ``None``/nan cells
    are drawn empty in light grey (no text). Row labels on the left, column labels on top.
    """
    labels = [str(label) for label in labels]
    n = len(labels)
    values = [list(row) for row in matrix]
    if len(values) != n or any(len(row) != n for row in values):
        raise ValueError(f"matrix must be {n} x {n} to match the labels")
    label_w = min(220.0, max([_text_width(label) for label in labels] + [20.0]))
    cell = 46.0
    diag = label_w * math.sqrt(0.5)
    if compact:
        # Labels of at most 120 units, column labels upright (nothing hangs off to the right),
        # cells that share what is left of the phone's width.
        label_w = min(label_w, 120.0)
        diag = 0.0
        cell = max(30.0, min(46.0, (COMPACT_WIDTH - label_w - 32) / max(n, 1)))
        labels_shown = [_clip(label, label_w) for label in labels]
    else:
        labels_shown = labels
    left = label_w + 16
    top = 40 + (label_w if compact else diag) + 12
    grid_w = cell * n
    legend_h = 46.0
    width = left + grid_w + diag + 16
    if compact:
        width = max(width, left + 5 * 36.0 + 16)
    height = top + grid_w + legend_h

    body: list[str] = []
    for i, label in enumerate(labels_shown):
        y = top + cell * (i + 0.5)
        body.append(_text(left - 8, y + 4, label, text_anchor="end", fill=INK, class_="row-label"))
        # Upright labels (a phone) sit on the column's centre line: their baseline is offset.
        x = left + cell * (i + 0.5) + (4 if compact else 0)
        body.append(
            _text(
                x,
                top - 8,
                label,
                transform=f"rotate({-90 if compact else -45} {_n(x)} {_n(top - 8)})",
                fill=INK,
                class_="col-label",
            )
        )
    for i, row in enumerate(values):
        for j, raw in enumerate(row):
            x, y = left + cell * j, top + cell * i
            geometry = _attrs(x=x, y=y, width=cell, height=cell)
            if not _finite(raw):
                body.append(
                    f'<rect class="cell empty" {geometry} fill="{EMPTY}" stroke="#ffffff">'
                    f"<title>{escape(f'{labels[i]} vs {labels[j]}: no data')}</title></rect>"
                )
                continue
            value = float(raw)
            tip = f"{labels[i]} vs {labels[j]}: {_fmt(value)}"
            text_fill = "#ffffff" if value > 0.6 else INK
            body.append(
                f'<g class="cell-group"><rect class="cell" {geometry} fill="{_ramp(value)}" '
                f'stroke="#ffffff"><title>{escape(tip)}</title></rect>'
                + _text(
                    x + cell / 2,
                    y + cell / 2 + 4,
                    _fmt(value),
                    text_anchor="middle",
                    fill=text_fill,
                    class_="value",
                )
                + "</g>"
            )
    # Legend: five swatches 0 .. 1.
    ly = top + grid_w + 12
    # A phone's grid may be narrower than five readable legend labels: the legend keeps its size.
    sw = 36.0 if compact or not n else min(36.0, grid_w / 5)
    for k, v in enumerate((0.0, 0.25, 0.5, 0.75, 1.0)):
        lx = left + sw * k
        body.append(
            f"<rect {_attrs(class_='legend', x=lx, y=ly, width=sw, height=10.0)} "
            f'fill="{_ramp(v)}" stroke="{GREY}" stroke-width="0.5"/>'
        )
        body.append(_text(lx + sw / 2, ly + 24, _fmt(v), text_anchor="middle", fill=GREY))
    desc = f"{n} by {n} heatmap; rows compared with columns, values from 0 to 1."
    return _document(width, height, title, desc, body)


# ---------------------------------------------------------------------------------------------
# Scatter
# ---------------------------------------------------------------------------------------------


def _axes(
    body: list[str],
    box: tuple[float, float, float, float],
    x_rng: tuple[float, float],
    y_rng: tuple[float, float],
    x_label: str,
    y_label: str,
    *,
    x_ticks: bool = True,
) -> None:
    left, top, right, bottom = box
    sx = _scale(*x_rng, left, right)
    sy = _scale(*y_rng, bottom, top)
    y_ticks = _ticks(*y_rng, 5)
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    for t in y_ticks:
        y = sy(t)
        body.append(f"<line {_attrs(x1=left, y1=y, x2=right, y2=y, stroke=GRID)}/>")
        body.append(_text(left - 6, y + 4, _tick_label(t, y_step), text_anchor="end", fill=GREY))
    if x_ticks:
        xt = _ticks(*x_rng, 6)
        x_step = xt[1] - xt[0] if len(xt) > 1 else 1.0
        for t in xt:
            x = sx(t)
            body.append(f"<line {_attrs(x1=x, y1=bottom, x2=x, y2=bottom + 4, stroke=INK)}/>")
            body.append(
                _text(x, bottom + 17, _tick_label(t, x_step), text_anchor="middle", fill=GREY)
            )
        body.append(_text((left + right) / 2, bottom + 38, x_label, text_anchor="middle", fill=INK))
    body.append(f"<line {_attrs(x1=left, y1=bottom, x2=right, y2=bottom, stroke=INK)}/>")
    body.append(f"<line {_attrs(x1=left, y1=top, x2=left, y2=bottom, stroke=INK)}/>")
    cy = (top + bottom) / 2
    body.append(
        _text(
            16,
            cy,
            y_label,
            text_anchor="middle",
            transform=f"rotate(-90 16 {_n(cy)})",
            fill=INK,
        )
    )


def scatter(
    points: list[tuple[float, float]],
    title: str,
    x_label: str,
    y_label: str,
    jitter_seed: int = 0,
    *,
    compact: bool = False,
) -> str:
    """Scatter plot, e.g. clinician rank (x) against metric score (y).

    ``x`` is jittered horizontally by a small deterministic amount (uniform within +-15 % of the
    smallest gap between distinct ``x`` values, from ``np.random.default_rng(jitter_seed)``) so
    that points sharing a rank do not hide each other. Points with a non-finite coordinate are
    left out (and counted in the description).
    """
    finite = [(float(x), float(y)) for x, y in points if _finite(x) and _finite(y)]
    dropped = len(points) - len(finite)
    xs = np.array([p[0] for p in finite], dtype=float)
    ys = np.array([p[1] for p in finite], dtype=float)
    distinct = np.unique(xs)
    amplitude = 0.15 * float(np.min(np.diff(distinct))) if distinct.size >= 2 else 0.05
    rng = np.random.default_rng(jitter_seed)
    jittered = xs + rng.uniform(-amplitude, amplitude, size=xs.size)
    x_lo, x_hi = _padded_range(list(xs))
    if xs.size:
        x_lo = min(x_lo, float(xs.min()) - amplitude)
        x_hi = max(x_hi, float(xs.max()) + amplitude)
    y_lo, y_hi = _padded_range(list(ys))

    if compact:
        left, top, right, bottom = 56.0, 44.0, COMPACT_WIDTH - 16, 264.0
    else:
        left, top, right, bottom = 64.0, 44.0, 544.0, 324.0
    width, height = right + 20, bottom + 52
    sx = _scale(x_lo, x_hi, left, right)
    sy = _scale(y_lo, y_hi, bottom, top)
    body: list[str] = []
    _axes(body, (left, top, right, bottom), (x_lo, x_hi), (y_lo, y_hi), x_label, y_label)
    radius = 3.0 if compact else 3.5
    # One shared radius and stroke on the group, no tooltip per point: hundreds of points per
    # metric are most of a report page's bytes, and the values are in the per-response export.
    body.append(
        f'<g class="points" fill="{ACCENT}" fill-opacity="0.55" stroke="{INK}" stroke-width="0.4">'
    )
    for xj, (_, y) in zip(jittered, finite, strict=True):
        body.append(
            f'<circle class="mark" cx="{_n(sx(float(xj)))}" cy="{_n(sy(y))}" r="{_n(radius)}"/>'
        )
    body.append("</g>")
    desc = f"Scatter of {len(finite)} points: {y_label} against {x_label}."
    if dropped:
        desc += f" {dropped} points without a value are not shown."
    return _document(width, height, title, desc, body)


# ---------------------------------------------------------------------------------------------
# Bar chart
# ---------------------------------------------------------------------------------------------


def bar_chart(
    rows: list[dict[str, Any]], title: str, y_label: str, *, compact: bool = False
) -> str:
    """Vertical bars from 0 with interval whiskers, one per ``{label, value, lo, hi}``.

    Suits leaderboards (share correct, Bradley-Terry strength: bars go down for negative
    values). The value is printed above each bar; rows without a finite value print "n/a".
    """
    parsed = [_row_values(r) for r in rows]
    data = [v for _, value, lo, hi in parsed for v in (value, lo, hi) if _finite(v)]
    y_lo, y_hi = _padded_range(data, include_zero=True)
    span = y_hi - y_lo
    y_hi += 0.08 * span  # room for the printed values
    if y_lo < 0:
        # Room below the lowest whisker for a negative bar's printed value (about 16 units of
        # a plot 200-260 high): clamped to the axis, it sat on the whisker and the names.
        y_lo -= 0.12 * span
    band = 64.0
    names = [label for label, *_ in parsed]
    left, top = 70.0, 44.0
    plot_h = 260.0
    if compact:
        # The bars share the phone's width; long names are shortened (the full name is in the
        # bar's tooltip and in the table beside the chart).
        band = min(band, (COMPACT_WIDTH - left - 20) / max(len(parsed), 1))
        names = [_clip(label, 110.0) for label in names]
        plot_h = 200.0
    longest = max([_text_width(label) for label in names] + [0.0])
    rotate = longest > band - 6
    label_h = (longest * math.sqrt(0.5) + 12) if rotate else 18.0
    right = left + band * max(len(parsed), 1)
    bottom = top + plot_h
    width = right + (longest * math.sqrt(0.5) if rotate else 0.0) + 20
    if compact:
        width = max(COMPACT_WIDTH, right + 20)  # rotated names hang to the left, under the bars
    height = bottom + label_h + 12
    sx = _scale(0.0, 1.0, left, right)
    sy = _scale(y_lo, y_hi, bottom, top)

    body: list[str] = []
    _axes(body, (left, top, right, bottom), (0.0, 1.0), (y_lo, y_hi), "", y_label, x_ticks=False)
    zero = sy(0.0)
    body.append(f"<line {_attrs(class_='zero', x1=left, y1=zero, x2=right, y2=zero, stroke=INK)}/>")
    bar_w = band * 0.6
    for k, (label, value, lo, hi) in enumerate(parsed):
        cx = sx((k + 0.5) / max(len(parsed), 1))
        body.append('<g class="row">')
        if _finite(value):
            y_top, y_bottom = sorted((sy(value), zero))
            tip = f"{label}: {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]"
            body.append(
                f"<rect {_attrs(class_='mark', x=cx - bar_w / 2, y=y_top)} "
                f"{_attrs(width=bar_w, height=max(y_bottom - y_top, 0.5))} "
                f'fill="{ACCENT}" stroke="{INK}" stroke-width="0.5">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if value >= 0:  # value above the bar and its upper whisker
                text_y = min(y_top, sy(hi) if _finite(hi) else y_top) - 5
            else:  # below a bar that hangs from the zero line
                text_y = max(y_bottom, sy(lo) if _finite(lo) else y_bottom) + 14
            text_y = min(max(text_y, top - 2), bottom - 2)
            body.append(_label(cx, text_y, _fmt(value), text_anchor="middle"))
        else:
            body.append(_text(cx, zero - 5, "n/a", text_anchor="middle", fill=GREY))
        if _finite(lo) and _finite(hi):
            body.append(
                f"<line {_attrs(class_='interval', x1=cx, y1=sy(lo), x2=cx, y2=sy(hi))} "
                f'stroke="{INK}" stroke-width="1.5"/>'
            )
            for bound in (lo, hi):
                body.append(
                    f"<line {_attrs(x1=cx - 6, y1=sy(bound), x2=cx + 6, y2=sy(bound))} "
                    f'stroke="{INK}" stroke-width="1.5"/>'
                )
        name = names[k]
        if rotate and compact:
            ly = bottom + 14
            body.append(
                _text(
                    cx + 4,
                    ly,
                    name,
                    text_anchor="end",
                    transform=f"rotate(-45 {_n(cx + 4)} {_n(ly)})",
                    fill=INK,
                    class_="bar-label",
                )
            )
        elif rotate:
            ly = bottom + 14
            body.append(
                _text(
                    cx,
                    ly,
                    name,
                    transform=f"rotate(45 {_n(cx)} {_n(ly)})",
                    fill=INK,
                    class_="bar-label",
                )
            )
        else:
            body.append(
                _text(cx, bottom + 16, name, text_anchor="middle", fill=INK, class_="bar-label")
            )
        body.append("</g>")
    desc = f"Bar chart of {len(parsed)} rows with intervals; y axis: {y_label}."
    return _document(width, height, title, desc, body)
