"""Writing rubrics: an author writes, a second clinician edits, accepts or sends back; an
accepted version is frozen and revising starts the next one."""

import pytest

from review.models import AuditEvent, Role, Rubric
from review.services import rubrics as services
from review.services.rubrics import CriterionInput, RubricError
from tests import factories
from tests.review.review_data import make_dataset, make_instruction, make_record

CRITERIA = [
    CriterionInput("States the latest creatinine with its date.", 8, ("axis:accuracy",)),
    CriterionInput("Invents a value not in the record.", -9, ("axis:accuracy",)),
]


@pytest.fixture
def setup(db):
    dataset = make_dataset()
    instruction = make_instruction(dataset, make_record(dataset, "P-1", n_events=20), "I-1")
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    rubric = services.rubric_assign(
        instruction=instruction, author=author, reviewer=reviewer, actor=admin
    )
    return instruction, author, reviewer, admin, rubric


def test_it_takes_a_rubric_from_draft_through_review_to_accepted(setup):
    instruction, author, reviewer, _, rubric = setup
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA)
    services.rubric_submit(rubric=rubric, actor=author)
    rubric = services.rubric_accept(rubric=rubric, actor=reviewer)
    assert rubric.status == Rubric.Status.ACCEPTED
    assert [(c.points, c.tags) for c in rubric.criteria.all()] == [
        (8, ["axis:accuracy"]),
        (-9, ["axis:accuracy"]),
    ]
    steps = list(
        AuditEvent.objects.filter(action=AuditEvent.Action.RUBRIC_CHANGED)
        .order_by("id")
        .values_list("details__step", flat=True)
    )
    assert steps == ["assigned", "criteria_saved", "submitted", "accepted"]
    # No criterion text in the audit trail: it may quote the record.
    assert "creatinine" not in str(list(AuditEvent.objects.values_list("details", flat=True)))


def test_it_refuses_a_review_by_the_author_or_an_unassigned_clinician(setup):
    _, author, _, _, rubric = setup
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA)
    services.rubric_submit(rubric=rubric, actor=author)
    with pytest.raises(RubricError, match="not its author"):
        services.rubric_accept(rubric=rubric, actor=author)
    stranger = factories.make_user("stranger@example.edu", roles=[Role.CLINICIAN])
    with pytest.raises(RubricError, match="assigned reviewer"):
        services.rubric_accept(rubric=rubric, actor=stranger)
    with pytest.raises(RubricError, match="second clinician"):
        services.rubric_set_reviewer(rubric=rubric, reviewer=author, actor=None)


def test_it_sends_back_with_a_note_and_the_author_revises(setup):
    _, author, reviewer, _, rubric = setup
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA)
    services.rubric_submit(rubric=rubric, actor=author)
    with pytest.raises(RubricError, match="say what"):
        services.rubric_send_back(rubric=rubric, actor=reviewer, note="  ")
    rubric = services.rubric_send_back(rubric=rubric, actor=reviewer, note="Add the date.")
    assert rubric.status == Rubric.Status.SENT_BACK and rubric.review_note == "Add the date."
    # The reviewer cannot edit a version that is back with its author; the author can.
    with pytest.raises(RubricError):
        services.rubric_save_criteria(rubric=rubric, actor=reviewer, criteria=CRITERIA[:1])
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA[:1])
    assert services.rubric_submit(rubric=rubric, actor=author).status == Rubric.Status.IN_REVIEW


def test_the_reviewers_edit_is_kept_and_recorded(setup):
    _, author, reviewer, _, rubric = setup
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA)
    services.rubric_submit(rubric=rubric, actor=author)
    edited = [CriterionInput("States the latest creatinine (1.2 mg/dL).", 9, ())] + CRITERIA[1:]
    services.rubric_save_criteria(rubric=rubric, actor=reviewer, criteria=edited)
    rubric = services.rubric_accept(rubric=rubric, actor=reviewer)
    assert rubric.reviewer_edited
    assert rubric.criteria.first().points == 9


def test_an_accepted_version_is_frozen_and_revising_copies_it(setup):
    instruction, author, reviewer, admin, rubric = setup
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA)
    services.rubric_submit(rubric=rubric, actor=author)
    services.rubric_accept(rubric=rubric, actor=reviewer)
    with pytest.raises(RubricError):
        services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA[:1])
    with pytest.raises(RubricError):
        services.rubric_save_criteria(rubric=rubric, actor=reviewer, criteria=CRITERIA[:1])
    second = services.rubric_assign(
        instruction=instruction, author=reviewer, reviewer=author, actor=admin
    )
    assert second.version == 2 and second.status == Rubric.Status.DRAFT
    assert list(second.criteria.values_list("text", "points")) == [
        (c.text, c.points) for c in CRITERIA
    ]
    with pytest.raises(RubricError, match="already has"):
        services.rubric_assign(instruction=instruction, author=author, actor=admin)


def test_it_refuses_a_rubric_without_positive_points(setup):
    _, author, _, _, rubric = setup
    with pytest.raises(RubricError, match="at least one"):
        services.rubric_submit(rubric=rubric, actor=author)
    services.rubric_save_criteria(rubric=rubric, actor=author, criteria=CRITERIA[1:])
    with pytest.raises(RubricError, match="positive points"):
        services.rubric_submit(rubric=rubric, actor=author)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"text": "", "points": 5}, "text"),
        ({"text": "x", "points": 0}, "points"),
        ({"text": "x", "points": 11}, "points"),
        ({"text": "x", "points": True}, "points"),
        ({"text": "x", "points": 2.5}, "points"),
        ({"text": "x", "points": 5, "tags": ["two words"]}, "tags"),
        ({"text": "x", "points": 5, "tags": "axis:accuracy"}, None),
    ],
)
def test_it_checks_each_criterion(row, field):
    if field is None:
        assert services.criterion_input(row).tags == ("axis:accuracy",)
        return
    with pytest.raises(RubricError) as caught:
        services.criterion_input(row)
    assert caught.value.field == field


def test_the_demo_gives_each_demo_clinician_rubric_work_once(db):
    from review.demo.assignments import DEMO_CLINICIANS
    from review.demo.rubrics import demo_rubrics
    from review.models import CriterionGrading
    from review.selectors.rubrics import clinician_rubric_work

    dataset = make_dataset("demo")
    patient = make_record(dataset, "P-DEMO", n_events=20)
    instructions = [make_instruction(dataset, patient, f"I-{i}") for i in range(5)]
    factories.put_in_study(*instructions)
    one, two = (factories.make_user(e, roles=[Role.CLINICIAN]) for e in DEMO_CLINICIANS)
    assert "2 accepted" in demo_rubrics(dataset_name="demo")[0]
    assert demo_rubrics(dataset_name="demo") == ["Demo rubrics: already there."]
    statuses = sorted(Rubric.objects.values_list("status", flat=True))
    assert statuses == ["accepted", "accepted", "draft", "in_review"]
    assert CriterionGrading.objects.count() == 4
    work = clinician_rubric_work(two)
    assert (len(work.to_write), len(work.to_review), len(work.to_grade)) == (1, 1, 2)


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"])
def test_a_criterion_that_cannot_be_stored_is_refused_by_name(bad):
    # An outside review: a NUL reached the database from the writing page (PostgreSQL answers
    # 500), and a lone surrogate in a JSONL import crashed the upload.
    from review.services.rubrics import RubricError, criterion_input

    with pytest.raises(RubricError, match="criterion 2: the text holds a character"):
        criterion_input({"text": bad, "points": 5}, where="criterion 2")
