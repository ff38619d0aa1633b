"""HealthBench's JSONL in and out: a file in the published shape survives the round trip."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from review.models import AuditEvent, Role, Rubric
from review.services import rubrics as services
from review.services.rubric_jsonl import rubrics_export, rubrics_import
from review.services.rubrics import RubricError
from tests import factories
from tests.review.review_data import make_dataset, make_instruction, make_record

SAMPLE = Path(__file__).parent / "data" / "healthbench_rubrics.jsonl"


@pytest.fixture
def dataset(db):
    dataset = make_dataset()
    patient = make_record(dataset, "P-1", n_events=20)
    make_instruction(dataset, patient, "I-1")
    make_instruction(dataset, patient, "I-2")
    return dataset


def _published(path: Path) -> list[dict]:
    return [
        {"prompt_id": obj["prompt_id"], "rubrics": obj["rubrics"]}
        for obj in map(json.loads, path.read_text().splitlines())
    ]


def test_a_healthbench_file_round_trips_through_review(dataset, tmp_path):
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    out = io.StringIO()
    call_command(
        "import_rubrics", str(SAMPLE), dataset=dataset.name, reviewer=reviewer.email, stdout=out
    )
    assert "Imported 2 rubric(s)" in out.getvalue()
    imported = list(Rubric.objects.order_by("instruction__instruction_id"))
    # Imported rubrics wait for a second clinician: nothing is graded with them yet.
    assert {r.status for r in imported} == {Rubric.Status.IN_REVIEW}
    assert imported[0].source == "healthbench:healthbench_rubrics.jsonl"
    exported = tmp_path / "out.jsonl"
    call_command("export_rubrics", dataset=dataset.name, output=str(exported))
    assert exported.read_text() == ""  # none accepted yet
    for rubric in imported:
        services.rubric_accept(rubric=rubric, actor=reviewer)
    call_command("export_rubrics", dataset=dataset.name, output=str(exported))
    assert [json.loads(line) for line in exported.read_text().splitlines()] == _published(SAMPLE)
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.EXPORT, details__what="rubrics"
    ).exists()


def test_it_imports_nothing_from_a_file_with_a_bad_line(dataset):
    lines = SAMPLE.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["rubrics"][0]["points"] = 12
    with pytest.raises(RubricError, match="line 2"):
        rubrics_import(
            dataset=dataset, lines=[lines[0], json.dumps(bad)], source_name="x", actor=None
        )
    assert not Rubric.objects.exists()
    with pytest.raises(CommandError, match="line 1 is not valid JSON"):
        call_command("import_rubrics", __file__, dataset=dataset.name)


def test_it_skips_unknown_prompts_and_open_versions(dataset):
    lines = SAMPLE.read_text().splitlines()
    other = json.loads(lines[0]) | {"prompt_id": "NOT-HERE"}
    result = rubrics_import(
        dataset=dataset, lines=[*lines, json.dumps(other)], source_name="x", actor=None
    )
    assert len(result.created) == 2
    assert [s[1:] for s in result.skipped] == [("NOT-HERE", "no instruction with this id")]
    again = rubrics_import(dataset=dataset, lines=lines, source_name="x", actor=None)
    assert not again.created
    assert {s[2] for s in again.skipped} == {"a version is already open"}


def test_export_gives_the_latest_accepted_version(dataset):
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    author = factories.make_user("author@example.edu", roles=[Role.CLINICIAN])
    lines = SAMPLE.read_text().splitlines()
    first = rubrics_import(dataset=dataset, lines=lines[:1], source_name="x", actor=None)
    rubric = first.created[0]
    services.rubric_set_reviewer(rubric=rubric, reviewer=reviewer, actor=None)
    services.rubric_accept(rubric=rubric, actor=reviewer)
    second = services.rubric_assign(
        instruction=rubric.instruction, author=author, reviewer=reviewer, actor=None
    )
    services.rubric_save_criteria(
        rubric=second, actor=author, criteria=[services.CriterionInput("New.", 3, ())]
    )
    services.rubric_submit(rubric=second, actor=author)
    services.rubric_accept(rubric=second, actor=reviewer)
    latest = [json.loads(x) for x in rubrics_export(dataset=dataset, actor=None)]
    assert latest == [
        {"prompt_id": "I-1", "rubrics": [{"criterion": "New.", "points": 3, "tags": []}]}
    ]
    every = list(rubrics_export(dataset=dataset, actor=None, all_versions=True))
    assert len(every) == 2


def test_assign_rubrics_rotates_authors_with_a_second_clinician_as_reviewer(dataset):
    a = factories.make_user("a@example.edu", roles=[Role.CLINICIAN])
    b = factories.make_user("b@example.edu", roles=[Role.CLINICIAN])
    out = io.StringIO()
    call_command(
        "assign_rubrics",
        dataset=dataset.name,
        authors="a@example.edu,b@example.edu",
        reviewers="a@example.edu,b@example.edu",
        stdout=out,
    )
    assert "Asked for 2 rubric(s)" in out.getvalue()
    pairs = set(Rubric.objects.values_list("author__email", "reviewer__email"))
    assert pairs == {("a@example.edu", "b@example.edu"), ("b@example.edu", "a@example.edu")}
    call_command(
        "assign_rubrics",
        dataset=dataset.name,
        authors="a@example.edu",
        reviewers="b@example.edu",
        stdout=out,
    )
    assert Rubric.objects.count() == 2  # open versions are not asked for again
    for rubric in Rubric.objects.all():
        author = a if rubric.author_id == a.pk else b
        reviewer = b if author is a else a
        services.rubric_save_criteria(
            rubric=rubric, actor=author, criteria=[services.CriterionInput("Good.", 5, ())]
        )
        services.rubric_submit(rubric=rubric, actor=author)
        services.rubric_accept(rubric=rubric, actor=reviewer)
    factories.put_in_study(*dataset.instructions.all())
    out = io.StringIO()
    call_command(
        "assign_rubrics",
        dataset=dataset.name,
        grade=True,
        clinicians="a@example.edu,b@example.edu",
        stdout=out,
    )
    assert "Created 4 grading assignment(s) for 2 rubric(s)." in out.getvalue()
    with pytest.raises(CommandError, match="second clinician"):
        call_command(
            "assign_rubrics",
            dataset=dataset.name,
            authors="a@example.edu",
            reviewers="a@example.edu",
            revise=True,
        )


def test_a_line_nested_too_deep_or_holding_a_lone_surrogate_is_named_not_a_crash(dataset):
    # An outside review: both made the admin's upload answer 500.
    deep = '{"prompt_id": "x", "rubrics": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(RubricError, match="line 1 is not valid JSON"):
        rubrics_import(dataset=dataset, lines=[deep], source_name="x", actor=None)
    lines = SAMPLE.read_text().splitlines()
    surrogate = json.loads(lines[0])
    surrogate["rubrics"][0]["criterion"] = "a\ud800b"
    with pytest.raises(RubricError, match="line 1"):
        rubrics_import(dataset=dataset, lines=[json.dumps(surrogate)], source_name="x", actor=None)
    assert not Rubric.objects.exists()
