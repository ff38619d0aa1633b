"""medalign_site/middleware.py: the signed-in user read at once (UserMiddleware), a session's
absolute lifetime from its sign-in (IdleSessionTimeoutMiddleware), and the security headers (SecurityHeadersMiddleware): no
caching of anything served to a signed-in user, the CSP enforced in every mode.

The idle timeout and the headers outside DEBUG are tested in tests/review/test_accounts.py
and tests/review/test_security.py.
"""

import time

import pytest
from django.contrib.auth.models import AnonymousUser
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.urls import reverse
from django.utils.functional import LazyObject

from medalign_site.middleware import UserMiddleware

# The review app's fixtures: one user and object of each kind (``world``); certificates in a
# private folder of the test's own and a clean shared cache (autouse).
from tests.review.conftest import _private_storage_and_clean_cache  # noqa: F401 - a fixture
from tests.review.conftest import world as world  # noqa: F401 - a fixture
from tests.review.review_data import note_url

pytestmark = pytest.mark.django_db


# --- the user is read at once, as Django's middleware would read it on first use ---------------
def _through_user_middleware(client) -> HttpRequest:
    request = RequestFactory().get("/")
    request.COOKIES.update({k: v.value for k, v in client.cookies.items()})
    seen = []

    def view(request: HttpRequest) -> HttpResponse:
        seen.append(request)
        return HttpResponse()

    SessionMiddleware(UserMiddleware(view))(request)
    return seen[0]


def test_a_signed_in_request_carries_its_user_itself_not_a_lazy_wrapper(world, client):
    client.force_login(world.clinician)
    request = _through_user_middleware(client)
    assert not isinstance(request.user, LazyObject)
    assert request.user == world.clinician and request.user.is_authenticated
    # Django's asynchronous accessor is kept.
    assert callable(request.auser)


def test_a_request_without_a_session_is_anonymous(world, client):
    request = _through_user_middleware(client)
    assert isinstance(request.user, AnonymousUser)


def test_a_deactivated_account_is_signed_out_by_the_eager_read(world, client):
    client.force_login(world.clinician)
    world.clinician.is_active = False
    world.clinician.save()
    assert isinstance(_through_user_middleware(client).user, AnonymousUser)


# --- a session has an absolute lifetime from its sign-in ----------------------------------------
def test_a_busy_session_still_ends_twelve_hours_after_its_sign_in(world, client, settings):
    client.force_login(world.clinician)
    assert client.get(reverse("clinician_queue")).status_code == 200
    # Requests every few minutes kept moving expire_date: the session never ended. The sign-in
    # time is kept in the session and caps it, whatever the activity since.
    session = client.session
    session["_signed_in_at"] = int(time.time()) - settings.SESSION_COOKIE_AGE - 1
    session["_last_seen"] = int(time.time()) - 60
    session.save()
    response = client.get(reverse("clinician_queue"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("account_login"))


def test_a_session_within_its_lifetime_carries_on(world, client, settings):
    client.force_login(world.clinician)
    session = client.session
    assert session["_signed_in_at"] <= time.time()
    session["_signed_in_at"] = int(time.time()) - settings.SESSION_COOKIE_AGE + 120
    session.save()
    assert client.get(reverse("clinician_queue")).status_code == 200


# --- security headers: no-store for signed-in users, the CSP in every mode ----------------------
@pytest.mark.parametrize("url_name", ["clinician_queue", "audit_log", "scoring_reports", "home"])
def test_pages_for_signed_in_users_are_never_stored_by_caches(world, client, url_name):
    client.force_login(world.admin)
    response = client.get(reverse(url_name))
    assert "no-store" in response["Cache-Control"]


def test_a_record_endpoint_is_never_stored_by_caches(world, client):
    client.force_login(world.clinician)
    response = client.get(note_url(world))
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]


def test_the_csp_is_enforced_in_debug_too(world, client, settings):
    settings.DEBUG = True
    response = client.get(reverse("account_login"))
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert "Content-Security-Policy-Report-Only" not in response
