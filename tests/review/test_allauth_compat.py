"""The names taken from allauth's internal modules still behave as this project relies on.

An allauth upgrade that moves or changes one fails here, by name, rather than in a sign-in.
"""

import base64

import pytest
from django.test import RequestFactory

from review import allauth_compat as compat
from tests import factories

pytestmark = pytest.mark.django_db


def test_hotp_values_are_rfc_4226s():
    # RFC 4226, appendix D: the secret "12345678901234567890" (base32 here), counters 0 and 9.
    secret = base64.b32encode(b"12345678901234567890").decode()
    assert compat.format_hotp_value(compat.hotp_value(secret, 0)) == "755224"
    assert compat.format_hotp_value(compat.hotp_value(secret, 9)) == "520489"


def test_totp_and_recovery_codes_enrol_an_account():
    user = factories.make_user("compat@example.edu", totp=False)
    compat.TOTP.activate(user, "JBSWY3DPEHPK3PXP")
    compat.RecoveryCodes.activate(user)
    assert set(user.authenticator_set.values_list("type", flat=True)) == {"totp", "recovery_codes"}
    assert isinstance(compat.SECRET_SESSION_KEY, str) and compat.SECRET_SESSION_KEY


def test_the_client_address_is_the_sockets_without_a_trusted_proxy():
    request = RequestFactory().get("/", REMOTE_ADDR="192.0.2.7", HTTP_X_FORWARDED_FOR="6.6.6.6")
    assert compat.get_client_ip(request) == "192.0.2.7"


def test_rate_limit_keys_and_rates_are_read_as_the_app_reads_them():
    request = RequestFactory().post("/", REMOTE_ADDR="192.0.2.7")
    rates = compat.ratelimit.get_rates(app="allauth.account", action="login_failed")
    assert rates and all(r.amount > 0 and r.duration > 0 for r in rates)
    key = compat.ratelimit.get_cache_key(
        request, app="allauth.account", action="login_failed", rate=rates[0], key="k"
    )
    assert isinstance(key, str) and key


def test_record_authentication_marks_the_session(client):
    user = factories.make_user("compat2@example.edu")
    request = RequestFactory().get("/")
    request.session = client.session
    compat.record_authentication(request, user, "mfa", type="totp")
    records = request.session["account_authentication_methods"]
    assert records[-1]["method"] == "mfa" and records[-1]["type"] == "totp"
