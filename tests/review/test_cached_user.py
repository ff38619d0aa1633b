"""The signed-in user read from the shared access entry (review.auth_backends).

A request on the annotation path used to read its user row every time; the row now travels in
the access entry. These tests pin that it saves the query and that nothing about signing a user
out got weaker: a deactivated, deleted or re-passworded account is seen by the very next
request, and the password hash never enters the cache.
"""

import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.access import _access_key, cached_user, clear_cached_access, user_access
from review.models import Role, User
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def clinician(db) -> User:
    return factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])


def _queue(client: Client):  # noqa: ANN202 - a response
    return client.get(reverse("clinician_queue"))


def _user_reads(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if 'FROM "review_user"' in q["sql"]]


def test_a_signed_in_request_reads_no_user_row_once_the_entry_is_cached(client, clinician):
    client.force_login(clinician)
    assert _queue(client).status_code == 200  # evaluates access, writes the entry
    with CaptureQueriesContext(connection) as captured:
        assert _queue(client).status_code == 200
    assert _user_reads(captured) == []


def test_with_caching_off_every_request_reads_the_user(client, clinician, settings):
    settings.ACCESS_CACHE_SECONDS = 0
    client.force_login(clinician)
    _queue(client)
    with CaptureQueriesContext(connection) as captured:
        assert _queue(client).status_code == 200
    assert len(_user_reads(captured)) == 1


def test_the_cache_never_holds_the_password_hash(client, clinician):
    client.force_login(clinician)
    _queue(client)
    entry = cache.get(_access_key(clinician.pk))
    assert entry is not None
    stored = json.dumps(entry, default=str).encode()
    assert clinician.password.encode() not in stored
    assert clinician.password.split("$")[-1].encode() not in stored  # nor its digest
    user, _ = cached_user(clinician.pk)
    assert user is not None and "password" in user.get_deferred_fields()


def test_a_deactivated_account_is_signed_out_by_the_next_request(client, clinician):
    client.force_login(clinician)
    assert _queue(client).status_code == 200
    clinician.is_active = False
    clinician.save(update_fields=["is_active"])  # as the admin's change form does
    answer = _queue(client)
    assert answer.status_code == 302 and reverse("account_login") in answer["Location"]


def test_deleting_an_account_clears_its_entry(db):
    # Accounts that signed in are kept (their audit rows protect them); one that never did can
    # be deleted, and no request may find it in the cache afterwards.
    user = User.objects.create_user("gone@example.edu", "x" * 20)
    user._access_generation = cached_user(user.pk)[1]  # as the backend notes it
    user_access(user)
    assert cached_user(user.pk)[0] is not None
    User.objects.filter(pk=user.pk).delete()  # a queryset delete still sends post_delete
    assert cached_user(user.pk)[0] is None


def test_a_changed_password_ends_the_accounts_other_sessions(clinician):
    other = Client()
    factories.sign_in(other, clinician)
    assert _queue(other).status_code == 200  # the entry is cached with the old session hash
    clinician.set_password("another-horse-battery-staple")
    clinician.save()
    answer = _queue(other)
    assert answer.status_code == 302 and reverse("account_login") in answer["Location"]


def test_saving_a_cached_user_keeps_their_password(client, clinician):
    client.force_login(clinician)
    _queue(client)
    user, _ = cached_user(clinician.pk)
    assert user is not None
    user.full_name = "Dr Renamed"
    user.save()  # only the loaded fields are written: the deferred password is left alone
    stored = User.objects.get(pk=clinician.pk)
    assert stored.full_name == "Dr Renamed"
    assert stored.check_password(factories.PASSWORD)


def test_a_cached_user_keeps_their_session_after_setting_a_password_on_it(client, clinician):
    # The cached check value must not outlive a password set on the instance itself (the
    # password change view updates the session's hash from it).
    client.force_login(clinician)
    _queue(client)
    user, _ = cached_user(clinician.pk)
    assert user is not None
    before = user.get_session_auth_hash()
    user.set_password("another-horse-battery-staple")
    assert user.get_session_auth_hash() != before


@pytest.mark.parametrize("change", ["deactivate", "password"])
def test_a_request_that_read_the_user_before_a_change_cannot_cache_the_old_row(
    client, clinician, change
):
    # Request A misses the cache and reads the user; an admin then deactivates the account (or
    # its password changes), which clears the entry; A, still running, evaluates access and
    # writes the entry back. The next request must not take A's old row from it.
    client.force_login(clinician)
    assert _queue(client).status_code == 200
    clear_cached_access(user_id=clinician.pk)
    missed, generation = cached_user(clinician.pk)
    assert missed is None
    stale = User.objects.get(pk=clinician.pk)
    stale._access_generation = generation  # what the backend notes before A's view runs
    fresh = User.objects.get(pk=clinician.pk)
    if change == "deactivate":
        fresh.is_active = False
    else:
        fresh.set_password("another-horse-battery-staple")
    fresh.save()
    user_access(stale)  # request A writes the entry after the change
    answer = _queue(client)
    assert answer.status_code == 302 and reverse("account_login") in answer["Location"]
