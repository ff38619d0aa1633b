from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "review"
    verbose_name = "Review: records, accounts and clinician judgements"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from review import receivers  # noqa: F401 - connects the audit-trail receivers
