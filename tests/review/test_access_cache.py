"""The access evaluation cached in the shared cache (review/access.py, ACCESS_CACHE_SECONDS):
used between requests, cleared at once by a revocation, a role change and a new DUA version,
and never trusted past an approval's or a certificate's expiry (keyed by date).

The signed-in user read from the same entry is tested in test_cached_user.py.
"""

from datetime import timedelta
from unittest.mock import patch

import pytest
from django.urls import reverse
from django.utils import timezone

from review.models import AccessApplication, Role
from review.services import accounts as services
from tests import factories

pytestmark = pytest.mark.django_db


def test_the_access_evaluation_is_cached_between_requests(world, client, settings):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    # A raw update sends no signal: the cached answer is still used (what makes it cheap) ...
    AccessApplication.objects.filter(user=world.clinician).update(is_clinician=False)
    assert client.get(reverse("clinician_queue")).status_code == 200
    # ... and never for longer than ACCESS_CACHE_SECONDS (0: not cached).
    settings.ACCESS_CACHE_SECONDS = 0
    assert client.get(reverse("clinician_queue"))["Location"] == reverse("application_status")


def test_revocation_clears_the_cached_access_at_once(world, client):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    application = AccessApplication.objects.get(user=world.clinician, status="approved")
    services.application_revoke(application=application, reviewer=world.admin, reason="Left.")
    assert client.get(reverse("clinician_queue"))["Location"] == reverse("application_status")


def test_a_role_change_clears_the_cached_access_at_once(world, client):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    application = AccessApplication.objects.get(user=world.clinician, status="approved")
    services.application_set_roles(
        application=application,
        reviewer=world.admin,
        roles=[Role.RESEARCHER],
        expires_on=timezone.localdate() + timedelta(days=30),
    )
    assert client.get(reverse("clinician_queue")).status_code == 403  # not for a researcher


def test_an_expired_approval_or_certificate_ends_the_cached_access(world, client):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    application = AccessApplication.objects.get(user=world.clinician, status="approved")
    application.certificate_expires_on = timezone.localdate() - timedelta(days=1)
    application.save(update_fields=["certificate_expires_on"])
    assert client.get(reverse("clinician_queue"))["Location"] == reverse("application_status")


def test_an_approval_ending_today_ends_at_midnight_despite_the_cache(world, client):
    client.force_login(world.clinician)
    application = AccessApplication.objects.get(user=world.clinician, status="approved")
    today = timezone.localdate()
    AccessApplication.objects.filter(pk=application.pk).update(expires_on=today)
    factories.clear_cached_access(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200  # cached for today
    with patch("review.access.timezone.localdate", return_value=today + timedelta(days=1)):
        assert client.get(reverse("clinician_queue"))["Location"] == reverse("application_status")


def test_a_new_dua_version_clears_everyones_cached_access(world, client):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    services.dua_publish(version="9.9", text="New terms.", actor=world.admin)
    assert client.get(reverse("clinician_queue"))["Location"] == reverse("application_status")
