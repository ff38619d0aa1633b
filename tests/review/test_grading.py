"""Clinicians grading responses against an accepted rubric: the review page's save protocol
(edits merged per key, resending safe), an idempotent submit, grades tied to the version, and
the page's blinding and audit."""

import json
import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from review.models import AuditEvent, CriterionGrade, CriterionGrading, Role, Rubric
from review.selectors.drafts import criterion_ids
from review.services import grading as services
from review.services import rubrics as rubric_services
from review.services.reviews import IncompleteReview, InvalidReview, ReviewReadOnly
from review.services.rubrics import CriterionInput, RubricError
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(db):
    dataset = review_data.make_dataset()
    patient = review_data.make_record(dataset, "P-GRADE", n_events=40)
    instruction = review_data.make_instruction(dataset, patient, "I-GRADE", n_responses=2)
    study = factories.put_in_study(instruction)
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    clinician = factories.make_user("grader@example.edu", roles=[Role.CLINICIAN])
    rubric = rubric_services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=None
    )
    rubric_services.rubric_save_criteria(
        rubric=rubric,
        actor=author,
        criteria=[
            CriterionInput("States the latest creatinine.", 7, ("axis:accuracy",)),
            CriterionInput("Invents a value.", -8, ("axis:accuracy",)),
        ],
    )
    rubric_services.rubric_submit(rubric=rubric, actor=author)
    rubric = rubric_services.rubric_accept(rubric=rubric, actor=reviewer)
    (grading,) = services.gradings_assign(
        rubric=rubric, study=study, clinicians=[clinician], actor=None
    )
    grading = services.grading_get_or_start(grading)
    criteria = criterion_ids(grading)
    return grading, clinician, criteria, rubric


def _edit(handle, cid, value, at=None):
    return {
        "handle": handle,
        "field": f"c{cid}",
        "value": value,
        "at": at or int(time.time() * 1000),
    }


def _all(grading, criteria, value=True):
    return [_edit(h, c, value) for h in grading.handles for c in criteria]


def test_it_only_assigns_accepted_rubrics(setup):
    grading, clinician, _, rubric = setup
    second = rubric_services.rubric_assign(
        instruction=rubric.instruction, author=clinician, actor=None
    )
    with pytest.raises(RubricError, match="accepted"):
        services.gradings_assign(
            rubric=second, study=grading.study, clinicians=[clinician], actor=None
        )
    # Asking the same clinician again creates nothing.
    assert (
        services.gradings_assign(
            rubric=rubric, study=grading.study, clinicians=[clinician], actor=None
        )
        == []
    )


def test_edits_merge_per_key_and_resending_changes_nothing(setup):
    grading, clinician, criteria, _ = setup
    h = grading.handles[0]
    first = _edit(h, criteria[0], True, at=1_000)
    later = _edit(h, criteria[0], False, at=2_000)
    state = services.grading_save_draft(
        grading_id=grading.pk, clinician=clinician, payload={"edits": [later], "tab": "a", "seq": 1}
    )
    assert state["draft"] == {f"{h}.c{criteria[0]}": False}
    # An older edit arriving late (another tab, a resend) does not win over the later one.
    state = services.grading_save_draft(
        grading_id=grading.pk, clinician=clinician, payload={"edits": [first], "tab": "b", "seq": 1}
    )
    assert state["draft"] == {f"{h}.c{criteria[0]}": False}
    again = services.grading_save_draft(
        grading_id=grading.pk, clinician=clinician, payload={"edits": [later], "tab": "a", "seq": 2}
    )
    assert again["draft"] == state["draft"]


