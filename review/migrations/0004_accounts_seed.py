"""Seed the personal-mail domains rejected by default and the first active DUA version."""

from django.db import migrations
from django.utils import timezone

PERSONAL_MAIL_DOMAINS = [
    "gmail.com",
    "googlemail.com",
    "yahoo.com",
    "ymail.com",
    "hotmail.com",
    "live.com",
    "msn.com",
    "outlook.com",
    "icloud.com",
    "me.com",
    "mac.com",
    "aol.com",
    "proton.me",
    "protonmail.com",
    "pm.me",
    "gmx.com",
    "gmx.net",
    "mail.com",
    "yandex.com",
    "zoho.com",
    "qq.com",
    "163.com",
    "tutanota.com",
    "fastmail.com",
    "hey.com",
]

DUA_1_0 = """MedAlign Data Use Agreement, version 1.0

By signing this agreement you ("the Recipient") agree to the following terms as a condition of
access to the MedAlign data (instructions, clinician responses, model responses and de-identified
longitudinal electronic health records) through MedAlign Review.

1. Purpose. You will use the data only for the research use described in your approved
   application: evaluating the quality of language-model answers about patient records.
2. No re-identification. You will not attempt to identify any individual or institution in the
   data, nor link the data with other data for that purpose. If you believe you have identified
   someone, you will stop, tell the data custodians at once, and not disclose it.
3. No redistribution. You will not share the data, or any part of it, with anyone who has not
   signed this agreement and been approved. Access is personal: do not share your account.
4. No third-party services. You will not send the data to any third-party service, including
   hosted language-model APIs, translation or transcription services, or cloud notebooks that are
   not under your institution's control.
5. Secure storage. Any copy you hold will be kept on encrypted, access-controlled storage and
   deleted when your access ends.
6. Training. You have completed human subjects research training and will keep it current; your
   access ends when your certificate expires.
7. Publication. You will not publish any part of the data, including excerpts of records, in
   papers, slides, code repositories or model outputs; aggregate results may be published.
8. Monitoring. Your use of MedAlign Review is logged (sign-ins, records viewed, reviews saved,
   exports) and may be audited.
9. Breach. You will report any actual or suspected breach of this agreement within 24 hours.
   Breaches may lead to revocation of access and notification of your institution.
10. Changes. The data custodians may publish a new version of this agreement; your access is
    suspended until you sign it.
"""


def seed(apps, schema_editor):
    RejectedEmailDomain = apps.get_model("review", "RejectedEmailDomain")
    DUAVersion = apps.get_model("review", "DUAVersion")
    for domain in PERSONAL_MAIL_DOMAINS:
        RejectedEmailDomain.objects.get_or_create(
            domain=domain, defaults={"note": "Personal mail provider (default list)"}
        )
    if not DUAVersion.objects.exists():
        DUAVersion.objects.create(
            version="1.0",
            title="MedAlign Data Use Agreement",
            text=DUA_1_0,
            is_active=True,
            published_at=timezone.now(),
        )


def unseed(apps, schema_editor):
    RejectedEmailDomain = apps.get_model("review", "RejectedEmailDomain")
    RejectedEmailDomain.objects.filter(
        domain__in=PERSONAL_MAIL_DOMAINS, note="Personal mail provider (default list)"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("review", "0003_event_search_indexes")]

    operations = [migrations.RunPython(seed, unseed)]
