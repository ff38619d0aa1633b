"""bench_review runs end to end on a small record: a benchmark that cannot run measures nothing
(it stopped when assignments came to belong to a study round)."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from review.models import Assignment


@pytest.mark.django_db
def test_bench_review_times_every_endpoint_on_a_small_record() -> None:
    out = StringIO()
    call_command("bench_review", events=600, requests=2, rebuild=True, stdout=StringIO())
    # Rebuilt at another size (other generated responses): the first run's started review
    # fixed its round's response set, so the bench dataset cannot be replaced in place.
    call_command("bench_review", events=800, requests=2, rebuild=True, stdout=out)

    text = out.getvalue()
    assert "p50 ms" in text, text
    assignment = Assignment.objects.get(clinician__email__startswith="bench")
    # The bench clinician ranks the set of the instruction's round, as a real one would.
    assert assignment.study.dataset_id == assignment.instruction.dataset_id


@pytest.mark.django_db
def test_bench_review_rebuilds_only_a_synthetic_dataset() -> None:
    from review.models import Dataset

    Dataset.objects.create(name="real", is_synthetic=False)
    with pytest.raises(CommandError, match="not a synthetic dataset"):
        call_command("bench_review", dataset="real", events=600, rebuild=True, stdout=StringIO())
    assert Dataset.objects.filter(name="real").exists()


@pytest.mark.django_db
def test_bench_review_never_reviews_in_a_dataset_that_is_not_synthetic() -> None:
    """Without --rebuild a record already there is used as it is: in a real dataset the bench
    clinician would be assigned, draw an order and autosave fake judgements among real ones."""
    from review.models import Dataset, Patient

    real = Dataset.objects.create(name="real", is_synthetic=False)
    Patient.objects.create(dataset=real, person_id="1", event_count=5_000)
    with pytest.raises(CommandError, match="not a synthetic dataset"):
        call_command("bench_review", dataset="real", events=1, requests=2, stdout=StringIO())
    assert not Assignment.objects.exists()
