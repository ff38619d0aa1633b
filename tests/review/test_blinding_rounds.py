"""Rounds do not unblind a study.

An admin's free-text round name ("Round 2: adds Atlas-70B (OpenAI fine-tune)") was shown in
every clinician's queue: the name says which model is new, and a clinician who ranked round 1
could then tell the new model's responses apart. These tests are the clinician: they collect
everything a clinician receives (pages, titles, JSON, redirects, emails) in a study of two
rounds and look for the name in it; and they assign a copied round, whose responses a clinician
of the first round has already ranked.
"""

import json
import re

import pytest
from django.contrib.messages import get_messages
from django.core import mail
from django.urls import reverse

from review.models import Assignment, Event, ModelResponse, Review, Role, Study
from review.services import studies as study_services
from review.services.assignments import assignments_create, assignments_plan
from review.services.reviews import review_get_or_start, review_reopen
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db

ROUND_NAME = "Round 2: adds Atlas-70B (OpenAI fine-tune)"
FIRST_NAME = "Pilot of SecretModel-Alpha-70B"
# Words of the two names that say nothing a clinician may read.
LEAKS = ("Atlas", "OpenAI", "fine-tune", "adds", "Pilot", "SecretModel")


@pytest.fixture
def study():
    dataset = review_data.make_dataset("rounds")
    patient = review_data.make_record(dataset, "P-ROUNDS", n_events=40)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    instructions = [
        review_data.make_instruction(dataset, patient, f"R-{i}", n_responses=3) for i in range(2)
    ]
    firsts = [review_data.assign(i, clinician) for i in instructions]
    first = factories.study_for(dataset)
    Study.objects.filter(pk=first.pk).update(name=FIRST_NAME)
    second = study_services.study_create(
        dataset=dataset, name=ROUND_NAME, actor=admin, copy_responses_from=first
    )
    for instruction in instructions:
        ModelResponse.objects.create(
            instruction=instruction, model_name="Atlas-70B@4096", text="A new model's answer."
        )
    study_services.study_add_responses(
        study=second,
        responses=ModelResponse.objects.filter(model_name="Atlas-70B@4096"),
        source="model Atlas-70B@4096",
        actor=admin,
    )
    again = factories.assign(instructions[0], clinician, study=second, fill=False)
    return dataset, admin, clinician, instructions, first, second, firsts, again


def _edits(review: Review) -> list[dict]:
    return [
        e
        for position, handle in enumerate(review.handles)
        for e in (
            {"handle": handle, "field": "rank", "value": position + 1, "at": 1},
            {"handle": handle, "field": "is_correct", "value": True, "at": 1},
        )
    ]


def _title(html: str) -> str:
    return re.search(r"<title>(.*?)</title>", html, re.S).group(1)


