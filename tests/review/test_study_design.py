"""A study is a frozen design: what clinicians rank changes only by an admin's audited step,
never under a started review; every response is masked on the page and in its JSON alike;
an account that could unblind is warned and kept out of reports."""

import html as html_lib
import json
import re
import threading
import time

import pytest
from django.db import connection, connections, transaction
from django.test import RequestFactory
from django.urls import reverse

from review.blinding import MASK
from review.models import Assignment, AuditEvent, ModelResponse, Review, Role, StudyResponse
from review.selectors.studies import response_set_summary, studies_overview
from review.services import studies as services
from review.services.reviews import review_get_or_start, review_open
from tests import factories
from tests.review import review_data
from tests.review.test_blinding_masking import INNOCENT, MODELS, SELF_NAMING

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    dataset = review_data.make_dataset("design")
    patient = review_data.make_record(dataset, "P-DESIGN", n_events=10)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    instructions = [
        review_data.make_instruction(dataset, patient, f"D-{i}", n_responses=3) for i in range(3)
    ]
    assignments = [review_data.assign(i, clinician) for i in instructions]
    return dataset, admin, clinician, instructions, assignments


def _page(client, instruction) -> tuple[str, dict]:
    html = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
    found = re.search(
        r'<script id="review-data" type="application/json">(.*?)</script>', html, re.S
    )
    return html, json.loads(found.group(1))


def _candidate(instruction, name="cand-lm@2048", run=None) -> ModelResponse:
    meta = {"generation": {"run": run}} if run is not None else {}
    return ModelResponse.objects.create(
        instruction=instruction, model_name=name, text="A candidate answer.",
        generation_metadata=meta,
    )  # fmt: skip


def test_a_candidate_never_reaches_a_clinician_until_an_admin_adds_it(client, world):
    dataset, admin, clinician, instructions, _ = world
    for instruction in instructions:
        _candidate(instruction)
    factories.sign_in(client, clinician)
    _, data = _page(client, instructions[1])  # started: this set is frozen now
    assert len(data["responses"]) == 3
    fresh = instructions[2]
    # Not started yet, but a candidate is not in the study: still three.
    study = factories.study_for(dataset)
    assert StudyResponse.objects.filter(study=study, instruction=fresh).count() == 3
    # The admin adds the model: refused whole, since one of its instructions has started.
    with pytest.raises(services.StudyError, match="1 of the 3 instructions"):
        services.study_add_responses(
            study=study,
            responses=ModelResponse.objects.filter(model_name="cand-lm@2048"),
            source="model cand-lm@2048",
            actor=admin,
        )
    assert StudyResponse.objects.filter(study=study).count() == 9
    # Only the unstarted instructions' candidates: added, audited, seen by the clinician.
    change = services.study_add_responses(
        study=study,
        responses=ModelResponse.objects.filter(
            model_name="cand-lm@2048", instruction__in=[instructions[0], fresh]
        ),
        source="model cand-lm@2048",
        actor=admin,
    )
    assert change.added == 2
    assert AuditEvent.objects.filter(action=AuditEvent.Action.STUDY_CHANGED).exists()
    _, data = _page(client, fresh)
    assert len(data["responses"]) == 4
    _, data = _page(client, instructions[1])
    assert len(data["responses"]) == 3


def test_a_new_round_has_its_own_set_and_assignments(client, world):
    dataset, admin, clinician, instructions, assignments = world
    review_get_or_start(assignment=assignments[0])  # round 1 has started
    for instruction in instructions:
        _candidate(instruction)
    first = factories.study_for(dataset)
    second = services.study_create(
        dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first
    )
    assert second.round == 2
    services.study_add_responses(
        study=second,
        responses=ModelResponse.objects.filter(model_name="cand-lm@2048"),
        source="model",
        actor=admin,
    )
    assert response_set_summary(second).models["cand-lm@2048"] == 3
    assert "cand-lm@2048" not in response_set_summary(first).models
    # The same clinician is asked again in round 2: the page opens the latest round's review;
    # ?study= opens round 1's.
    factories.assign(instructions[0], clinician, study=second)
    factories.sign_in(client, clinician)
    _, latest = _page(client, instructions[0])
    assert len(latest["responses"]) == 4
    url = reverse("clinician_review", args=[instructions[0].pk]) + f"?study={first.pk}"
    assert client.get(url).status_code == 200
    assert Review.objects.filter(assignment__instruction=instructions[0]).count() == 2


