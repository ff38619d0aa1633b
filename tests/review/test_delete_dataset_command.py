"""``manage.py delete_dataset``: counts what a dataset holds, deletes it with --yes (refusing
while it holds reviews, unless --with-reviews too), and audits the deletion with the counts.

Django's admin does not delete datasets (it walked every event): see test_admin_records.py.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from review.models import AuditEvent, Dataset, Event
from review.services.reviews import review_get_or_start

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


def test_delete_dataset_counts_then_deletes_and_audits(world):
    Event.objects.create(patient=world.patient, seq=1, event_type="note", text="Synthetic.")
    review_get_or_start(assignment=world.assignment)
    out = StringIO()
    call_command("delete_dataset", "matrix", stdout=out)
    assert "1 events" in out.getvalue() and Dataset.objects.filter(name="matrix").exists()
    with pytest.raises(CommandError, match="1 reviews"):
        call_command("delete_dataset", "matrix", "--yes")
    call_command("delete_dataset", "matrix", "--yes", "--with-reviews", stdout=StringIO())
    assert not Dataset.objects.filter(name="matrix").exists()
    assert not Event.objects.filter(patient_id=world.patient.pk).exists()
    event = AuditEvent.objects.get(action=Action.DATASET_DELETED)
    assert event.details["dataset"] == "matrix" and event.details["deleted"]["events"] == 1