def test_nothing_a_clinician_receives_carries_a_round_name(
    client, study, django_capture_on_commit_callbacks
):
    dataset, admin, clinician, instructions, first, second, firsts, again = study
    factories.sign_in(client, clinician)
    received: dict[str, str] = {}

    def get(label: str, url: str, **params: str) -> None:
        response = client.get(url, params)
        assert response.status_code in (200, 302), (label, response.status_code)
        received[label] = response.content.decode() + response.get("Location", "")

    get("home", reverse("home"))
    get("queue", reverse("clinician_queue"))
    for status in ("new", "draft", "submitted"):
        get(f"queue {status}", reverse("clinician_queue"), status=status)
    get("next", reverse("clinician_next"))
    get("next after", reverse("clinician_next"), after=str(firsts[1].pk))
    for study_ in (first, second):
        url = reverse("clinician_review", args=[instructions[0].pk])
        get(f"review {study_.round}", url, study=str(study_.pk))
    get("review latest", reverse("clinician_review", args=[instructions[0].pk]))
    get("rubric work", reverse("rubric_work"))
    pk = instructions[0].pk
    get("excerpt", reverse("record_excerpt", args=[pk]))
    get("events", reverse("record_events", args=[pk]))
    event = Event.objects.filter(patient=instructions[0].patient).first()
    get("event", reverse("record_event", args=[pk, event.pk]))
    received["search"] = client.post(
        reverse("record_search", args=[pk]),
        data=json.dumps({"q": "creatinine"}),
        content_type="application/json",
    ).content.decode()
    for assignment in (firsts[0], again):
        review = Review.objects.get(assignment=assignment)
        body = json.dumps({"tab": "t", "edits": _edits(review)})
        for name in ("review_save", "review_submit"):
            response = client.post(
                reverse(name, args=[review.pk]), data=body, content_type="application/json"
            )
            assert response.status_code == 200, response.content
            received[f"{name} {assignment.study.round}"] = response.content.decode()
    get("queue after submit", reverse("clinician_queue"))
    get("review read-only", reverse("clinician_review", args=[pk]), study=str(second.pk))
    # The reopened email, and the review page and queue the clinician then opens.
    reopened = Review.objects.get(assignment=again)
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        review_reopen(review=reopened, actor=admin, reason="Please look again.")
    received["email"] = "\n".join(m.subject + "\n" + m.body for m in mail.outbox)
    assert received["email"]
    get("queue reopened", reverse("clinician_queue"))
    get("review reopened", reverse("clinician_review", args=[pk]), study=str(second.pk))

    for label, text in received.items():
        for word in LEAKS:
            assert word.lower() not in text.lower(), (label, word)
    # The queue tells the two rounds apart by number alone.
    queue = received["queue"]
    assert "Round 1" in queue and "Round 2" in queue
    rounds = re.findall(r'data-testid="queue-round">([^<]*)<', queue)
    assert sorted(rounds) == ["Round 1", "Round 2"]
    # No page title names a round either.
    for label in ("queue", "review 1", "review 2", "review reopened"):
        title = _title(received[label])
        assert "Round" not in title and "Atlas" not in title, (label, title)


def test_the_admin_is_warned_when_a_round_name_names_a_model(client, study):
    dataset, admin, *_ = study
    factories.sign_in(client, admin)
    response = client.post(
        reverse("admin_study_new_round", args=[dataset.pk]),
        {"name": "Round 3: Atlas-70B against GPT-4o"},
        follow=True,
    )
    warnings = [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]
    assert len(warnings) == 1, warnings
    assert "Atlas-70B" in warnings[0] and "GPT-4o" in warnings[0]
    assert "clinicians see “Round 3”" in warnings[0]
    # A neutral name: no warning.
    response = client.post(
        reverse("admin_study_new_round", args=[dataset.pk]),
        {"name": "Round 4: new prompts"},
        follow=True,
    )
    assert not [m for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]
    # The studies page keeps warning, round by round, and names what clinicians see.
    page = client.get(reverse("admin_studies", args=[dataset.pk])).content.decode()
    flagged = re.findall(r'data-testid="round-name-warning" data-round="(\d+)"', page)
    assert flagged == ["1", "2", "3"]  # the first round's name names SecretModel-Alpha
    assert "Clinicians see only “Round N”" in page


def test_a_round_label_names_its_number_once():
    from review.selectors.studies import clinician_round_label, study_label

    assert study_label(2, "Round 2: adds a model") == "Round 2: adds a model"
    assert study_label(2, "round 2 – adds a model") == "Round 2: adds a model"
    assert study_label(2, "Round 2") == "Round 2"
    assert study_label(2, "with the new model") == "Round 2: with the new model"
    assert study_label(2, "Round 21 rerun") == "Round 2: Round 21 rerun"
    assert clinician_round_label(2) == "Round 2"


# --- a copied round goes to clinicians who did not rank its responses -------------------------------
@pytest.fixture
def copied():
    dataset = review_data.make_dataset("copied")
    patient = review_data.make_record(dataset, "P-COPIED", n_events=10)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    people = [factories.make_user(f"c{i}@example.edu", roles=[Role.CLINICIAN]) for i in range(4)]
    instructions = [
        review_data.make_instruction(dataset, patient, f"C-{i}", n_responses=3) for i in range(3)
    ]
    first = factories.put_in_study(*instructions)
    assignments_create(
        instructions=instructions, clinicians=people[:2], overlap=2, actor=admin, study=first
    )
    second = study_services.study_create(
        dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first
    )
    return dataset, admin, people, instructions, first, second


