"""HealthBench's JSONL in and out: a file in the published shape survives the round trip."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

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


# What HealthBench's eval reads of each line (openai/simple-evals, MIT, healthbench_eval.py at
# ee3b0318: HealthBenchEval.__init__, grade_sample, __call__; RubricItem.from_dict;
# calculate_score): written here from that code, so the export is tested against its reader.
HEALTHBENCH_KEYS = {"prompt_id", "prompt", "rubrics", "example_tags", "ideal_completions_data"}


def read_as_healthbench(line: str) -> dict:
    row = json.loads(line)  # examples = [json.loads(line) for line in f]
    assert isinstance(row["prompt_id"], str)  # hashed with the completion text
    # the conversation sent to the model, each message "role: content" for the grader
    assert isinstance(row["prompt"], list) and row["prompt"]
    assert all(set(m) == {"role", "content"} for m in row["prompt"])
    assert all(isinstance(m["content"], str) for m in row["prompt"])
    assert row["prompt"][-1]["role"] == "user"  # the model answers the last turn
    # example-level tags: a score each, and no duplicates (asserted there)
    tags = row["example_tags"]
    assert isinstance(tags, list) and all(isinstance(t, str) for t in tags)
    assert len(set(tags)) == len(tags)
    # RubricItem.from_dict(d): d["criterion"], d["points"], d["tags"]; no tag twice in one item
    for d in row["rubrics"]:
        assert isinstance(d["criterion"], str) and isinstance(d["points"], int | float)
        assert isinstance(d["tags"], list) and len(set(d["tags"])) == len(d["tags"])
    # calculate_score asserts a score: at least one criterion worth positive points
    assert sum(d["points"] for d in row["rubrics"] if d["points"] > 0) > 0
    # physician-completion mode reads example["ideal_completions_data"]: present, or null
    assert "ideal_completions_data" in row
    return row


def test_the_fixture_has_the_published_shape():
    for line in SAMPLE.read_text().splitlines():
        assert set(read_as_healthbench(line)) == HEALTHBENCH_KEYS


def test_an_export_is_read_by_healthbench_as_its_own_files(dataset):
    reviewer = factories.make_user("reviewer@example.edu", roles=[Role.CLINICIAN])
    created = rubrics_import(
        dataset=dataset, lines=SAMPLE.read_text().splitlines(), source_name="x", actor=None
    ).created
    for rubric in created:
        services.rubric_set_reviewer(rubric=rubric, reviewer=reviewer, actor=None)
        services.rubric_accept(rubric=rubric, actor=reviewer)
    rows = [read_as_healthbench(line) for line in rubrics_export(dataset=dataset, actor=None)]
    assert {frozenset(r) for r in rows} == {frozenset(HEALTHBENCH_KEYS)}
    by_id = {i.instruction_id: i for i in dataset.instructions.all()}
    for row in rows:
        instruction = by_id[row["prompt_id"]]
        assert row["prompt"] == [{"role": "user", "content": instruction.question}]
        assert row["example_tags"] == [
            f"category:{instruction.category}",
            f"specialty:{instruction.specialty}",
        ]
        assert row["ideal_completions_data"] is None


def test_a_file_starting_with_a_byte_order_mark_is_read(dataset, tmp_path):
    lines = SAMPLE.read_text().splitlines()
    result = rubrics_import(
        dataset=dataset, lines=["\ufeff" + lines[0], *lines[1:]], source_name="x", actor=None
    )
    assert len(result.created) == 2
    Rubric.objects.all().delete()
    path = tmp_path / "excel.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    out = io.StringIO()
    call_command("import_rubrics", str(path), dataset=dataset.name, stdout=out)
    assert "Imported 2 rubric(s)" in out.getvalue()
    # Only a first line may start with one: elsewhere it is not JSON.
    with pytest.raises(RubricError, match="line 2 is not valid JSON"):
        rubrics_import(dataset=dataset, lines=[lines[0], "\ufeff" + lines[1]], source_name="x",
                       actor=None)  # fmt: skip


def test_the_upload_page_reads_a_file_with_a_byte_order_mark(dataset, client):
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.sign_in(client, admin)
    upload = io.BytesIO(b"\xef\xbb\xbf" + SAMPLE.read_bytes())
    upload.name = "with-bom.jsonl"
    url = reverse("admin_rubrics", args=[dataset.pk])
    response = client.post(url, {"action": "upload", "file": upload}, follow=True)
    assert "Imported 2 rubric(s), in review; skipped 0." in response.content.decode()


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
    exported_lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [{k: o[k] for k in ("prompt_id", "rubrics")} for o in exported_lines] == _published(
        SAMPLE
    )
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
    assert [{k: o[k] for k in ("prompt_id", "rubrics")} for o in latest] == [
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
