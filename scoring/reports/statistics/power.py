"""How many more clinician reviews a question needs, with and without the predictor.

Every target is planned as a mean over units (the report's resampling unit; a unit with any
reviewed instruction counts as reviewed, its predictor as the mean over those instructions, so
the plan is conservative about the predictor where patients straddle), and its standard error
after ``n`` reviewed units out of the study's ``n + N`` follows from a few moments of the data
so far:

- clinicians only: ``se^2 = var(Y) / n``;
- with the predictor (PPI++ at its optimal ``lam`` for that ``n``)::

      lam(n)  = cov(Y, Yhat) / ((1 + n/N) var(Yhat))
      se^2(n) = (var(Y) - 2 lam cov + lam^2 var(Yhat)) / n + lam^2 var(Yhat) / N

  with ``N = total - n`` the units left unreviewed (and ``se^2 = var(Y) / n`` once all are).

A target is a standard error to reach:

- "the top two models' correctness apart": ``se <= |d| / (z_{1-alpha/2} + z_power)``, ``d``
  the current difference of their shares correct (the usual sample-size rule: the interval
  excludes 0 with probability ``power`` if the difference is what it looks like now);
- "each model's share correct within +/- margin": ``se <= margin / z_{1-alpha/2}`` for every
  model (the slowest decides);
- "metric A's tau minus metric B's excluded from 0": as the first, ``d`` the current mean
  difference of the per-review taus; the predictor stands in for the clinician on unreviewed
  instructions (its own ordering's tau with A minus with B).

The answer is the smallest number of labelled units that reaches it, and the extra clinician
reviews at the study's reviews per unit so far. It extrapolates from the data so far (the
variances and, for the two differences, the difference itself), so it is a plan, not a promise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats as sps

from .correlation import per_review_tau
from .ppi import MIN_LABELLED, Predictions, UnitData, _impute, _unit_mean, target_arrays, unit_data
from .table import Array, JudgementTable, _as_float, _group_nanmean, _tau_b_padded

DEFAULT_MARGIN = 0.05
DEFAULT_POWER = 0.8


def ppi_variance(n: Array | int, n_total: int, var_y: float, cov: float, var_f: float) -> Array:
    """The squared standard error of the power-tuned prediction-powered mean after ``n``
    labelled units of ``n_total`` (formula in the module docstring); ``var_y / n`` when
    ``n >= n_total`` or the predictions do not vary."""
    n_arr = np.asarray(n, dtype=float)
    big_n = n_total - n_arr
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.where((big_n > 0) & (var_f > 0), cov / ((1.0 + n_arr / big_n) * var_f), 0.0)
        out = (var_y - 2.0 * lam * cov + lam * lam * var_f) / n_arr + np.where(
            big_n > 0, lam * lam * var_f / np.where(big_n > 0, big_n, 1.0), 0.0
        )
    result: Array = out
    return result


def labelled_needed(
    *,
    var_y: float,
    cov: float,
    var_f: float,
    n_total: int,
    se_target: float,
    with_predictor: bool,
) -> int | None:
    """The fewest labelled units whose standard error is at most ``se_target``.

    Clinicians only: ``ceil(var_y / se_target^2)``, which may exceed the study (more
    instructions would be needed). With the predictor: searched over ``1..n_total``; ``None``
    when even reviewing every unit would not reach the target."""
    if not (se_target > 0 and math.isfinite(se_target) and math.isfinite(var_y)):
        return None
    if not with_predictor:
        # A hair of slack: var_y / se^2 that is a whole number in exact arithmetic must not
        # round up to the next one in floating point.
        return max(1, math.ceil(var_y / se_target**2 - 1e-9))
    if n_total < 1:
        return None
    candidates = np.arange(1, n_total + 1)
    ok = np.flatnonzero(ppi_variance(candidates, n_total, var_y, cov, var_f) <= se_target**2)
    return int(candidates[ok[0]]) if ok.size else None


def _moments(y: Array, yhat: Array, yhat_unlabelled: Array) -> tuple[float, float, float]:
    """``var(Y)`` (divided by n, as ``ppi_py`` does), ``cov(Y, Yhat)`` on the labelled units
    (by n) and ``var(Yhat)`` over labelled and unlabelled units (by n + N - 1)."""
    var_y = float(np.var(y))
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    pooled = np.concatenate([yhat, yhat_unlabelled])
    var_f = float(np.var(pooled, ddof=1)) if pooled.size > 1 else 0.0
    return var_y, cov, var_f


def _plan(
    *,
    key: str,
    label: str,
    columns: list[tuple[str, Array, Array, Array]],
    n_total: int,
    se_target: Any,
    per_unit: float,
    current: float,
) -> dict[str, Any]:
    """One target over one or more columns (name, y, yhat, yhat_unlabelled); the slowest
    column decides. ``se_target``: a number, or a function of the column's y."""
    need: dict[str, int | None] = {"classical": 0, "ppi": 0}
    n_now = 0
    detail = []
    for name, y, yhat, yu in columns:
        ok = ~np.isnan(y)
        y, yhat = y[ok], yhat[ok]
        n_now = max(n_now, int(y.shape[0]))
        if y.shape[0] < MIN_LABELLED:
            need = {"classical": None, "ppi": None}
            detail.append({"column": name, "n": int(y.shape[0]), "note": "too few reviews"})
            continue
        target = float(se_target(y) if callable(se_target) else se_target)
        var_y, cov, var_f = _moments(y, yhat, yu)
        row: dict[str, Any] = {"column": name, "n": int(y.shape[0]), "se_target": target}
        for method, with_f in (("classical", False), ("ppi", True)):
            n = labelled_needed(
                var_y=var_y, cov=cov, var_f=var_f, n_total=n_total,
                se_target=target, with_predictor=with_f,
            )  # fmt: skip
            row[method] = n
            prev = need[method]
            need[method] = None if n is None or prev is None else max(prev, n)
        detail.append(row)
    out: dict[str, Any] = {
        "target": key,
        "label": label,
        "current": current,
        "labelled_units": n_now,
        "total_units": n_total,
        "reviews_per_unit": per_unit,
        "columns": detail,
    }
    if need["ppi"] is None and need["classical"] is not None and n_now >= MIN_LABELLED:
        # Not reachable within the study even with the predictor: more instructions must be
        # added and reviewed, and once every instruction is reviewed the predictor adds
        # nothing, so the count is the clinicians-only one.
        need["ppi"] = max(need["classical"], n_total)
    for method in ("classical", "ppi"):
        n = need[method]
        out[f"{method}_units"] = n
        out[f"{method}_more_reviews"] = (
            None if n is None or not math.isfinite(per_unit) else
            int(math.ceil(max(0, n - n_now) * per_unit))
        )  # fmt: skip
        # Beyond the study: more instructions than it holds (the clinicians-only count can say
        # so; the predictor's is capped at the study, so it says None).
        out[f"{method}_beyond_study"] = n is not None and n > n_total
    return out


