"""The README's worked example of the files a team writes to review its own cohort ("Your own
instructions and responses: the input files") imports as documented, beside a MEDS cohort."""

import re
from pathlib import Path

import pytest
from django.core.management import call_command

from review.models import Instruction, ModelResponse, ReferenceResponse, StudyResponse

from .test_code_descriptions import write_mimic

pytestmark = pytest.mark.django_db

PAGE = Path(__file__).resolve().parents[2] / "docs" / "data" / "input-files.md"
SECTION = PAGE.read_text(encoding="utf-8")
FILES = dict(re.findall(r"\*\*`([\w.-]+)`\*\*\n\n```csv\n(.*?)```", SECTION, re.S))


def test_the_readme_gives_the_three_files_of_its_worked_example() -> None:
    assert set(FILES) == {"instructions.csv", "references.csv", "responses.csv"}
    command = "manage.py import_medalign /secure/my-cohort --dataset my-cohort"
    assert command in SECTION


def test_the_worked_example_imports_as_documented(tmp_path: Path, capsys) -> None:
    cohort = write_mimic(tmp_path / "my-cohort")  # subject 10000032, in the demo's layout
    for name, text in FILES.items():
        (cohort / name).write_text(text, encoding="utf-8")

    call_command("import_medalign", str(cohort), "--dataset", "my-cohort", "--no-progress")

    out = capsys.readouterr().out
    assert "instructions whose record is not loaded yet" not in out
    q1, q2 = Instruction.objects.order_by("instruction_id")
    assert (q1.instruction_id, q1.patient.person_id, q1.specialty) == (
        "q1",
        "10000032",
        "Nephrology",
    )
    assert q1.question == "What is the most recent creatinine?"
    assert q1.subcategory == "retrieve laboratory studies"
    assert q2.question == "Summarize this admission in two sentences."
    [reference] = ReferenceResponse.objects.all()
    assert (reference.instruction, reference.annotator) == (q1, "Annotator_1")
    assert reference.text.startswith("1.4 mg/dL on 7 May")
    responses = ModelResponse.objects.order_by("instruction__instruction_id", "model_name")
    assert [(r.instruction.instruction_id, r.model_name) for r in responses] == [
        ("q1", "model-a"),
        ("q1", "model-b"),
        ("q2", "model-a"),
        ("q2", "model-b"),
    ]
    assert {(r.context_length, r.truncation_policy) for r in responses} == {(8192, "left-truncate")}
    assert responses[1].text == "Creatinine was 1.1 mg/dL, measured in the emergency department."
    # As the section says: they join the dataset's first round, ready to assign.
    assert StudyResponse.objects.count() == 4
