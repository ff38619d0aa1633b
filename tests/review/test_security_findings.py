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