def test_retired_candidates_never_join_and_study_responses_cannot_be_retired(world):
    dataset, admin, _, instructions, _ = world
    candidate = _candidate(instructions[0])
    assert services.responses_retire(responses=[candidate], actor=admin) == 1
    candidate.refresh_from_db()
    assert candidate.retired_at is not None
    with pytest.raises(services.StudyError, match="retired"):
        services.study_add_responses(
            study=factories.study_for(dataset), responses=[candidate], source="x", actor=admin
        )
    in_set = ModelResponse.objects.filter(studies__isnull=False).first()
    with pytest.raises(services.StudyError, match="only candidates"):
        services.responses_retire(responses=[in_set], actor=admin)


def test_the_admin_studies_page_adds_removes_and_refuses(client, world):
    dataset, admin, clinician, instructions, assignments = world
    for instruction in instructions:
        _candidate(instruction)
    factories.sign_in(client, admin)
    page = client.get(reverse("admin_studies", args=[dataset.pk]))
    assert page.status_code == 200 and b"cand-lm@2048" in page.content
    study = factories.study_for(dataset)
    add = reverse("admin_study_add_model", args=[study.pk])
    client.post(add, {"model_name": "cand-lm@2048"})
    assert StudyResponse.objects.filter(study=study).count() == 12
    client.post(
        reverse("admin_study_remove_model", args=[study.pk]), {"model_name": "cand-lm@2048"}
    )
    assert StudyResponse.objects.filter(study=study).count() == 9
    review_get_or_start(assignment=assignments[0])
    response = client.post(add, {"model_name": "cand-lm@2048"}, follow=True)
    assert b"a started instruction" in response.content
    assert StudyResponse.objects.filter(study=study).count() == 9
    # A clinician cannot reach any of it.
    factories.sign_in(client, clinician)
    assert client.get(reverse("admin_studies", args=[dataset.pk])).status_code in (403, 404)
    assert client.post(add, {"model_name": "cand-lm@2048"}).status_code in (403, 404)


def test_every_response_is_masked_on_the_page_and_in_its_json(client, world):
    dataset, _, clinician, _, _ = world
    patient = review_data.make_record(dataset, "P-MASK", n_events=5)
    sentences = [s for s, _ in SELF_NAMING] + INNOCENT
    factories.sign_in(client, clinician)
    for k in range(0, len(sentences), 8):
        instruction = review_data.make_instruction(dataset, patient, f"M-{k}", n_responses=0)
        for j, sentence in enumerate(sentences[k : k + 8]):
            # Never flagged at import: masking happens at render for every response.
            # The set's models are the table's (a self-naming answer names its own model).
            name = MODELS[j] if j < len(MODELS) else f"m{j}"
            ModelResponse.objects.create(
                instruction=instruction, model_name=name, text=f"{sentence} Plan: continue."
            )
        review_data.assign(instruction, clinician)
        html, data = _page(client, instruction)
        cards = " ".join(re.findall(r'<div class="response-text">(.*?)</div>', html, re.S))
        previews = " ".join(r["preview"] for r in data["responses"])
        for sentence, gone in SELF_NAMING[k : k + 8] if k < len(SELF_NAMING) else []:
            for word in gone:
                assert html_lib.escape(word).lower() not in cards.lower(), (sentence, word)
                assert word.lower() not in previews.lower(), (sentence, word)
        for sentence in sentences[k : k + 8]:
            if sentence in INNOCENT:
                assert html_lib.escape(sentence) in cards, sentence
        assert (MASK in html) == any(s in dict(SELF_NAMING) for s in sentences[k : k + 8])


