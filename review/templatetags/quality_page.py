"""How the quality page writes a figure: the estimate, its interval and what it rests on, or
"too few" with the count, never a bare number."""

import math

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from scoring.reports.statistics.quality import Figure

register = template.Library()


def _number(value: float, style: str) -> str:
    if style == "percent":
        return f"{100 * value:.0f}%"
    if style == "seconds":
        return f"{value:.0f} s"
    if style == "points":
        return f"{100 * value:+.0f} points"
    return f"{value:.2f}"


@register.simple_tag
def figure(value: Figure, style: str = "number", unit: str = "") -> SafeString:
    """``<estimate> (<low>–<high>)`` and ``n <unit>``, or the figure's "too few" note."""
    if not value.known:
        observed = value.extra.get("observed")
        seen = (
            f" (so far {_number(observed, style)})"
            if isinstance(observed, float) and not math.isnan(observed)
            else ""
        )
        note = value.note or "no data yet"
        return format_html('<span class="muted">{}{}</span>', note, seen)
    interval = ""
    if not (math.isnan(value.ci_low) or math.isnan(value.ci_high)):
        sep = " to " if style in ("number", "points") else "–"
        interval = f" ({_number(value.ci_low, style)}{sep}{_number(value.ci_high, style)})"
    rests = f" · {value.n} {unit}" if unit else ""
    return format_html(
        '<strong>{}</strong>{}<span class="muted small">{}</span>',
        _number(value.estimate, style),
        interval,
        rests,
    )


@register.filter
def tau(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.2f}"


@register.filter
def percent(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.0f}%"
