"""The design calculator on the assign page and in ``manage.py assign``: the recommendation, and
the mixed design carried out (one clinician, a second on an agreement subset)."""

from collections import Counter
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from django.utils.html import escape

from review.models import Assignment, Instruction, Role, Study
from review.services.assignment_design import agreement_subset
from scoring.reports.study_design import study_design
from tests import factories
from tests.scoring.ppi_data import make_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def reviewed():
    # 120 instructions, the first 40 reviewed by two clinicians; COMET tracks the clinicians.
    d = make_study(n_instructions=120, n_reviewed=40)
    d.clinicians = [factories.make_user(f"new{k}@example.edu", roles=[Role.CLINICIAN])
                    for k in range(3)]  # fmt: skip
    return d


def _preview(client, d, **extra):
    client.force_login(d.admin)
    form = {
        "dataset": d.dataset.pk,
        "overlap": 1,
        "clinicians": [c.pk for c in d.clinicians],
        "action": "preview",
        **extra,
    }
    return client.post(reverse("admin_assign"), form)


def test_the_assign_preview_shows_the_recommended_design_and_what_each_gives_up(client, reviewed):
    page = _preview(client, reviewed)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="design-calculator"' in html
    # The page's numbers are the calculator's, for the same instructions and clinicians.
    plan = study_design(
        dataset=reviewed.dataset,
        study=Study.objects.get(dataset=reviewed.dataset),
        instructions=120,
        patients=120,
        clinicians=3,
    )
    # Every share within 5 points is out of reach of 120 instructions: the page says so, and
    # still gives each reachable target's pick.
    assert plan["every"]["recommended"] is None
    assert "add instructions, or ask less of the target" in html
    top = next(t for t in plan["targets"] if t["key"] == "top_two")
    pick = top["recommended"]
    assert pick is not None and pick["ratio"] < 1.0
    assert f"{pick['label']}, {pick['reviews']} reviews ({pick['ratio_text']})" in html
    # Overlap 1 gives up the agreement sections: the table says so.
    one = next(r for r in plan["every"]["rows"] if r["key"] == "overlap1-classical")
    assert "human ceiling" in one["gives_up"]
    row = html[html.index('data-testid="design-overlap1-classical"') :]
    assert "human ceiling" in row[: row.index("</tr>")]
    assert Assignment.objects.filter(clinician__in=reviewed.clinicians).count() == 0


def test_before_any_review_the_page_plans_on_stated_assumptions(client):
    fresh = make_study(n_instructions=30, n_reviewed=0)
    fresh.clinicians = [factories.make_user("solo@example.edu", roles=[Role.CLINICIAN])]
    html = _preview(client, fresh).content.decode()
    assert escape("No reviews in this round yet: planned on MedAlign's shares correct") in html
    assert 'data-testid="design-recommended"' in html


def test_assign_recommend_prints_the_same_pick_and_writes_nothing(reviewed):
    out = StringIO()
    emails = ",".join(c.email for c in reviewed.clinicians)
    call_command(
        "assign", "--dataset", "ppi", "--recommend", "--clinicians", emails, "--margin", "15",
        stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    plan = study_design(
        dataset=reviewed.dataset, instructions=120, patients=120, clinicians=3, margin=0.15
    )
    pick = plan["every"]["recommended"]
    assert pick is not None and pick["gives_up"] == []
    line = next(x for x in text.splitlines() if x.startswith("Recommended: "))
    assert line.startswith(f"Recommended: {pick['label']}: {pick['reviews']} clinician reviews")
    assert "x the clinician reviews of uniform overlap-2 classical" in line
    overlap = pick["key"].split("-")[0].removeprefix("overlap")
    how = "--overlap 1 --double 10" if pick["key"].startswith("mixed") else f"--overlap {overlap}"
    assert line.endswith(f"assign with {how}")
    assert "Agreement subset: 10 instructions with two clinicians" in text
    assert Assignment.objects.filter(clinician__in=reviewed.clinicians).count() == 0
    with pytest.raises(CommandError, match="--margin"):
        call_command("assign", "--dataset", "ppi", "--recommend", "--margin", "0")
    # An adaptive round: the recommendation still draws no wave, and --double is refused.
    Study.objects.filter(dataset=reviewed.dataset).update(assignment_mode="adaptive")
    out = StringIO()
    call_command("assign", "--dataset", "ppi", "--recommend", "--clinicians", emails, stdout=out)
    assert "assigned adaptively" in out.getvalue() and "Wave" not in out.getvalue()
    assert Assignment.objects.filter(clinician__in=reviewed.clinicians).count() == 0
    with pytest.raises(CommandError, match="adaptive round"):
        call_command("assign", "--dataset", "ppi", "--overlap", "1", "--double", "3")


def test_assign_double_carries_out_the_mixed_design(reviewed):
    # A fresh round: one clinician on each of the 120 instructions, a second on 12, drawn with
    # the seed and recorded with the round.
    from review.services.studies import study_create

    fresh = study_create(dataset=reviewed.dataset, name="Round 2", actor=reviewed.admin)
    for instruction in Instruction.objects.filter(dataset=reviewed.dataset):
        factories.put_in_study(instruction, study=fresh)
    emails = ",".join(c.email for c in reviewed.clinicians)
    out = StringIO()
    call_command(
        "assign", "--dataset", "ppi", "--study", "2", "--overlap", "1", "--double", "12",
        "--seed", "7", "--clinicians", emails, stdout=out,
    )  # fmt: skip
    assert "a second on 12 (the agreement subset, seed 7" in out.getvalue()
    per = Counter(Assignment.objects.filter(study=fresh).values_list("instruction", flat=True))
    assert len(per) == 120 and sorted(Counter(per.values()).items()) == [(1, 108), (2, 12)]
    params = Study.objects.get(pk=fresh.pk).assignment_params
    doubled = sorted(Instruction.objects.filter(pk__in=[k for k, v in per.items() if v == 2])
                     .values_list("instruction_id", flat=True))  # fmt: skip
    assert params["design"] == "mixed" and params["agreement_seed"] == 7
    assert params["agreement_subset"] == doubled
    # The same seed draws the same subset.
    again = agreement_subset(Instruction.objects.filter(dataset=reviewed.dataset), 12, 7)
    assert sorted(i.instruction_id for i in again) == doubled
    with pytest.raises(CommandError, match="--overlap 1"):
        call_command("assign", "--dataset", "ppi", "--overlap", "2", "--double", "3")
    with pytest.raises(CommandError, match="between 1 and 120"):
        call_command("assign", "--dataset", "ppi", "--overlap", "1", "--double", "500")


def test_the_agreement_subset_is_spread_over_patients():
    class Item:
        def __init__(self, pk, person):
            self.pk, self.person_id, self.instruction_id = pk, person, f"I{pk}"

    # 30 patients with 3 instructions each: 20 drawn reach 20 patients; 45 reach all 30.
    items = [Item(k, f"P{k // 3}") for k in range(90)]
    for size, patients in ((20, 20), (45, 30)):
        subset = agreement_subset(items, size, seed=3)
        assert len(subset) == size
        assert len({i.person_id for i in subset}) == patients
    assert [i.pk for i in agreement_subset(items, 20, 3)] != [
        i.pk for i in agreement_subset(items, 20, 4)
    ]
    with pytest.raises(ValueError):
        agreement_subset(items, -1, 0)