def test_an_account_that_could_unblind_is_warned_and_kept_out_of_reports(client, world):
    dataset, _, _, instructions, _ = world
    both = factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.RESEARCHER])
    assignment = review_data.assign(instructions[0], both)
    factories.sign_in(client, both)
    html, _ = _page(client, instructions[0])
    assert 'data-testid="dual-role"' in html
    review = Review.objects.get(assignment=assignment)
    assert review.reviewer_could_unblind
    plain = factories.make_user("plain@example.edu", roles=[Role.CLINICIAN])
    plain_assignment = review_data.assign(instructions[0], plain)
    factories.sign_in(client, plain)
    html, _ = _page(client, instructions[0])
    assert 'data-testid="dual-role"' not in html
    assert not Review.objects.get(assignment=plain_assignment).reviewer_could_unblind


def test_mask_check_flags_every_hit_and_clears_the_rest(world, capsys):
    from django.core.management import call_command

    dataset, _, _, instructions, _ = world
    named = ModelResponse.objects.create(
        instruction=instructions[0], model_name="x-lm", text="As GPT\u20114, I suggest rest."
    )
    stale = ModelResponse.objects.filter(instruction=instructions[1]).first()
    ModelResponse.objects.filter(pk=stale.pk).update(names_own_model=True)
    call_command("mask_check", "--dataset", dataset.name)
    out = capsys.readouterr().out
    assert "GPT\u20114" in out and "1 of 10 responses had model names masked" in out
    named.refresh_from_db()
    stale.refresh_from_db()
    assert named.names_own_model and not stale.names_own_model


def test_an_installation_can_forbid_the_clinician_researcher_combination(settings, world):
    from review.access import clear_cached_access, user_access
    from review.services.accounts import AccountsError

    both = factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.RESEARCHER])
    assert user_access(both).is_clinician
    settings.FORBID_CLINICIAN_RESEARCHER = True
    clear_cached_access(both)
    both.refresh_from_db()
    access = user_access(both)
    assert access.is_researcher and not access.is_clinician  # keeps the side that cannot bias
    applicant = factories.make_user("new@example.edu")
    with pytest.raises(AccountsError, match="FORBID_CLINICIAN_RESEARCHER"):
        factories.make_approved(applicant, [Role.CLINICIAN, Role.RESEARCHER])


def test_a_clinician_asked_in_two_rounds_reaches_each_from_the_queue_and_next(client, world):
    # Walk-through finding: the queue listed the instruction twice, both rows opening the latest
    # round, so the first round's review could not be reached; nothing said which row was which.
    dataset, admin, clinician, instructions, assignments = world
    first = factories.study_for(dataset)
    second = services.study_create(
        dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first
    )
    later = factories.assign(instructions[0], clinician, study=second)
    factories.sign_in(client, clinician)
    page = client.get(reverse("clinician_queue")).content.decode()
    base = reverse("clinician_review", args=[instructions[0].pk])
    assert f'href="{base}?study={first.pk}"' in page
    assert f'href="{base}?study={second.pk}"' in page
    assert "Round 2" in page and "Round 1" in page
    # An instruction asked in one round only keeps its plain link.
    assert f'href="{reverse("clinician_review", args=[instructions[1].pk])}"' in page
    # Each link opens its own round's review.
    client.get(f"{base}?study={first.pk}")
    client.get(f"{base}?study={second.pk}")
    assert {r.assignment_id for r in Review.objects.filter(assignment__clinician=clinician)} == {
        assignments[0].pk,
        later.pk,
    }
    # "Next" names the round wherever the instruction is ambiguous: after the last round-1
    # assignment comes round 2's, and after that, wrapping round, round 1's.
    following = client.get(reverse("clinician_next"), {"after": assignments[2].pk})
    assert following.url == f"{base}?study={second.pk}"
    wrapped = client.get(reverse("clinician_next"), {"after": later.pk})
    assert wrapped.url == f"{base}?study={first.pk}"


def test_a_copied_round_never_makes_candidate_counts_negative(client, world):
    dataset, admin, _, instructions, _ = world
    first = factories.study_for(dataset)
    services.study_create(dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first)
    _, groups = studies_overview(dataset)
    assert [g.candidates for g in groups] == [0] * len(groups)
    factories.sign_in(client, admin)
    page = client.get(reverse("admin_studies", args=[dataset.pk])).content.decode()
    assert "Retire candidates" not in page


