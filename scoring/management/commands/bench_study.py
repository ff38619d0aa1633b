"""Replay a synthetic study with a known truth: coverage, width and reviews saved, per design."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.reports.statistics.study_sim import (
    METHODS,
    PREDICTORS,
    SimStudy,
    bench,
    strength_for_correlation,
)


def chosen_level(value: str) -> tuple[str, float]:
    """``--predictor-correlation`` as ``(label, correlation)``: ``0.7`` or ``demo chrF=0.7``."""
    label, _, number = value.rpartition("=")
    try:
        correlation = float(number)
    except ValueError:
        raise CommandError(f"--predictor-correlation wants [LABEL=]NUMBER, not {value!r}") from None
    if not 0.0 < correlation < 1.0:
        raise CommandError(f"--predictor-correlation {correlation:g} is not between 0 and 1")
    return label.strip() or "chosen", correlation


class Command(BaseCommand):
    help = (
        "Simulate a 303-instruction study of 6 models (known share correct, clinicians who err, "
        "a predictor from useless to good) --replicates times, and print for uniform classical, "
        "prediction-powered (PPI++) and prediction-powered + adaptive assignment: coverage of "
        "the 95%% intervals, mean interval width at --reviews clinician reviews, and the reviews "
        "needed to reach uniform classical's width there."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--replicates", type=int, default=500)
        parser.add_argument("--reviews", type=int, default=240, help="the fixed budget")
        parser.add_argument("--instructions", type=int, default=303)
        parser.add_argument("--overlap", type=int, default=2)
        parser.add_argument("--min-probability", type=float, default=0.1)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--predictor-correlation",
            action="append",
            default=[],
            metavar="[LABEL=]R",
            help="add a predictor whose correlation with the truth is R (e.g. one measured on "
            "the demo: 'demo chrF=0.70'), after the six standard ones; repeatable",
        )
        parser.add_argument(
            "--match",
            choices=("pooled", "within"),
            default="pooled",
            help="which correlation --predictor-correlation sets: pooled over every response "
            "(the one printed per level), or within model (each model centred on its means)",
        )

    def handle(self, *args: object, **o: object) -> None:
        study = SimStudy(
            n_instructions=int(o["instructions"]),  # type: ignore[call-overload]
            overlap=int(o["overlap"]),  # type: ignore[call-overload]
            pi_min=float(o["min_probability"]),  # type: ignore[arg-type]
        )
        replicates = int(o["replicates"])  # type: ignore[call-overload]
        w = self.stdout.write
        predictors = dict(PREDICTORS)
        within = o["match"] == "within"
        chosen = o["predictor_correlation"]
        assert isinstance(chosen, list)
        for value in chosen:
            label, correlation = chosen_level(str(value))
            try:
                strength = strength_for_correlation(study, correlation, within_model=within)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            name = f"{label} ({correlation:.2f}{' within model' if within else ''})"
            predictors[name] = (strength,)
            w(f"predictor {name}: signal strength {strength:.3f}")
        result = bench(
            study,
            replicates=replicates,
            reviews=int(o["reviews"]),  # type: ignore[call-overload]
            seed=int(o["seed"]),  # type: ignore[call-overload]
            predictors=predictors,
        )
        truth = ", ".join(f"{p:.2f}" for p in study.true_correct)
        w(
            f"study: {len(study.true_correct)} models truly correct {truth}; "
            f"{study.n_instructions} instructions; overlap {study.overlap}; clinicians err "
            f"{min(study.clinician_error):.0%}-{max(study.clinician_error):.0%} "
            f"(mean {study.mean_error:.0%}); adaptive: {study.waves} waves, minimum "
            f"probability {study.pi_min:g}"
        )
        # One standard error of a coverage estimated from this many replicates.
        se = (0.95 * 0.05 / replicates) ** 0.5
        w(f"{result.replicates} replicates")
        w(
            f"{result.seconds:.1f} s for all {len(result.predictors)} predictors, "
            f"{result.cpu_seconds:.1f} s of CPU (target: under 60 s)"
        )
        w(f"coverage expected 95% +- {2 * se:.1%} (two standard errors); target >= 94%")
        w(f"fixed budget {result.reviews} clinician reviews")
        w(f"target width {result.target_width:.3f} (uniform classical's, at the fixed budget)")
        for report in result.predictors:
            w(
                f"predictor {report.name}: correlation {report.correlation:.2f} with the truth "
                f"({report.within_correlation:.2f} within model)"
            )
            for method in METHODS:
                label = f"  {report.name} / {method}:"
                w(f"{label} coverage {report.coverage[method]:.1%}")
                w(
                    f"{label} coverage {report.coverage_shares[method]:.1%} of shares, "
                    f"{report.coverage_gaps[method]:.1%} of gaps between neighbours"
                )
                w(
                    f"{label} mean width {report.width[method]:.3f} of gaps at "
                    f"{result.reviews} reviews"
                )
                w(
                    f"{label} mean width {report.width_shares[method]:.3f} of shares at "
                    f"{result.reviews} reviews"
                )
                w(
                    f"{label} {report.reviews_ratio[method]:.2f}x the clinician reviews of "
                    "uniform classical"
                )
        worst = min(min(r.coverage.values()) for r in result.predictors)
        w(f"lowest coverage {worst:.1%} ({'meets' if worst >= 0.94 else 'MISSES'} >= 94%)")
        useless = next((r for r in result.predictors if r.name == "useless"), None)
        if useless is not None:
            excess = max(
                useless.width_shares[m] / useless.width_shares["classical"] for m in METHODS
            )
            w(f"useless predictor: widest {excess:.2f}x classical's width of shares")
        # The target (<= 0.5x) is for a predictor as good as the demo's jury or learned
        # metric; which level that is has to be measured on real data, so name every level's.
        halves = [r for r in result.predictors if r.reviews_ratio["ppi+adaptive"] <= 0.5]
        for r in result.predictors:
            w(
                f"ppi+adaptive with the {r.name} predictor (correlation {r.correlation:.2f}): "
                f"{r.reviews_ratio['ppi+adaptive']:.2f}x the clinician reviews of uniform "
                "classical"
            )
        w(
            "<= 0.5x the clinician reviews of uniform classical with the "
            + (", ".join(r.name for r in halves) + " predictor" if halves else "none of these")
            + ("s" if len(halves) > 1 else "")
        )
