"""Issue 24's lower findings (4) and applicants' findings (5), one test (or a few) each.

The second factor's are in test_second_factor.py, the cache's in tests/test_cache.py and
test_multiprocess_limits.py, the record reads' in test_audit.py.
"""

import pytest
from django.urls import reverse

from review.models import AuditEvent

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


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