def test_add_to_round_is_offered_only_where_it_would_change_the_set(client, world):
    # The walk-through: after copying Round 1, every model offered "Add to round 2", which
    # added nothing (its responses were all there), and "Remove from round N" where it had none.
    dataset, admin, _, instructions, _ = world
    first = factories.study_for(dataset)
    second = services.study_create(
        dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first
    )
    for instruction in instructions:
        _candidate(instruction)
    factories.sign_in(client, admin)
    page = client.get(reverse("admin_studies", args=[dataset.pk])).content.decode()

    def buttons(model: str) -> list[str]:
        row = re.search(rf'<tr data-model="{re.escape(model)}">(.*?)</tr>', page, re.S).group(1)
        return re.findall(r"<button[^>]*>([^<]*)</button>", row)

    in_both = review_data.MODEL_NAMES[0]
    assert buttons(in_both) == ["Remove from round 1", "Remove from round 2"]
    assert buttons("cand-lm@2048") == ["Add to round 1", "Add to round 2", "Retire candidates"]
    # Half of a model in round 2: adding still brings the rest in, so it is offered.
    services.study_add_responses(
        study=second,
        responses=ModelResponse.objects.filter(
            model_name="cand-lm@2048", instruction=instructions[0]
        ),
        source="model",
        actor=admin,
    )
    page = client.get(reverse("admin_studies", args=[dataset.pk])).content.decode()
    assert buttons("cand-lm@2048") == [
        "Add to round 1",
        "Add to round 2",
        "Remove from round 2",
        "Retire candidates",
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite serialises writers")
@pytest.mark.django_db(transaction=True)  # two connections, each committing as in use
def test_a_review_starting_while_a_response_joins_its_set_freezes_the_set_with_it(world):
    # The page read the set; an admin's addition holds the study's lock; the start waits for it
    # and must then freeze the set as the addition left it, since the addition found no review
    # started. Before: the start's statement read the set in the snapshot it began with.
    dataset, admin, clinician, instructions, assignments = world
    instruction, assignment = instructions[0], assignments[0]
    read_by_the_page = sorted(
        StudyResponse.objects.filter(
            study_id=assignment.study_id, instruction=instruction
        ).values_list("response_id", flat=True)
    )
    candidate = _candidate(instruction)
    failures: list[BaseException] = []

    def open_the_page() -> None:
        try:
            request = RequestFactory().get("/")
            request.user = clinician
            review_open(
                assignment=Assignment.objects.select_related("instruction").get(pk=assignment.pk),
                response_ids=read_by_the_page,
                could_unblind=False,
                request=request,
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
        finally:
            connection.close()

    opener = threading.Thread(target=open_the_page)
    with transaction.atomic():
        services.study_add_responses(
            study=assignment.study, responses=[candidate], source="test", actor=admin
        )
        opener.start()
        deadline = time.monotonic() + 10
        while not _waiting_for_a_lock() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _waiting_for_a_lock(), f"the start did not wait for the lock: {failures}"
    opener.join(10)
    assert not failures and not opener.is_alive()
    review = Review.objects.get(assignment=assignment)
    assert sorted(review.shown_order) == sorted([*read_by_the_page, candidate.pk])


def _waiting_for_a_lock() -> bool:
    with connections["default"].cursor() as cursor:
        # Another connection of this database. This one is in a transaction, which keeps the
        # first view of the activity it took unless told to drop it.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        return bool(cursor.fetchone()[0])


def test_an_addition_that_fails_part_way_leaves_the_set_as_it_was(world, monkeypatch):
    # All or nothing: the rows added before a failure (here, the audit row's) are taken back.
    dataset, admin, clinician, instructions, assignments = world
    study = assignments[0].study
    before = StudyResponse.objects.filter(study=study).count()
    candidate = _candidate(instructions[0])

    def refuse(**kwargs):  # noqa: ANN003, ANN202
        raise RuntimeError("the audit trail is unavailable")

    monkeypatch.setattr(services, "audit_record", refuse)
    with pytest.raises(RuntimeError):
        services.study_add_responses(study=study, responses=[candidate], source="test", actor=admin)
    assert StudyResponse.objects.filter(study=study).count() == before