def _difference_se(confidence: float, power: float) -> float:
    return float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0) + sps.norm.ppf(power))


def power_analysis(
    table: JudgementTable,
    predictions: Predictions,
    *,
    table_scores: Mapping[str, Array] | None = None,
    prediction_scores: Mapping[str, Array] | None = None,
    metric_a: str | None = None,
    metric_b: str | None = None,
    margin: float = DEFAULT_MARGIN,
    confidence: float = 0.95,
    power: float = DEFAULT_POWER,
    unit_name: str = "unit",
) -> dict[str, Any]:
    """The three targets' plans (``unit_name``: what a unit is, "patient" or "instruction").

    ``table_scores``/``prediction_scores``: metric scores aligned with the table's rows and
    with the predictions' rows (for the tau target; left out when either metric is missing).
    Cross-fitted predictors are planned as fixed ones (the fold models' mean), which their
    fold-to-fold spread makes slightly optimistic."""
    if not 0.0 < margin < 1.0:
        raise ValueError("margin must be between 0 and 1")
    if not 0.5 <= power < 1.0:
        raise ValueError("power must be at least 0.5 and below 1")
    z = float(sps.norm.ppf(1.0 - (1.0 - confidence) / 2.0))
    zz = _difference_se(confidence, power)
    data = unit_data(table, predictions)
    fixed = UnitData(**{**data.__dict__, "fold_values": None, "fold_of": None})
    if data.fold_values is not None:
        fixed = UnitData(**{**fixed.__dict__, "f_correct": np.nanmean(data.fold_values, axis=-1)})
    n_total = data.n_units
    labelled = int(np.unique(data.unit[data.reviewed]).shape[0])
    per_unit = data.reviews / labelled if labelled else math.nan
    arrays = target_arrays(fixed, "correct")
    targets = []

    # 1. The top two models' shares correct apart.
    with np.errstate(invalid="ignore"), np.testing.suppress_warnings() as sup:
        sup.filter(RuntimeWarning)
        shares = np.nanmean(arrays.y, axis=0) if arrays.y.size else np.zeros(0)
    order = [k for k in np.argsort(-np.nan_to_num(shares, nan=-np.inf)) if not np.isnan(shares[k])]
    if len(order) >= 2:
        a, b = int(order[0]), int(order[1])
        y = arrays.y[:, a] - arrays.y[:, b]
        d = float(np.nanmean(y))
        targets.append(
            _plan(
                key="top_two",
                label=(
                    f"{data.models[a]} and {data.models[b]} (the top two by share correct, "
                    f"now {d:+.3f} apart) told apart at {confidence:.0%} confidence, "
                    f"with {power:.0%} power"
                ),
                columns=[
                    (
                        f"{data.models[a]} - {data.models[b]}",
                        y,
                        arrays.yhat[:, a] - arrays.yhat[:, b],
                        arrays.yhat_unlabelled[:, a] - arrays.yhat_unlabelled[:, b],
                    )
                ],
                n_total=n_total,
                se_target=abs(d) / zz if d != 0 else math.nan,
                per_unit=per_unit,
                current=d,
            )
        )

    # 2. Every model's share correct within +/- margin.
    if data.models:
        targets.append(
            _plan(
                key="margin",
                label=f"every model's share correct within ±{margin * 100:g} points "
                f"at {confidence:.0%} confidence",
                columns=[
                    (m, arrays.y[:, k], arrays.yhat[:, k], arrays.yhat_unlabelled[:, k])
                    for k, m in enumerate(data.models)
                ],
                n_total=n_total,
                se_target=margin / z,
                per_unit=per_unit,
                current=margin,
            )
        )

    # 3. Metric A's tau minus metric B's excluded from 0.
    ts, ps = dict(table_scores or {}), dict(prediction_scores or {})
    if (
        metric_a in ts
        and metric_b in ts
        and metric_a in ps
        and metric_b in ps
        and metric_a != metric_b
    ):
        y_inst = _tau_difference_clinicians(table, data, ts[metric_a], ts[metric_b])
        f_inst = _impute(
            _tau_difference_predictor(data, predictions, ps[metric_a], ps[metric_b], fixed)
        )
        lab = np.zeros(n_total, dtype=bool)
        lab[data.unit[data.reviewed]] = True
        y = _unit_mean(y_inst[:, None], data.unit, data.reviewed, n_total)[lab, 0]
        yhat = _unit_mean(f_inst[:, None], data.unit, data.reviewed, n_total)[lab, 0]
        yu = _unit_mean(f_inst[:, None], data.unit, ~data.reviewed, n_total)[~lab, 0]
        d = float(np.nanmean(y)) if np.any(~np.isnan(y)) else math.nan
        targets.append(
            _plan(
                key="metric_tau",
                label=f"{metric_a} vs {metric_b}: the difference of their mean taus "
                f"(now {d:+.3f}) excluded from 0 at {confidence:.0%} confidence, "
                f"with {power:.0%} power",
                columns=[(f"{metric_a} - {metric_b}", y, yhat, yu)],
                n_total=n_total,
                se_target=abs(d) / zz if d and math.isfinite(d) else math.nan,
                per_unit=per_unit,
                current=d,
            )
        )
    return {
        "targets": targets,
        "confidence": confidence,
        "power": power,
        "margin": margin,
        "metric_a": metric_a,
        "metric_b": metric_b,
        "n_units": n_total,
        "unit": unit_name,
        "n_labelled_units": labelled,
        "reviews": data.reviews,
        "reviews_per_unit": per_unit,
    }


