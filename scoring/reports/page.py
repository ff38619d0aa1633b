"""What the report page shows: the charts and the tables of a stored report, formatted.

Every number reaches the page through ``scoring.reports.formatting``: an interval that could not
be computed says why, a p-value at the resolution of its resampling says "<", undefined is
"n/a" everywhere.
"""

from collections.abc import Callable
from typing import Any

from django.utils.safestring import SafeString, mark_safe

from review.models import response_label
from scoring.reports import plots
from scoring.reports.formatting import interval, number, p_value
from scoring.reports.statistics import MIN_CLUSTERS
from scoring.reports.statistics.intervals import INTERVAL_METHOD
from scoring.reports.wording import clinician_place, clinicians_beaten

# Points drawn per scatter plot: hundreds of circles per metric made the page heavy (983 KB with
# five metrics) and add nothing a reader can see; a deterministic stride sample keeps the shape
# (the per-response export has every row).
SCATTER_MAX_POINTS = 400


def _svg(document: str) -> SafeString:
    # plots.py escapes every piece of text it draws, so its output is safe to inline.
    # Charts carry no style attribute (the CSP refuses inline styles): scoring.css sizes them.
    return mark_safe(document)  # noqa: S308


def _chart(draw: Callable[..., str], *args: Any, **kwargs: Any) -> SafeString:
    """A chart drawn once, in its phone layout (``compact=True``: about a phone's width, labels
    above the intervals), which scoring.css lets grow to a column's width on a wide screen.
    Drawn twice (a wide drawing beside it for desktops) the report weighed 983 KB with five
    metrics; scaled down to a phone, the wide drawing's 12-unit text came out at 5 px."""
    return _svg(f'<div class="chart-one">{draw(*args, compact=True, **kwargs)}</div>')


# --- figures -----------------------------------------------------------------------------------
def _ci(row: dict[str, Any] | None, value: str, lo: str, hi: str, note: str = "") -> str:
    row = row or {}
    return interval(
        row.get(value), row.get(lo), row.get(hi), note=row.get(note, "") if note else ""
    )


