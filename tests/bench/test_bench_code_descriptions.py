"""``bench_code_descriptions`` prints its figures on a synthetic dataset it deletes afterwards,
and never touches a dataset of that name holding real data."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from review.models import Dataset, Event
from tests.bench.management.commands.bench_code_descriptions import DATASET

pytestmark = pytest.mark.django_db


def test_it_times_the_service_beside_the_bare_update_and_cleans_up(capsys) -> None:
    call_command("bench_code_descriptions", "--events", "3000")
    out = capsys.readouterr().out
    for label in ("import (MEDS, no descriptions)", "baseline: bare UPDATE", "ratio to the bare"):
        assert label in out
    renamed = next(line for line in out.splitlines() if "code_descriptions_apply" in line)
    assert int(renamed.split()[-2].replace(",", "")) > 2000  # most rows are described
    assert not Dataset.objects.filter(name=DATASET).exists()
    assert not Event.objects.exists()


def test_it_refuses_a_dataset_of_its_name_that_is_not_synthetic() -> None:
    Dataset.objects.create(name=DATASET, is_synthetic=False)
    with pytest.raises(CommandError, match="not synthetic"):
        call_command("bench_code_descriptions", "--events", "100")
    assert Dataset.objects.filter(name=DATASET).exists()