def test_a_copied_round_goes_to_clinicians_who_did_not_rank_it_before(copied):
    dataset, admin, people, instructions, first, second = copied
    # c0 and c1 ranked these responses in round 1: in round 2 they would see the same ones
    # again, and whatever is new there would stand out.
    plan = assignments_plan(instructions=instructions, clinicians=people, overlap=2, study=second)
    chosen = {c for _, c in plan.pairs}
    assert chosen == {people[2].pk, people[3].pk}
    assert plan.created == 6 and plan.short == 0
    assert plan.repeats_left_out == 6 and plan.shared_instructions == 3
    # With only the round-1 clinicians to choose from, the round stays short, and says why.
    short = assignments_plan(
        instructions=instructions, clinicians=people[:2], overlap=2, study=second
    )
    assert short.created == 0 and short.short == 3 and short.repeats_left_out == 6
    # The admin may ask for them knowingly.
    knowingly = assignments_plan(
        instructions=instructions,
        clinicians=people[:2],
        overlap=2,
        study=second,
        repeat_reviewers=True,
    )
    assert knowingly.created == 6 and knowingly.repeats_left_out == 0


def test_a_round_of_new_responses_only_may_go_to_the_same_clinicians(copied):
    dataset, admin, people, instructions, first, second = copied
    fresh = study_services.study_create(dataset=dataset, name="Round 3", actor=admin)
    for instruction in instructions:
        ModelResponse.objects.create(
            instruction=instruction, model_name="Other-LM", text="Another answer."
        )
    study_services.study_add_responses(
        study=fresh,
        responses=ModelResponse.objects.filter(model_name="Other-LM"),
        source="model Other-LM",
        actor=admin,
    )
    plan = assignments_plan(
        instructions=instructions, clinicians=people[:2], overlap=2, study=fresh
    )
    # Nothing in round 3 was shown in round 1: nothing to recognise.
    assert plan.created == 6 and plan.repeats_left_out == 0


def test_the_assign_page_says_who_was_left_out_of_a_copied_round_and_why(client, copied):
    dataset, admin, people, instructions, first, second = copied
    factories.sign_in(client, admin)
    form = {
        "dataset": dataset.pk,
        "study": second.pk,
        "overlap": 2,
        "clinicians": [p.pk for p in people[:3]],
    }
    page = client.post(reverse("admin_assign"), {**form, "action": "preview"}).content.decode()
    notice = re.search(r'data-testid="assign-repeats"[^>]*>(.*?)</', page, re.S).group(1)
    assert "3 instructions" in notice and "Round 1" in notice
    assert "6" in notice  # the (instruction, clinician) pairs left out
    assert 'name="repeat_reviewers"' in page
    client.post(reverse("admin_assign"), {**form, "action": "create"})
    holders = set(Assignment.objects.filter(study=second).values_list("clinician_id", flat=True))
    assert holders == {people[2].pk}  # short, rather than a clinician who could compare
    # Ticked: the round-1 clinicians are assigned too, and the page said what it costs.
    client.post(reverse("admin_assign"), {**form, "repeat_reviewers": "on", "action": "create"})
    assert Assignment.objects.filter(study=second).count() == 6


def test_the_assign_command_leaves_out_repeat_reviewers_unless_asked(copied, capsys):
    from django.core.management import call_command

    dataset, admin, people, instructions, first, second = copied
    emails = ",".join(p.email for p in people[:2])
    call_command(
        "assign", "--dataset", dataset.name, "--study", "2", "--clinicians", emails, "--dry-run"
    )
    out = capsys.readouterr().out
    assert "Would create 0 assignments" in out
    assert "6 (instruction, clinician) pairs left out" in out and "--repeat-reviewers" in out
    call_command(
        "assign",
        "--dataset",
        dataset.name,
        "--study",
        "2",
        "--clinicians",
        emails,
        "--repeat-reviewers",
    )
    assert Assignment.objects.filter(study=second).count() == 6


def test_a_review_opened_in_round_one_is_not_reused_in_round_two(client, copied):
    # The guard the rule relies on: each round's review is its own, with its own order.
    dataset, admin, people, instructions, first, second = copied
    a1 = Assignment.objects.filter(study=first, clinician=people[0]).first()
    review_get_or_start(assignment=a1)
    assignments_create(
        instructions=[a1.instruction],
        clinicians=[people[0]],
        overlap=1,
        actor=admin,
        study=second,
        repeat_reviewers=True,
    )
    a2 = Assignment.objects.get(study=second, clinician=people[0])
    assert review_get_or_start(assignment=a2).pk != a1.review.pk
