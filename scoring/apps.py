from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"
    verbose_name = "Scoring: metrics, correlation reports and exports"
    default_auto_field = "django.db.models.BigAutoField"
