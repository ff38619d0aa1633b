"""How the report says a place among clinicians, a resampling unit and a method: one phrase
per fact, used by every section that states it, so that two sections never say it twice in
two ways ("0th percentile" in one, "below every clinician" in the other)."""

from __future__ import annotations

import math
from typing import Any

# With fewer clinicians than this a percentile is a count in disguise: say the count.
FEW_CLINICIANS = 10


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``12th``, ``13th``, ``21st``, ``33rd``."""
    if n % 100 in (11, 12, 13):
        return f"{n}th"
    suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _interval(ci: Any, n: int, counts: bool) -> str:
    if not (isinstance(ci, list | tuple) and len(ci) == 2 and all(_number(v) for v in ci)):
        return ""
    lo, hi = float(ci[0]), float(ci[1])
    if counts:
        low, high = round(lo * n), round(hi * n)
        span = f"{low}" if low == high else f"{low}–{high}"
        return f"; 95% interval {span} of {n}"
    low_p, high_p = round(100 * lo), round(100 * hi)
    if low_p == high_p:
        return f"; 95% interval {ordinal(low_p)}"
    return f"; 95% interval {ordinal(low_p)}–{ordinal(high_p)}"


def clinician_place(share: Any, n_clinicians: Any, ci: Any = None, *, n_at_most: Any = None) -> str:
    """Where a metric falls among the clinicians: the share of clinicians whose agreement
    with the others is at most the metric's. "below every clinician" (0), "as well as every
    clinician" (1), "as well as 2 of 3 clinicians" with few clinicians, else the percentile
    as an ordinal; the bootstrap interval beside it when there is one."""
    if not _number(share) or not isinstance(n_clinicians, int) or n_clinicians <= 0:
        return "n/a"
    n = n_clinicians
    counts = n < FEW_CLINICIANS
    k = int(n_at_most) if isinstance(n_at_most, int) else round(float(share) * n)
    tail = _interval(ci, n, counts)
    if k == 0:
        return f"below every clinician{tail}"
    if k == n:
        return f"as well as every clinician{tail}"
    if counts:
        return f"as well as {k} of {n} clinicians{tail}"
    return f"{ordinal(round(100 * float(share)))} percentile of clinicians{tail}"


def clinicians_beaten(
    share: Any, n_clinicians: Any, ci: Any = None, *, n_beaten: Any = None
) -> str:
    """How many clinicians the metric agrees with the others at least as well as, one by
    one: "none of 3", "2 of 3", "every one of 3"; a percentage with many clinicians."""
    if not _number(share) or not isinstance(n_clinicians, int) or n_clinicians <= 0:
        return "n/a"
    n = n_clinicians
    counts = n < FEW_CLINICIANS
    k = int(n_beaten) if isinstance(n_beaten, int) else round(float(share) * n)
    tail = _interval(ci, n, counts) if counts else ""
    if not counts and isinstance(ci, list | tuple) and len(ci) == 2 and all(map(_number, ci)):
        tail = f"; 95% interval {round(100 * ci[0])}%–{round(100 * ci[1])}%"
    if k == 0:
        return f"none of {n}{tail}"
    if k == n:
        return f"every one of {n}{tail}"
    return f"{k} of {n}{tail}" if counts else f"{round(100 * float(share))}% of {n}{tail}"


def resampling_unit(parameters: dict[str, Any], results: dict[str, Any] | None) -> str:
    """The unit the intervals resample, plural, in words: what the results say once computed;
    before that, what the report was asked for ("patients where instructions share records"
    for auto), never a guess that changes when the report is done."""
    unit = ((results or {}).get("clustering") or {}).get("unit")
    if unit:
        return f"{unit}s"
    asked = str((parameters or {}).get("cluster", "auto"))
    if asked in ("patient", "instruction"):
        return f"{asked}s"
    return "patients where instructions share records, else instructions"
