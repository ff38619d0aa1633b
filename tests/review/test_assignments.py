"""Bulk assignment: overlap, balance, never twice; the command, the admin page, the demo."""

import re
from collections import Counter

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from review.demo.assignments import DEMO_CLINICIANS, demo_assignments
from review.models import Assignment, AuditEvent, ErrorTag, Role
from review.services.assignments import assignments_create, assignments_plan
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def instructions(db):
    dataset = review_data.make_dataset("assign")
    patient = review_data.make_record(dataset, "P-A", n_events=20)
    return [
        review_data.make_instruction(
            dataset,
            patient,
            f"I-A-{i}",
            n_responses=1,
            specialty="Cardiology" if i % 2 else "Oncology",
            category="diagnosis support" if i % 3 == 0 else "information retrieval",
        )
        for i in range(10)
    ]


@pytest.fixture
def clinicians(db):
    return [factories.make_user(f"c{i}@example.edu", roles=[Role.CLINICIAN]) for i in range(3)]


def test_every_instruction_gets_the_overlap_balanced_across_clinicians(instructions, clinicians):
    plan = assignments_create(
        instructions=instructions, clinicians=clinicians, overlap=2, actor=None
    )
    assert plan.created == 20 and plan.short == 0
    per_instruction = Counter(Assignment.objects.values_list("instruction_id", flat=True))
    assert set(per_instruction.values()) == {2}
    per_clinician = Counter(Assignment.objects.values_list("clinician_id", flat=True))
    assert max(per_clinician.values()) - min(per_clinician.values()) <= 1
    audit = AuditEvent.objects.get(action=AuditEvent.Action.ASSIGNMENTS_CREATED)
    assert audit.details["created"] == 20


def test_it_never_assigns_the_same_instruction_twice_and_tops_up(instructions, clinicians):
    # One instruction already has a reviewer: it needs one more, never the same person.
    factories.assign(instructions[0], clinicians[0])
    assignments_create(instructions=instructions, clinicians=clinicians, overlap=2, actor=None)
    again = assignments_create(
        instructions=instructions, clinicians=clinicians, overlap=2, actor=None
    )
    assert again.created == 0 and again.already_full == 10
    pairs = list(Assignment.objects.values_list("instruction_id", "clinician_id"))
    assert len(pairs) == len(set(pairs)) == 20
    # Raising the overlap tops every instruction up to it, still without repeats.
    assignments_create(instructions=instructions, clinicians=clinicians, overlap=3, actor=None)
    assert Assignment.objects.count() == 30
    short = assignments_plan(instructions=instructions, clinicians=clinicians, overlap=4)
    assert short.created == 0 and short.short == 10  # only three clinicians exist


def test_existing_load_steers_new_work_to_the_least_loaded(instructions, clinicians):
    for instruction in instructions[:6]:
        factories.assign(instruction, clinicians[0])
    plan = assignments_plan(instructions=instructions[6:], clinicians=clinicians, overlap=1)
    assert plan.per_clinician == {"c0@example.edu": 0, "c1@example.edu": 2, "c2@example.edu": 2}


def test_the_plan_is_deterministic(instructions, clinicians):
    first = assignments_plan(instructions=instructions, clinicians=clinicians, overlap=2)
    second = assignments_plan(
        instructions=list(reversed(instructions)), clinicians=clinicians[::-1], overlap=2
    )
    assert first.pairs == second.pairs


def test_the_assign_command_filters_by_specialty_and_clinicians(instructions, clinicians):
    call_command(
        "assign",
        "--dataset",
        "assign",
        "--overlap",
        "1",
        "--specialty",
        "cardiology",
        "--clinicians",
        "c1@example.edu,c2@example.edu",
    )
    assigned = Assignment.objects.select_related("instruction", "clinician")
    assert {a.instruction.specialty for a in assigned} == {"Cardiology"}
    assert {a.clinician.email for a in assigned} == {"c1@example.edu", "c2@example.edu"}
    assert assigned.count() == 5
    with pytest.raises(CommandError):
        call_command("assign", "--dataset", "nope")
    outsider = factories.make_user("applicant@example.edu")
    with pytest.raises(CommandError, match="not approved"):
        call_command("assign", "--dataset", "assign", "--clinicians", outsider.email)


def test_the_admin_page_previews_then_creates(client, instructions, clinicians):
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    outsider = factories.make_user("applicant@example.edu")
    client.force_login(admin)
    url = reverse("admin_assign")
    page = client.get(url)
    assert page.status_code == 200
    choices = {str(u.pk) for u in page.context["form"].fields["clinicians"].queryset}
    assert choices == {str(c.pk) for c in clinicians}  # approved clinicians only
    assert str(outsider.pk) not in choices
    form = {
        "dataset": instructions[0].dataset_id,
        "category": "diagnosis support",
        "overlap": 2,
        "clinicians": [c.pk for c in clinicians],
    }
    preview = client.post(url, {**form, "action": "preview"})
    assert preview.status_code == 200
    assert preview.context["plan"].created == 8  # 4 diagnosis-support instructions x 2
    assert Assignment.objects.count() == 0
    created = client.post(url, {**form, "action": "create"})
    assert created.status_code == 302
    assert Assignment.objects.count() == 8
    assert set(Assignment.objects.values_list("assigned_by", flat=True)) == {admin.pk}