def report_page(results: dict[str, Any]) -> dict[str, Any]:
    """The charts (inline SVG) and formatted tables of the report page."""
    correlation = results.get("correlation", [])
    ceiling = results.get("human_ceiling") or {}
    labels = {m["key"]: m["label"] for m in results.get("metrics", [])}
    clustering = results.get("clustering") or {"unit": "instruction"}
    unit = clustering.get("unit", "instruction")
    tau_rows = [
        {"label": r["label"], "value": r["mean_tau"], "lo": r["ci_low"], "hi": r["ci_high"]}
        for r in correlation
    ]
    if ceiling:
        tau_rows.append(
            {
                "label": "Clinician vs clinician (ceiling)",
                "value": ceiling.get("mean_tau"),
                "lo": ceiling.get("ci_low"),
                "hi": ceiling.get("ci_high"),
            }
        )
    accuracy_rows = [
        {
            "label": r["label"],
            "value": r["pairwise_accuracy"],
            "lo": r["pairwise_ci_low"],
            "hi": r["pairwise_ci_high"],
        }
        for r in correlation
    ]
    leaderboard = results.get("leaderboard", [])
    win = results.get("win_rate", {"models": [], "matrix": []})
    bias = results.get("position_bias", {})
    return {
        "clustering": clustering,
        # The size from which the intervals' coverage was checked by simulation (bench_coverage).
        "default_min_clusters": MIN_CLUSTERS,
        "interval_method": INTERVAL_METHOD,
        "interval_caption": f"{INTERVAL_METHOD} intervals over {unit}s",
        "correlation_chart": _chart(
            plots.interval_chart,
            tau_rows,
            "Agreement with clinicians: mean per-review Kendall's tau-b",
            f"Kendall's tau-b ({INTERVAL_METHOD} over {unit}s)",
        )
        if tau_rows
        else None,
        "accuracy_chart": _chart(
            plots.interval_chart,
            accuracy_rows,
            "Pairwise accuracy (pooled over pairs)",
            "Share of pairs ordered as clinicians (dashed: chance, 0.5)",
            (0, 1),
            reference=0.5,
        )
        if accuracy_rows
        else None,
        "win_chart": _chart(plots.heatmap, win["models"], win["matrix"], "Win rate (row vs column)")
        if win["models"]
        else None,
        "correct_chart": _chart(
            plots.bar_chart,
            [
                {
                    "label": r["model"],
                    "value": r["share_correct"],
                    "lo": r["correct_ci_low"],
                    "hi": r["correct_ci_high"],
                }
                for r in leaderboard
            ],
            f"Share judged correct ({INTERVAL_METHOD} over {unit}s)",
            "Share correct",
        )
        if leaderboard
        else None,
        "bt_chart": _chart(
            plots.bar_chart,
            [
                {
                    "label": r["model"],
                    "value": r["bt_strength"],
                    "lo": r["bt_ci_low"],
                    "hi": r["bt_ci_high"],
                }
                for r in leaderboard
            ],
            "Bradley-Terry strength (percentile bootstrap interval)",
            "log-strength",
        )
        if leaderboard
        else None,
        "position_chart": _chart(
            plots.bar_chart,
            [
                {"label": response_label(p), "value": m, "lo": None, "hi": None}
                for p, m in zip(bias.get("positions", []), bias.get("mean_rank", []), strict=True)
            ],
            "Mean rank by shown position",
            "Mean rank (1 = best)",
        )
        if bias.get("positions")
        else None,
        "scatters": _scatters(results),
        "correlation": [
            _correlation_row(r, (results.get("leave_one_out") or {}).get("n_clinicians"))
            for r in correlation
        ],
        "ceiling": ceiling,
        "ceiling_summary": _ci(ceiling, "mean_tau", "ci_low", "ci_high", "interval_note"),
        "leave_one_out": _leave_one_out(results.get("leave_one_out") or {}, labels),
        "significance": _significance(results.get("significance") or {}, labels),
        "leaderboard": [
            {
                **r,
                "correct": _ci(r, "share_correct", "correct_ci_low", "correct_ci_high"),
                "rank": interval(
                    r.get("mean_rank"), r.get("rank_ci_low"), r.get("rank_ci_high"), 2
                ),
                "bt": interval(r.get("bt_strength"), r.get("bt_ci_low"), r.get("bt_ci_high"), 2),
            }
            for r in leaderboard
        ],
        "style": _style(results.get("style_control")),
        "bias": bias,
        "bias_summary": _ci(bias, "tau", "ci_low", "ci_high", "interval_note"),
        "bias_p": p_value(bias.get("p_value"), at_floor=bool(bias.get("p_at_floor"))),
        "paired": [
            {
                **p,
                "label_a": labels.get(p["metric_a"], p["metric_a"]),
                "label_b": labels.get(p["metric_b"], p["metric_b"]),
                "summary": _ci(p, "difference", "ci_low", "ci_high", "interval_note"),
                "p": p_value(p.get("p_value"), at_floor=bool(p.get("p_at_floor"))),
            }
            for p in results.get("paired_tests", [])
        ],
        "breakdowns": _breakdown_tables(results),
        "context": _context_tables(results.get("context_length") or {}),
        "rubrics": _rubrics(results.get("rubrics")),
        "counts": results.get("counts", {}),
        "labels": labels,
        "ppi": prediction_powered_page(results.get("prediction_powered")),
    }


# --- prediction-powered estimates and the reviews still needed ----------------------------------
TARGET_NAMES = {
    "correct": "Share correct",
    "rank": "Mean rank",
    "bt": "Bradley-Terry strength",
    "win": "Win rate",
}


def prediction_powered_page(section: dict[str, Any] | None) -> dict[str, Any]:
    """The prediction-powered section's rows, formatted; empty when the report has none."""
    if not section:
        return {}
    estimates = section.get("estimates") or {}
    note = estimates.get("interval_note", "")
    rows = []
    for r in estimates.get("rows", []):
        digits = 2 if r["target"] in ("rank", "bt") else 3
        rows.append(
            {
                **r,
                "name": TARGET_NAMES.get(r["target"], r["target"]),
                "subject": f"{r['model']} over {r['versus']}" if r.get("versus") else r["model"],
                "ppi_text": interval(
                    r.get("estimate"), r.get("ci_low"), r.get("ci_high"), digits, note=note
                ),
                "classical_text": interval(
                    r.get("classical"),
                    r.get("classical_ci_low"),
                    r.get("classical_ci_high"),
                    digits,
                    note=note,
                ),
                "width_text": f"{r['width_ratio']:.2f}×"
                if _number(r.get("width_ratio"))
                else "n/a",
                "effective_text": f"{r['effective_reviews']:.0f}"
                if _number(r.get("effective_reviews"))
                else "n/a",
            }
        )
    return {
        **section,
        "rows": rows,
        "plan": power_rows(section.get("power")),
        "effective_text": (
            f"{estimates['effective_reviews_correct']:.0f}"
            if _number(estimates.get("effective_reviews_correct"))
            else "n/a"
        ),
    }


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _need(target: dict[str, Any], method: str, unit: str) -> str:
    """“+N reviews (M patients reviewed in all)”, or why there is no number."""
    units, more = target.get(f"{method}_units"), target.get(f"{method}_more_reviews")
    if units is None:
        if target.get("labelled_units", 0) < 3:
            return "too few reviews to plan from"
        return "no target (no difference to detect)"
    text = "already reached" if not more else f"+{more:,} reviews"
    text += f" ({units:,} {unit}s reviewed in all"
    if target.get(f"{method}_beyond_study"):
        text += f", more than the study's {target.get('total_units'):,}"
    return text + ")"


