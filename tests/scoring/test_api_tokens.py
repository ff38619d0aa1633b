"""API tokens (scoring.reports.services.api_token_create) expire after API_TOKEN_DAYS, and end
with the access, the roles or the password they were made under: a revoked researcher approved
again does not get their old tokens back.

The token API itself (a session is not enough, the owner's current access) is tested in
test_reports.py.
"""

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from review.services import accounts as services
from scoring.models import ApiToken
from scoring.reports import services as report_services
from tests import factories

# The review app's fixtures: one user and object of each kind (``world``); certificates in a
# private folder of the test's own and a clean shared cache (autouse).
from tests.review.conftest import _private_storage_and_clean_cache  # noqa: F401 - a fixture
from tests.review.conftest import world as world  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


def _api_status(key: str) -> int:
    return (
        Client().get(reverse("scoring_api_reports"), HTTP_AUTHORIZATION=f"Bearer {key}").status_code
    )


def test_an_api_token_expires(world, settings):
    token, key = report_services.api_token_create(user=world.researcher, name="script")
    assert token.expires_at is not None
    assert token.expires_at - timezone.now() > timedelta(days=settings.API_TOKEN_DAYS - 1)
    assert _api_status(key) == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert _api_status(key) == 401


def test_a_revoked_researchers_token_stays_dead_when_they_are_approved_again(world):
    _, key = report_services.api_token_create(user=world.researcher, name="script")
    application = world.researcher.applications.get(status="approved")
    services.application_revoke(application=application, reviewer=world.admin, reason="Left.")
    again = factories.make_application(world.researcher)
    factories.open_certificate(world.admin, again)
    services.application_approve(
        application=again,
        reviewer=world.admin,
        roles=["researcher"],
        expires_on=again.certificate_expires_on,
    )
    assert _api_status(key) == 401  # it used to answer 200 again


def test_a_role_change_ends_the_accounts_api_tokens(world):
    _, key = report_services.api_token_create(user=world.researcher, name="script")
    application = world.researcher.applications.get(status="approved")
    services.application_set_roles(
        application=application,
        reviewer=world.admin,
        roles=["researcher", "clinician"],
        expires_on=application.expires_on,
    )
    assert _api_status(key) == 401


def test_a_password_change_ends_the_accounts_api_tokens(world, client):
    _, key = report_services.api_token_create(user=world.researcher, name="script")
    client.force_login(world.researcher)
    new = "a-different-horse-battery"
    response = client.post(
        reverse("account_change_password"),
        {"oldpassword": factories.PASSWORD, "password1": new, "password2": new},
    )
    assert response.status_code == 302
    assert _api_status(key) == 401