def _tau_difference_clinicians(table: JudgementTable, data: UnitData, a: Array, b: Array) -> Array:
    """Per instruction: the mean over its reviews of ``tau_b(clinician, A) - tau_b(clinician,
    B)``, over reviews where both are defined; nan for unreviewed instructions."""
    ta, tb = per_review_tau(table, a), per_review_tau(table, b)
    both, ia, ib = np.intersect1d(ta.review, tb.review, return_indices=True)
    instruction = ta.instruction[ia]
    diff = ta.tau[ia] - tb.tau[ib]
    out = np.full(data.instructions.shape[0], np.nan)
    if both.size:
        ids, means = _group_nanmean(instruction, diff)
        out[np.searchsorted(data.instructions, ids.astype(np.int64))] = means
    return out


def _tau_difference_predictor(
    data: UnitData, predictions: Predictions, a: Array, b: Array, fixed: UnitData
) -> Array:
    """Per instruction: ``tau_b(predictor, A) - tau_b(predictor, B)`` over its responses."""
    inst = np.searchsorted(data.instructions, np.asarray(predictions.instruction, dtype=np.int64))
    model_of = {m: k for k, m in enumerate(data.models)}
    col = np.array([model_of[str(m)] for m in np.asarray(predictions.model).astype(str)])
    shape = (data.instructions.shape[0], len(data.models))
    ma, mb = np.full(shape, np.nan), np.full(shape, np.nan)
    ma[inst, col], mb[inst, col] = _as_float(a), _as_float(b)
    tau_a, _, _ = _tau_b_padded(fixed.f_correct, ma)
    tau_b, _, _ = _tau_b_padded(fixed.f_correct, mb)
    result: Array = tau_a - tau_b
    return result