def power_rows(plan: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per power target: what it asks, and the reviews needed with and without the
    predictor (shared by the report page and the admin's progress page)."""
    if not plan:
        return []
    unit = str(plan.get("unit") or "unit")
    return [
        {
            **t,
            "classical_text": _need(t, "classical", unit),
            "ppi_text": _need(t, "ppi", unit),
        }
        for t in plan.get("targets", [])
    ]


def _correlation_row(r: dict[str, Any], n_clinicians: Any) -> dict[str, Any]:
    return {
        **r,
        "tau": _ci(r, "mean_tau", "ci_low", "ci_high", "interval_note"),
        "pairwise": interval(r.get("pairwise_accuracy"), r.get("pairwise_ci_low"),
                             r.get("pairwise_ci_high")),
        "acc23_text": interval(r.get("acc23"), r.get("acc23_ci_low"), r.get("acc23_ci_high")),
        "epsilon": number(r.get("acc23_epsilon"), 4),
        "system": f"{number(r.get('system_tau'))} (p {p_value(r.get('system_p_value'))}; "
        f"{r.get('n_models', 0)} models)",
        # The same phrase as the leave-one-out section's (wording.clinician_place).
        "loo": clinician_place(r.get("loo_percentile"), n_clinicians, r.get("loo_percentile_ci"),
                               n_at_most=r.get("loo_n_at_most")),
    }  # fmt: skip


def _significance(section: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    if not section:
        return {}
    return {
        **section,
        "clusters": [
            {
                **c,
                "label": labels.get(c["metric"], c["metric"]),
                "tau_text": number(c["tau"]),
                # Too few clusters to test against any other metric: said, never numbered. Both
                # the chips and the correlation table read ``placed`` and ``cluster``.
                "placed": c["cluster"] is not None,
                "cluster": c["cluster"]
                if c["cluster"] is not None
                else "not placed (too few clusters)",
            }
            for c in section.get("clusters", [])
        ],
        "pairs": [
            {
                **t,
                "label_a": labels.get(t["metric_a"], t["metric_a"]),
                "label_b": labels.get(t["metric_b"], t["metric_b"]),
                "better_label": labels.get(t.get("better", ""), t.get("better", "")),
                "p": p_value(
                    t.get("p_two_sided", t.get("p_value")), at_floor=bool(t.get("p_at_floor"))
                ),
                "difference_text": number(t.get("difference")),
            }
            for t in section.get("pairs", [])
        ],
    }


def _leave_one_out(section: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    if not section:
        return {}
    return {
        **section,
        "median_text": number(section.get("median_clinician")),
        "spread": ", ".join(number(c["agreement"]) for c in sorted(
            section.get("clinicians", []), key=lambda c: c["agreement"])),
        "rows": [
            {
                "label": labels.get(key, key),
                "tau": number(m.get("mean_tau")),
                "percentile": clinician_place(m.get("percentile"), section.get("n_clinicians"),
                                              m.get("percentile_ci"), n_at_most=m.get("n_at_most")),
                "beating": clinicians_beaten(m.get("share_beating"), m.get("n_clinicians"),
                                             m.get("share_beating_ci"),
                                             n_beaten=m.get("n_beaten")),
                "at_least_median": m.get("at_least_median"),
            }
            # In the report's order of metrics (a jsonb column does not keep the stored one).
            for key, m in sorted(section.get("metrics", {}).items(),
                                 key=lambda km: (list(labels).index(km[0])
                                                 if km[0] in labels else len(labels), km[0]))
        ],
    }  # fmt: skip


def _style(section: dict[str, Any] | None) -> dict[str, Any]:
    if not section or not section.get("plain"):
        return {}
    plain, controlled = section["plain"], section["controlled"]
    rows = [
        {
            "model": m,
            "plain": interval(plain["strength"].get(m), plain["ci_low"].get(m),
                              plain["ci_high"].get(m), 2),
            "controlled": interval(controlled["strength"].get(m), controlled["ci_low"].get(m),
                                   controlled["ci_high"].get(m), 2),
        }
        for m in sorted(plain["strength"], key=lambda k: -plain["strength"][k])
    ]  # fmt: skip
    # Two columns that say the same thing are one column and the reason.
    same = bool(rows) and all(r["plain"] == r["controlled"] for r in rows)
    # Sorted: PostgreSQL's jsonb does not keep the order the features were stored in.
    constant = sorted(f.replace("_", " ") for f, c in section.get("style_coefficients", {}).items()
                      if not isinstance(c.get("coefficient"), int | float))  # fmt: skip
    if same and constant and len(constant) == len(section.get("style_coefficients", {})):
        reason = (f"no style feature ({', '.join(constant)}) differed between two responses of "
                  "one review, so there was no style to control for")  # fmt: skip
    elif same:
        reason = "controlling for style moved no strength in the second decimal"
    else:
        reason = ""
    return {
        **section,
        "same": same,
        "same_reason": reason,
        "rows": rows,
        "coefficients": [
            {"feature": f.replace("_", " "), "text": interval(c["coefficient"], c["ci_low"],
                                                               c["ci_high"], 2)}
            for f, c in sorted(section.get("style_coefficients", {}).items())
        ],
    }  # fmt: skip


def _context_tables(section: dict[str, Any]) -> dict[str, Any]:
    """The context-length section's rows, with intervals already formatted."""
    return {
        "test": section.get("test", ""),
        "cells": [
            {**c, "correct": _ci(c, "share_correct", "correct_ci_low", "correct_ci_high")}
            for c in section.get("cells", [])
        ],
        "comparisons": [
            {
                **c,
                "correct": _ci(
                    c,
                    "correct_difference",
                    "correct_difference_ci_low",
                    "correct_difference_ci_high",
                ),
                "correct_p": p_value(
                    c.get("correct_difference_p_value"),
                    at_floor=bool(c.get("correct_difference_p_at_floor")),
                ),
                "mcnemar": p_value(c.get("mcnemar_p_value"))
                if c.get("mcnemar_p_value") is not None
                else (c.get("mcnemar_note") or "n/a"),
                "rank": _ci(
                    c, "rank_difference", "rank_difference_ci_low", "rank_difference_ci_high"
                ),
            }  # fmt: skip
            for c in section.get("comparisons", [])
        ],
    }


def _scatters(results: dict[str, Any]) -> list[dict[str, Any]]:
    responses = results.get("responses", [])
    step = max(1, -(-len(responses) // SCATTER_MAX_POINTS))
    sample = responses[::step]
    out = []
    for metric in results.get("metrics", []):
        key = f"score_{metric['key']}"
        points = [(r["rank"], r[key]) for r in sample if r.get(key) is not None and r["rank"]]
        out.append(
            {
                "label": metric["label"],
                "svg": _chart(
                    plots.scatter,
                    points,
                    f"{metric['label']} against clinician rank",
                    "Rank (1 = best)",
                    metric["label"],
                ),
                "shown": len(points),
                "total": sum(1 for r in responses if r.get(key) is not None and r["rank"]),
            }
        )
    return out


def _breakdown_tables(results: dict[str, Any]) -> list[dict[str, Any]]:
    metrics = results.get("metrics", [])
    tables = []
    for by, title in (("category", "Instruction category"), ("specialty", "Author specialty")):
        groups = results.get("breakdowns", {}).get(by, {})
        rows = []
        for value, group in groups.items():
            cells = []
            loo = group.get("leave_one_out") or {}
            for m in metrics:
                c = group["metrics"].get(m["key"], {})
                place = (loo.get("metrics") or {}).get(m["key"], {})
                cells.append(
                    {
                        "label": m["label"],  # the column, named on a phone's card
                        "summary": _ci(c, "mean_tau", "ci_low", "ci_high", "interval_note"),
                        "n": c.get("n_reviews", 0),
                        "loo": clinician_place(
                            place.get("percentile"),
                            loo.get("n_clinicians"),
                            place.get("percentile_ci"),
                            n_at_most=place.get("n_at_most"),
                        )
                        if isinstance(place.get("percentile"), int | float)
                        else "",
                    }
                )
            rows.append(
                {
                    "value": value,
                    "n_reviews": group["n_reviews"],
                    "n_clusters": group.get("n_clusters"),
                    "cells": cells,
                }
            )
        tables.append({"by": by, "title": title, "rows": rows})
    return tables


def _missing(r: dict[str, Any]) -> str:
    """The grader's missing verdicts on a model's responses, and what they bound."""
    n, missing = r.get("n_verdicts") or 0, r.get("n_missing") or 0
    if not n:
        return "no verdicts"
    if not missing:
        return f"none of {n} verdicts missing"
    share = 100 * missing / n
    clinicians = r.get("bound_clinicians")
    beside = f" (clinicians {number(clinicians)})" if isinstance(clinicians, int | float) else ""
    return (
        f"{share:.0f}% of {n} verdicts missing; counted against / for the responses, its mean "
        f"is {number(r.get('bound_low'))} to {number(r.get('bound_high'))} over "
        f"{r.get('bound_n_responses', 0)} responses{beside}"
    )


def _score_rows(
    clinicians: list[dict[str, Any]], grader: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per model: the clinicians' and the grader's mean rubric score side by side (on
    the same responses), HealthBench's aggregates, and the grader's missing verdicts."""
    by_model: dict[str, dict[str, Any]] = {}
    for side, rows in (("clinicians", clinicians), ("grader", grader)):
        for r in rows:
            row = by_model.setdefault(r["model"], {"model": r["model"]})
            row[side] = f"{_ci(r, 'mean', 'ci_low', 'ci_high', 'note')} (n={r['n_responses']})"
            row[f"{side}_healthbench"] = _ci(
                r, "healthbench_mean", "healthbench_ci_low", "healthbench_ci_high", "note"
            )
            if side == "grader":
                of = r.get("n_clinician_responses")
                row["responses"] = (
                    f"{r['n_responses']} of {of}" if of is not None else str(r["n_responses"])
                )
                row["missing"] = _missing(r)
    empty = {"clinicians": "n/a", "grader": "n/a", "clinicians_healthbench": "n/a"}
    empty |= {"grader_healthbench": "n/a", "responses": "", "missing": ""}
    return [empty | by_model[m] for m in sorted(by_model)]


def _agreement(section: dict[str, Any] | None) -> dict[str, Any]:
    if not section:
        return {}
    loo = section.get("leave_one_out") or {}
    pairwise = section.get("pairwise") or {}
    direct = section.get("grader_vs_clinicians") or {}
    clinician_ci = loo.get("clinicians_ci") or [None, None]
    grader_ci = loo.get("grader_ci") or [None, None]
    diff_ci = loo.get("difference_ci") or [None, None]

    def pair(key: str) -> str:
        lo, hi = pairwise.get(f"{key}_ci") or [None, None]
        return interval(pairwise.get(f"{key}_f1"), lo, hi, note=section.get("note", ""))

    return {
        "grader": interval(loo.get("grader_f1"), grader_ci[0], grader_ci[1]),
        "clinicians": interval(loo.get("clinicians_f1"), clinician_ci[0], clinician_ci[1]),
        "difference": interval(loo.get("difference"), diff_ci[0], diff_ci[1]),
        "direct": interval(direct.get("macro_f1"), direct.get("ci_low"), direct.get("ci_high")),
        "direct_kappa": interval(
            direct.get("kappa"), direct.get("kappa_ci_low"), direct.get("kappa_ci_high")
        ),
        "grader_kappa": interval(
            loo.get("grader_kappa"), *(loo.get("grader_kappa_ci") or [None, None])
        ),
        "clinicians_kappa": interval(
            loo.get("clinicians_kappa"), *(loo.get("clinicians_kappa_ci") or [None, None])
        ),
        "n_items": loo.get("n_items", 0),
        "pairwise": {
            "grader": pair("grader"),
            "clinicians": pair("clinicians"),
            "difference": interval(
                pairwise.get("difference"), *(pairwise.get("difference_ci") or [None, None])
            ),
            "n_pairs": pairwise.get("n_pairs", 0),
            "undefined": pairwise.get("n_clinicians_undefined", 0),
        }
        if pairwise
        else {},
        "per_clinician": [
            {
                "rater": r["rater"],
                "f1": number(r.get("macro_f1")),
                "kappa": number(r.get("kappa")),
                "n": r.get("n_items", 0),
                "loo_clinician": number(r.get("loo_clinician_f1")),
                "loo_grader": number(r.get("loo_grader_f1")),
                "loo_n": r.get("loo_items", 0),
                "pairwise": number(r.get("pairwise_f1")),
                "pairwise_n": r.get("pairwise_items", 0),
            }
            for r in section.get("per_clinician", [])
        ],
        "verdict": section.get("verdict", ""),
        "no_verdict": section.get("no_verdict", ""),
        "note": section.get("note", ""),
        "missing": section.get("missing_grader_verdicts", 0),
    }


def _rubrics(section: dict[str, Any] | None) -> dict[str, Any]:
    """The rubric section: scores side by side, and each grader against the clinicians."""
    if not section:
        return {}
    clinicians = section.get("clinicians") or {}
    graders = []
    for g in section.get("graders", []):
        scores = g.get("scores") or {}
        agreement = g.get("agreement") or {}
        tags = sorted(scores.get("per_tag", {}))
        graders.append(
            {
                "label": g["label"],
                "config_id": g["config_id"],
                "prompt": (g.get("provenance") or {}).get("prompt", ""),
                "rows": _score_rows(
                    scores.get("overall", {}).get("clinicians", []),
                    scores.get("overall", {}).get("grader", []),
                ),
                "tags": [
                    {
                        "tag": t,
                        "rows": _score_rows(
                            scores["per_tag"][t].get("clinicians", []),
                            scores["per_tag"][t].get("grader", []),
                        ),
                    }
                    for t in tags
                ],
                "agreement": _agreement(agreement.get("overall")),
                "agreement_tags": [
                    {"name": t, **_agreement(a)}
                    for t, a in sorted((agreement.get("per_tag") or {}).items())
                ],
                "agreement_versions": [
                    {"name": v, **_agreement(a)}
                    for v, a in sorted((agreement.get("per_version") or {}).items())
                ],
            }
        )
    return {
        "n_clinicians": section.get("n_clinicians", 0),
        "n_verdicts": section.get("n_verdicts", 0),
        "n_superseded": section.get("n_superseded", 0),
        "clinician_rows": _score_rows((clinicians.get("overall") or {}).get("clinicians", []), []),
        "graders": graders,
    }


def _pct(value: Any) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "—"


def paper_page(tables: dict[str, Any]) -> dict[str, Any]:
    """The paper-tables page's rows, formatted, each beside the paper's figure."""
    if "empty" in tables:
        return {}
    models = [
        {
            **m,
            "correct": interval(m.get("share_correct"), m.get("correct_ci_low"),
                                m.get("correct_ci_high")),
            "paper_correct_text": _pct(m.get("paper_correct")),
            "win_rate_text": number(m.get("win_rate")),
            "paper_win_rate_text": number(m.get("paper_win_rate")) if m.get("paper_win_rate")
            is not None else "—",
            "rank_text": interval(m.get("mean_rank"), m.get("rank_ci_low"), m.get("rank_ci_high"),
                                  2),
            "paper_rank_text": number(m.get("paper_mean_rank"), 2)
            if m.get("paper_mean_rank") is not None else "—",
        }
        for m in tables.get("models", [])
    ]  # fmt: skip
    context = [
        {
            **c,
            "long_text": _pct(c.get("share_correct_long")),
            "short_text": _pct(c.get("share_correct_short")),
            "difference_text": interval(
                c.get("correct_difference"),
                c.get("correct_difference_ci_low"),
                c.get("correct_difference_ci_high"),
            ),
            "p_text": p_value(
                c.get("correct_difference_p_value"),
                at_floor=bool(c.get("correct_difference_p_at_floor")),
            ),
            "paper_text": _pct(c.get("paper_difference")),
        }
        for c in (tables.get("context_length") or {}).get("comparisons", [])
    ]
    metrics = [
        {
            **m,
            "tau_text": interval(m.get("mean_tau"), m.get("ci_low"), m.get("ci_high"),
                                 note=m.get("interval_note", "")),
            "paper_text": (
                f"{m['paper_tau']:.2f} [{m['paper_ci_low']:.2f}, {m['paper_ci_high']:.2f}]"
                if m.get("paper_tau") is not None else "—"
            ),
        }
        for m in tables.get("metrics", [])
    ]  # fmt: skip
    matching = tables.get("matching") or {}
    declared = {m["model"]: m["paper_label"] for m in matching.get("matched", [])}
    names = [
        {"model": name, "paper_label": declared.get(name, "")}
        for name in sorted(declared.keys() | set(matching.get("unmatched_models", [])))
    ]
    return {
        "paper_models": models,
        "paper_context": context,
        "paper_metrics": metrics,
        "paper_model_names": names,
    }
