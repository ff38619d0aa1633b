"""Emails are read outside the browser: each names the site and carries absolute links."""

import re
from unittest.mock import patch

import pytest
from django.core import mail
from django.urls import reverse

from review.models import Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db

LINK = re.compile(r"(https?://\S+|(?<!\S)/\S+)")


def links(body: str) -> list[str]:
    return LINK.findall(body)


def test_the_verification_email_names_the_site_and_links_absolutely(client):
    mail.outbox.clear()
    client.post(
        reverse("account_signup"),
        {
            "email": "new@example.edu",
            "password1": "Violet-Harbor-Lantern-42",
            "password2": "Violet-Harbor-Lantern-42",
        },
    )
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject.startswith("[MedAlign Review]")
    assert "Hello from MedAlign Review." in message.body
    assert "Hello from testserver" not in message.body
    found = links(message.body)
    assert any("/accounts/confirm-email/" in url for url in found)
    assert all(url.startswith("http://testserver") for url in found), found


def test_the_password_reset_email_uses_site_url_when_set(client, settings):
    settings.SITE_URL = "https://review.example.org/"
    factories.make_user("pat@example.edu")
    mail.outbox.clear()
    client.post(reverse("account_reset_password"), {"email": "pat@example.edu"})
    assert len(mail.outbox) == 1
    body = mail.outbox[0].body
    assert "MedAlign Review" in body and "https://review.example.org/" in body
    assert all(url.startswith("http") for url in links(body)), links(body)


def test_the_decision_email_names_the_site_and_links_absolutely(settings):
    settings.SITE_URL = "https://review.example.org"
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    application = factories.make_application(factories.make_user("pat@example.edu"))
    mail.outbox.clear()
    with patch("django.db.transaction.on_commit", lambda fn, **kw: fn()):
        services.application_reject(
            application=application, reviewer=admin, reason="Certificate unreadable."
        )
    body = mail.outbox[0].body
    assert "MedAlign Review" in body
    assert "https://review.example.org" + reverse("application_status") in body
    assert all(url.startswith("https://review.example.org") for url in links(body)), links(body)


@pytest.mark.parametrize(
    ("site_url", "expected"),
    [
        ("", "http://review.example.org/access/"),
        ("https://medalign.example.edu", "https://medalign.example.edu/access/"),
    ],
)
def test_decision_emails_link_to_the_sites_address(
    world, client, settings, django_capture_on_commit_callbacks, site_url, expected
):
    settings.SITE_URL = site_url
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "review.example.org"]
    client.force_login(world.admin)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("admin_application_detail", args=[world.pending_application.pk]),
            {"decision": "reject", "reason": "Not eligible."},
            HTTP_HOST="review.example.org",
        )
    assert response.status_code == 302
    decision = [m for m in mail.outbox if m.to == [world.applicant.email]]
    assert len(decision) == 1
    assert expected in decision[0].body and "localhost:8000" not in decision[0].body
