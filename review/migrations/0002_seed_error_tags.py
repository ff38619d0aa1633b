# Seeds the default error tags clinicians attach to responses; admins edit them afterwards.

from django.db import migrations

DEFAULT_TAGS = [
    ("factual-error", "Factual error", "States something the record or medicine contradicts."),
    ("omission", "Omission", "Leaves out information needed to answer."),
    ("unsupported", "Unsupported by the record", "Claims something the record does not show."),
    ("outdated", "Outdated information", "Uses older data when newer data exists."),
    ("unsafe", "Unsafe recommendation", "Could harm the patient if followed."),
    ("not-followed", "Did not follow the instruction", "Answers a different question or task."),
]


def seed(apps, schema_editor):
    ErrorTag = apps.get_model("review", "ErrorTag")
    for order, (slug, label, description) in enumerate(DEFAULT_TAGS, start=1):
        # get_or_create: an admin's edits to an existing tag are never overwritten.
        ErrorTag.objects.get_or_create(
            slug=slug, defaults={"label": label, "description": description, "order": order}
        )


def unseed(apps, schema_editor):
    # Tags already used in judgements stay; only unused defaults are removed.
    ErrorTag = apps.get_model("review", "ErrorTag")
    ResponseJudgement = apps.get_model("review", "ResponseJudgement")
    used = ResponseJudgement.error_tags.through.objects.values_list("errortag_id", flat=True)
    ErrorTag.objects.filter(slug__in=[t[0] for t in DEFAULT_TAGS]).exclude(pk__in=used).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(seed, unseed),
    ]
