from django.apps import AppConfig


def _endpoint_allowed(endpoint: str) -> bool | str:
    # Read on every request (no cache): an endpoint an admin disables stops at once.
    from scoring.llm.backends import ALLOW_PUBLIC
    from scoring.models import GenerationEndpoint

    row = (
        GenerationEndpoint.objects.filter(url=endpoint, enabled=True)
        .values_list("allow_public_address", flat=True)
        .first()
    )
    if row is None:
        return False
    return ALLOW_PUBLIC if row else True


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Scoring: metrics, correlation reports and exports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Kinds of run register with the run machinery when their module is imported: every
        # process (web, worker, beat's sweep) then knows them all.
        # The generation backends are plain Python and allow no endpoint by default; the app's
        # allowlist is the admin's GenerationEndpoint rows.
        from scoring import receivers  # noqa: F401 - API tokens end with access changes
        from scoring.generation import runs as generation_runs  # noqa: F401
        from scoring.grading import runs as grading_runs  # noqa: F401
        from scoring.llm import backends
        from scoring.runs import scoring  # noqa: F401

        backends.set_allowlist(_endpoint_allowed)

        # A generation run only produces candidates: its output joins a study only once the
        # run is complete (review.services.studies asks every registered check).
        from review.services.studies import register_candidate_check
        from scoring.generation.study import unfinished_run_refusal

        register_candidate_check(unfinished_run_refusal)
