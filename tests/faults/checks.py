"""Checks shared by the load test and the fault drills: nothing lost, nothing twice."""

from django.db.models import Count


def scores_exactly_once(run) -> tuple[bool, str]:  # noqa: ANN001 - a ScoringRun
    """Every scorable response of the run's dataset has exactly one score per configuration."""
    from review.models import ModelResponse
    from scoring.models import MetricScore

    responses = set(
        ModelResponse.objects.filter(
            instruction__dataset=run.dataset, instruction__references__isnull=False
        ).values_list("id", flat=True)
    )
    parts, ok = [], True
    for config in run.configs.all():
        counts = dict(
            MetricScore.objects.filter(config=config, response_id__in=responses)
            .values("response_id")
            .annotate(n=Count("id"))
            .values_list("response_id", "n")
        )
        missing = len(responses - set(counts))
        twice = sum(1 for n in counts.values() if n > 1)
        ok &= not missing and not twice
        parts.append(
            f"{config.backend}: {len(counts)}/{len(responses)} scored, {missing} missing, {twice} twice"
        )
    if not parts:
        return False, "no metric configuration on the run"
    return ok, "; ".join(parts)
