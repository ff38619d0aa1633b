"""Numbers as people write them in a paper: estimates with intervals, p-values, undefined.

- An estimate without a value is "n/a"; without an interval it says so and why
  ("0.412, no interval: 3 clusters (fewer than 10)"), never "0.412 [, ]" or a zero-width
  interval.
- A p-value from resampling at its resolution is written "< 0.0002" (the smallest value its
  resamples can show), never "0.0000"; small exact p-values are "< 0.001", as journals ask.
"""

from __future__ import annotations

import math
from typing import Any


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def number(value: Any, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if _finite(value) else "n/a"


def interval(value: Any, lo: Any, hi: Any, digits: int = 3, note: str = "") -> str:
    """``value [lo, hi]``; the value alone with the reason when there is no interval."""
    if not _finite(value):
        return "n/a"
    if _finite(lo) and _finite(hi):
        return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{value:.{digits}f} ({note or 'no interval'})"


def _round_up(value: float) -> str:
    """The smallest number with one significant digit that is at least ``value``."""
    exponent = math.floor(math.log10(value))
    digit = math.ceil(round(value / 10**exponent, 9))
    if digit == 10:
        digit, exponent = 1, exponent + 1
    return f"{digit * 10.0**exponent:.{max(0, -exponent)}f}"


def p_value(value: Any, *, at_floor: bool = False) -> str:
    """A p-value as written in a paper: "0.031", "0.88", "< 0.001"; at the resolution of a
    resampling test, "< " and the bound."""
    if not _finite(value):
        return "n/a"
    p = float(value)
    if at_floor:
        return f"< {_round_up(p)}"
    if p < 0.001:
        return "< 0.001"
    if p < 0.01:
        return f"{p:.3f}"
    return f"{p:.2f}" if p >= 0.1 else f"{p:.3f}"