def test_it_refuses_criteria_of_another_rubric_and_non_boolean_values(setup):
    grading, clinician, criteria, _ = setup
    h = grading.handles[0]
    with pytest.raises(InvalidReview, match="criterion"):
        services.grading_save_draft(
            grading_id=grading.pk, clinician=clinician, payload={"edits": [_edit(h, 999_999, True)]}
        )
    with pytest.raises(InvalidReview, match="true, false or null"):
        services.grading_save_draft(
            grading_id=grading.pk,
            clinician=clinician,
            payload={"edits": [_edit(h, criteria[0], 1)]},
        )
    with pytest.raises(InvalidReview, match="handle"):
        services.grading_save_draft(
            grading_id=grading.pk,
            clinician=clinician,
            payload={"edits": [_edit(str(grading.shown_order[0]), criteria[0], True)]},
        )


def test_submit_needs_every_verdict_and_writes_grades_naming_the_version(setup):
    grading, clinician, criteria, rubric = setup
    edits = _all(grading, criteria)
    with pytest.raises(IncompleteReview, match="1 criterion"):
        services.grading_submit(
            grading_id=grading.pk, clinician=clinician, payload={"edits": edits[:-1]}
        )
    assert not CriterionGrade.objects.exists()  # a refused submit writes nothing
    state = services.grading_submit(
        grading_id=grading.pk, clinician=clinician, payload={"edits": edits}
    )
    assert state["status"] == "submitted"
    grades = list(CriterionGrade.objects.all())
    assert len(grades) == 2 * 2
    assert {g.rubric_id for g in grades} == {rubric.pk}
    assert {g.clinician_id for g in grades} == {clinician.pk}
    assert {g.response_id for g in grades} == {int(r) for r in grading.shown_order}
    assert AuditEvent.objects.filter(action=AuditEvent.Action.GRADING_SUBMITTED).count() == 1


def test_submitting_twice_is_idempotent_and_a_late_change_is_named(setup):
    grading, clinician, criteria, _ = setup
    edits = _all(grading, criteria)
    first = services.grading_submit(
        grading_id=grading.pk, clinician=clinician, payload={"edits": edits}
    )
    again = services.grading_submit(
        grading_id=grading.pk, clinician=clinician, payload={"edits": edits}
    )
    assert again == first
    assert CriterionGrade.objects.count() == 4
    late = _edit(grading.handles[1], criteria[1], False)
    with pytest.raises(ReviewReadOnly) as caught:
        services.grading_submit(
            grading_id=grading.pk, clinician=clinician, payload={"edits": [late]}
        )
    assert caught.value.extra["unapplied"] == [f"{grading.handles[1]}.c{criteria[1]}"]
    with pytest.raises(ReviewReadOnly):
        services.grading_save_draft(
            grading_id=grading.pk, clinician=clinician, payload={"edits": [late]}
        )
    assert set(CriterionGrade.objects.values_list("met", flat=True)) == {True}


