"""Issue 24's lower findings (4) and applicants' findings (5), one test (or a few) each.

The second factor's are in test_second_factor.py, the cache's in tests/test_cache.py and
test_multiprocess_limits.py, the record reads' in test_audit.py.
"""

import pytest
from django.test import Client
from django.urls import reverse

from review.models import AuditEvent
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


# --- 4. five wrong passwords lock an account out of one address, not out of everywhere ---------
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


# --- 4. a NUL byte in a parameter is a 400, never a 500 (PostgreSQL refuses NUL in text) ---------
def test_a_nul_byte_in_a_record_parameter_is_refused_not_a_server_error(world, client):
    import json

    client.force_login(world.clinician)
    events = reverse("record_events", args=[world.instruction.pk])
    assert client.get(events, {"type": "note\x00"}).status_code == 400
    search = client.post(
        reverse("record_search", args=[world.instruction.pk]),
        json.dumps({"q": "chest\x00pain"}),
        content_type="application/json",
    )
    assert search.status_code == 400
    assert client.get(reverse("clinician_queue"), {"category": "x\x00"}).status_code == 200
