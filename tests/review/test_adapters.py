"""The allauth adapters (review/adapters.py): failed sign-ins limited per account and address
together, and per address; second-factor secrets encrypted at rest (migration 0008 encrypts
those stored before, with the same cipher).

The limits across web processes (gunicorn) are in test_multiprocess_limits.py.
"""

import importlib

import pytest
from allauth.mfa.models import Authenticator
from django.apps import apps as django_apps
from django.test import Client
from django.urls import reverse

from review.adapters import ENCRYPTED_PREFIX
from review.allauth_compat import TOTP
from review.models import AuditEvent
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


# --- failed sign-ins: limited per account and address, and per address -------------------------
def test_wrong_passwords_from_one_address_do_not_lock_the_account_elsewhere(world):
    attacker, owner = Client(REMOTE_ADDR="203.0.113.7"), Client(REMOTE_ADDR="192.0.2.20")
    email = world.clinician.email
    for _ in range(6):
        attacker.post(reverse("account_login"), {"login": email, "password": "wrong"})
    refused = attacker.post(
        reverse("account_login"), {"login": email, "password": factories.PASSWORD}
    )
    assert refused.status_code == 200  # locked out of this account from that address ...
    response = owner.post(
        reverse("account_login"), {"login": email, "password": factories.PASSWORD}
    )
    assert response.status_code == 302  # ... but the clinician signs in from theirs
    assert response["Location"].startswith(reverse("mfa_authenticate"))


def test_failures_from_one_address_do_not_lock_out_a_clinician_elsewhere(world, client, settings):
    # Behind the TLS proxy every request came from the proxy's address: 10 failures from one
    # attacker refused the right password of everyone. Now limits count the client's address.
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1
    for i in range(40):
        client.post(
            reverse("account_login"),
            {"login": f"guess{i}@example.edu", "password": "wrong"},
            HTTP_X_FORWARDED_FOR="203.0.113.66",
        )
    blocked = client.post(
        reverse("account_login"),
        {"login": world.clinician.email, "password": factories.PASSWORD},
        HTTP_X_FORWARDED_FOR="203.0.113.66",
    )
    assert blocked.status_code in (200, 429)  # the attacker's own address is limited ...
    response = client.post(
        reverse("account_login"),
        {"login": world.clinician.email, "password": factories.PASSWORD},
        HTTP_X_FORWARDED_FOR="192.0.2.10",
    )
    assert response.status_code == 302  # ... the clinician's is not
    assert reverse("mfa_authenticate") in response["Location"]


def test_failures_per_account_are_limited(world, client):
    for _ in range(5):
        client.post(reverse("account_login"), {"login": world.clinician.email, "password": "wrong"})
    checked = AuditEvent.objects.filter(action=Action.LOGIN_FAILED).count()
    client.post(reverse("account_login"), {"login": world.clinician.email, "password": "wrong"})
    assert checked == 5
    assert AuditEvent.objects.filter(action=Action.LOGIN_FAILED).count() == 5  # not checked


# --- second-factor secrets: encrypted at rest ---------------------------------------------------
def test_totp_secrets_are_encrypted_at_rest_and_still_verify(world):
    authenticator = Authenticator.objects.get(user=world.clinician, type="totp")
    stored = authenticator.data["secret"]
    assert stored.startswith(ENCRYPTED_PREFIX) and factories.TOTP_SECRET not in stored
    assert TOTP(authenticator).validate_code(factories.totp_code_fresh())


def test_the_migration_encrypts_secrets_stored_in_clear(world):
    migration = importlib.import_module("review.migrations.0008_encrypt_mfa_secrets")
    Authenticator.objects.filter(user=world.clinician, type="totp").update(
        data={"secret": factories.TOTP_SECRET}
    )
    migration.encrypt(django_apps, None)
    authenticator = Authenticator.objects.get(user=world.clinician, type="totp")
    assert authenticator.data["secret"].startswith(ENCRYPTED_PREFIX)
    assert TOTP(authenticator).validate_code(factories.totp_code_fresh())
    migration.encrypt(django_apps, None)  # idempotent
    again = Authenticator.objects.get(pk=authenticator.pk)
    assert again.data["secret"] == authenticator.data["secret"]