def test_the_grading_page_is_blinded_and_audited(setup, client):
    grading, clinician, criteria, _ = setup
    factories.sign_in(client, clinician)
    response = client.get(reverse("grading_page", args=[grading.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    for name in review_data.MODEL_NAMES:
        assert name not in html
    data = json.loads(
        html.split('id="grading-data" type="application/json">')[1].split("</script>")[0]
    )
    assert set(data["labels"]) == set(grading.handles)
    assert "States the latest creatinine." in html
    actions = set(
        AuditEvent.objects.filter(object_type="CriterionGrading").values_list("action", flat=True)
    )
    assert {AuditEvent.Action.INSTRUCTION_VIEWED, AuditEvent.Action.RECORD_VIEWED} <= actions
    # The grader reads the record like a reviewer does (audited by that endpoint).
    excerpt = client.get(
        reverse("record_excerpt", args=[grading.instruction_id]),
        headers={"Accept": "application/json"},
    )
    assert excerpt.status_code == 200


def test_save_and_submit_over_http(setup, client):
    grading, clinician, criteria, _ = setup
    factories.sign_in(client, clinician)

    def post(name, edits):
        return client.post(
            reverse(name, args=[grading.pk]),
            json.dumps({"edits": edits, "tab": "t", "seq": 1}),
            content_type="application/json",
            headers={"Accept": "application/json"},
        )

    assert post("grading_save", _all(grading, criteria)[:1]).status_code == 200
    assert post("grading_submit", []).status_code == 400  # three verdicts missing
    response = post("grading_submit", _all(grading, criteria, value=False))
    assert response.status_code == 200 and response.json()["status"] == "submitted"
    assert post("grading_submit", []).json()["status"] == "submitted"
    assert post("grading_save", _all(grading, criteria)[:1]).status_code == 409
    other = factories.make_user("other@example.edu", roles=[Role.CLINICIAN])
    factories.sign_in(client, other)
    assert post("grading_save", []).status_code == 404
    assert CriterionGrading.objects.get().status == "submitted"
    assert Rubric.objects.get().status == "accepted"


def test_submitted_grade_rows_carry_the_version_points_and_tags(setup):
    from review.selectors.rubrics import submitted_grade_rows

    grading, clinician, criteria, rubric = setup
    dataset = rubric.instruction.dataset
    services.grading_save_draft(
        grading_id=grading.pk, clinician=clinician, payload={"edits": _all(grading, criteria)}
    )
    assert submitted_grade_rows(dataset=dataset) == []  # a draft is no grade yet
    services.grading_submit(grading_id=grading.pk, clinician=clinician, payload={})
    rows = submitted_grade_rows(dataset=dataset)
    assert len(rows) == 4
    assert {(r.rubric_version, r.points, r.tags) for r in rows} == {
        (1, 7, ("axis:accuracy",)),
        (1, -8, ("axis:accuracy",)),
    }
    assert {r.model_name for r in rows} == set(review_data.MODEL_NAMES[:2])
    assert submitted_grade_rows(dataset=dataset, rubric_ids=[rubric.pk + 1]) == []


def test_autosave_is_audited_once_a_minute_at_most(setup):
    grading, clinician, criteria, _ = setup
    for i, value in enumerate([True, False, True]):
        services.grading_save_draft(
            grading_id=grading.pk,
            clinician=clinician,
            payload={"edits": [_edit(grading.handles[0], criteria[0], value, at=1_000 + i)]},
        )
    assert AuditEvent.objects.filter(action=AuditEvent.Action.GRADING_SAVED).count() == 1
    CriterionGrading.objects.filter(pk=grading.pk).update(
        save_audited_at=timezone.now() - timedelta(minutes=2)
    )
    services.grading_save_draft(
        grading_id=grading.pk,
        clinician=clinician,
        payload={"edits": [_edit(grading.handles[0], criteria[1], True)]},
    )
    assert AuditEvent.objects.filter(action=AuditEvent.Action.GRADING_SAVED).count() == 2


def test_an_account_that_can_see_model_names_is_never_asked_to_grade(setup):
    # Grading is blind as ranking is: an account that also holds researcher access can map
    # responses to models through the exports, so its verdicts could follow the model.
    grading, _, _, rubric = setup
    both = factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.RESEARCHER])
    with pytest.raises(RubricError, match="researcher"):
        services.gradings_assign(rubric=rubric, study=grading.study, clinicians=[both], actor=None)
    assert not CriterionGrading.objects.filter(clinician=both).exists()


def test_a_grader_given_researcher_access_later_can_no_longer_grade(setup, client):
    # An outside review: assigned while blind, then given researcher access, an account could
    # still grade (and its grades reached the reports).
    from review.services.accounts import application_set_roles

    grading, clinician, _, _ = setup
    criteria = criterion_ids(grading)
    application = clinician.applications.get(status="approved")
    admin = factories.make_user("boss@example.edu", roles=[Role.ADMIN])
    application_set_roles(
        application=application,
        reviewer=admin,
        roles=[Role.CLINICIAN, Role.RESEARCHER],
        expires_on=application.expires_on,
    )
    clinician = type(clinician).objects.get(pk=clinician.pk)  # as the next request sees it
    with pytest.raises(services.GradingUnblinded):
        services.grading_submit(
            grading_id=grading.pk, clinician=clinician, payload={"edits": _all(grading, criteria)}
        )
    assert not CriterionGrade.objects.filter(clinician=clinician).exists()