def test_demo_assignments_need_the_demo_clinicians(instructions):
    lines = demo_assignments(dataset_name="assign")
    assert "no demo clinicians" in lines[0]
    for email in DEMO_CLINICIANS:
        factories.make_user(email, roles=[Role.CLINICIAN])
    lines = demo_assignments(dataset_name="assign")
    assert "20 new" in lines[0]
    assert Assignment.objects.count() == 20
    assert "0 new" in demo_assignments(dataset_name="assign")[0]  # idempotent


def test_default_error_tags_are_seeded():
    assert list(ErrorTag.objects.values_list("slug", flat=True)) == [
        "factual-error",
        "omission",
        "unsupported",
        "outdated",
        "unsafe",
        "not-followed",
    ]


def test_the_admin_page_assigns_in_the_round_it_names_never_silently_the_newest(
    client, instructions, clinicians
):
    # Walk-through finding: with a second round present, the page put new work into it without
    # saying so; an admin topping up Round 1 filled Round 2.
    from review.services.studies import study_create

    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    dataset = instructions[0].dataset
    first = factories.study_for(dataset)
    second = study_create(dataset=dataset, name="Round 2", actor=admin)
    client.force_login(admin)
    url = reverse("admin_assign")
    form = {
        "dataset": dataset.pk,
        "category": "diagnosis support",
        "overlap": 1,
        "clinicians": [c.pk for c in clinicians],
    }
    refused = client.post(url, {**form, "action": "preview"})
    assert refused.status_code == 200 and refused.context["plan"] is None
    assert "2 rounds" in str(refused.context["form"].errors["study"])
    preview = client.post(url, {**form, "study": first.pk, "action": "preview"})
    assert preview.context["plan"].created == 4
    assert "Round 1" in preview.content.decode()
    created = client.post(url, {**form, "study": first.pk, "action": "create"}, follow=True)
    assert "Round 1" in created.content.decode()
    assert set(Assignment.objects.values_list("study", flat=True)) == {first.pk}
    assert second.pk != first.pk


def test_the_admin_page_marks_clinicians_who_can_also_see_model_names(
    client, instructions, clinicians
):
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.RESEARCHER])
    client.force_login(admin)
    page = client.get(reverse("admin_assign")).content.decode()
    label = page[page.index("both@example.edu") :][:300]
    assert "also a researcher" in label
    plain = page[page.index(clinicians[0].email) :][:120]
    assert "also a researcher" not in plain


def test_the_assign_page_lists_only_the_chosen_datasets_rounds_each_named_once(
    client, instructions
):
    # The walk-through found every dataset's rounds offered, each named twice ("demo: Round 2
    # (Round 2: …)"), so a round of another dataset was one slip away.
    from review.models import Dataset
    from review.services.studies import study_create

    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    dataset = instructions[0].dataset
    first = factories.put_in_study(*instructions)
    second = study_create(dataset=dataset, name="Round 2: new prompts", actor=admin)
    other = Dataset.objects.create(name="zz-other", is_synthetic=True)
    elsewhere = study_create(dataset=other, name="Round 1", actor=admin)
    factories.sign_in(client, admin)
    html = client.get(reverse("admin_assign")).content.decode()
    select = re.search(r'<select name="study".*?</select>', html, re.S).group(0)
    options = dict(re.findall(r'<option value="(\d+)"([^>]*)>', select))
    labels = re.findall(r'<option value="\d+"[^>]*>([^<]*)</option>', select)
    # "assign" comes first by name: its two rounds are offered, zz-other's is not.
    assert "hidden" not in options[str(first.pk)] and "hidden" not in options[str(second.pk)]
    assert "hidden" in options[str(elsewhere.pk)] and "disabled" in options[str(elsewhere.pk)]
    assert f'data-dataset="{dataset.pk}"' in options[str(second.pk)]
    assert "Round 2: new prompts" in labels and "Round 2: Round 2" not in select
    assert "review/assign.js" in html
    # Posted for the other dataset: its round is the one offered.
    html = client.post(
        reverse("admin_assign"),
        {"dataset": other.pk, "overlap": 1, "action": "preview"},
    ).content.decode()
    select = re.search(r'<select name="study".*?</select>', html, re.S).group(0)
    options = dict(re.findall(r'<option value="(\d+)"([^>]*)>', select))
    assert "hidden" not in options[str(elsewhere.pk)] and "hidden" in options[str(first.pk)]
    # A preview names the round once, with its dataset.
    c = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    html = client.post(
        reverse("admin_assign"),
        {
            "dataset": dataset.pk,
            "study": second.pk,
            "overlap": 1,
            "clinicians": [c.pk],
            "action": "preview",
        },
    ).content.decode()
    study_line = re.search(r'data-testid="assign-study">(.*?)</p>', html, re.S).group(1)
    assert re.sub(r"<[^>]+>", "", study_line) == "Study: Round 2: new prompts of assign"
