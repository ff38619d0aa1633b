from django.db import migrations, models

# The demo's simulated clinicians were recognised by their address until this field existed;
# mark the ones already in a database so that their reviews stay apart from real ones.
SIMULATED_PREFIX = "simulated-"
SIMULATED_DOMAIN = "@demo.medalign.local"


def mark_simulated(apps, schema_editor):
    User = apps.get_model("review", "User")
    User.objects.filter(
        email__startswith=SIMULATED_PREFIX, email__endswith=SIMULATED_DOMAIN
    ).update(is_simulated=True)


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0022_flag_every_unblinding_reviewer"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="is_simulated",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(mark_simulated, migrations.RunPython.noop),
    ]
