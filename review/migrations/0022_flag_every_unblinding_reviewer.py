from django.db import migrations


def flag_every_unblinding_reviewer(apps, schema_editor):
    """Flag every review by an account that could read model names or shown orders.

    Migration 0014 flagged reviews by accounts then approved as researchers. Admins (the studies
    pages, the Django admin) and staff (the Django admin) could read them too: their reviews are
    flagged now, and so are reviews by accounts that held researcher or admin access at any time
    (an approval since revoked, a role since taken away: the audit trail keeps the roles each
    change had before and after), since nobody can tell when they looked. Reports leave flagged
    reviews out unless a researcher includes them knowingly.
    """
    AccessApplication = apps.get_model("review", "AccessApplication")
    AuditEvent = apps.get_model("review", "AuditEvent")
    Review = apps.get_model("review", "Review")
    User = apps.get_model("review", "User")
    unblinding = {"researcher", "admin"}
    users = set(
        AccessApplication.objects.filter(status__in=["approved", "revoked"])
        .exclude(is_researcher=False, is_admin=False)
        .values_list("user_id", flat=True)
    )
    users |= set(
        User.objects.filter(is_staff=True).values_list("pk", flat=True)
    ) | set(User.objects.filter(is_superuser=True).values_list("pk", flat=True))
    emails = set()
    for details in AuditEvent.objects.filter(action="role_changed").values_list(
        "details", flat=True
    ):
        if not isinstance(details, dict):
            continue
        held = set(details.get("before") or []) | set(details.get("after") or [])
        if held & unblinding and isinstance(details.get("user"), str):
            emails.add(details["user"])
    if emails:
        users |= set(User.objects.filter(email__in=emails).values_list("pk", flat=True))
    Review.objects.filter(
        assignment__clinician_id__in=users, reviewer_could_unblind=False
    ).update(reviewer_could_unblind=True)


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0021_patient_undescribed_event_count"),
    ]

    operations = [
        migrations.RunPython(flag_every_unblinding_reviewer, migrations.RunPython.noop),
    ]
