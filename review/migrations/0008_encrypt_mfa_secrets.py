"""Encrypt the TOTP secrets and recovery-code seeds stored in clear before MFA_ENCRYPTION_KEY.

Idempotent: values already encrypted (``fernet:`` prefix) are left alone. Reversible.
"""

from django.db import migrations


def _convert(apps, convert):
    Authenticator = apps.get_model("mfa", "Authenticator")
    for authenticator in Authenticator.objects.all().iterator():
        data = dict(authenticator.data)
        for key in ("secret", "seed"):
            if isinstance(data.get(key), str):
                data[key] = convert(data[key])
        if isinstance(data.get("migrated_codes"), list):
            data["migrated_codes"] = [convert(code) for code in data["migrated_codes"]]
        if data != authenticator.data:
            authenticator.data = data
            authenticator.save(update_fields=["data"])


def encrypt(apps, schema_editor):
    from review.adapters import ENCRYPTED_PREFIX, mfa_encrypt

    _convert(apps, lambda v: v if v.startswith(ENCRYPTED_PREFIX) else mfa_encrypt(v))


def decrypt(apps, schema_editor):
    from review.adapters import mfa_decrypt

    _convert(apps, mfa_decrypt)


class Migration(migrations.Migration):
    dependencies = [
        ("review", "0007_shared_cache_table"),
        ("mfa", "0003_authenticator_type_uniq"),
    ]

    operations = [migrations.RunPython(encrypt, decrypt)]
