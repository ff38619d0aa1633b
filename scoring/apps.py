from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Scoring: metrics, correlation reports and exports"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Kinds of run register with the run machinery when their module is imported: every
        # process (web, worker, beat's sweep) then knows them all.
        from scoring.runs import scoring  # noqa: F401
