"""The database cache table: the embedded shared cache (rate limits, TOTP replay protection,
sessions) needs nothing beyond ``migrate``. With Redis configured there is nothing to create."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("review", "0006_audit_mfa_and_token_actions")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
