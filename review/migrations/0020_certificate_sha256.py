# Approval needs a view of the certificate on file now: each application keeps its file's sha256
# and when it came. Existing files are hashed here (one that cannot be read is hashed at its
# first view); views audited before this carry no hash, so an admin opens the file once more.

import hashlib

from django.db import migrations, models


def hash_certificates(apps, schema_editor):
    AccessApplication = apps.get_model("review", "AccessApplication")
    for application in AccessApplication.objects.exclude(certificate="").iterator():
        digest = hashlib.sha256()
        try:
            with application.certificate.open("rb") as handle:
                for chunk in handle.chunks():
                    digest.update(chunk)
        except (FileNotFoundError, OSError):
            continue
        AccessApplication.objects.filter(pk=application.pk).update(
            certificate_sha256=digest.hexdigest(), certificate_uploaded_at=application.submitted_at
        )


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0019_grading_save_audited_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="accessapplication",
            name="certificate_sha256",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name="accessapplication",
            name="certificate_uploaded_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(hash_certificates, migrations.RunPython.noop),
    ]
