"""Rubrics in and out as HealthBench's JSONL (openai/simple-evals, MIT, ``healthbench_eval.py``).

One JSON object a line, in the shape of HealthBench's published files:
``{"prompt_id": str, "prompt": [{"role", "content"}], "rubrics": [{"criterion": str,
"points": int, "tags": [str]}], "example_tags": [str], "ideal_completions_data": ...}``.

Import reads ``prompt_id`` and ``rubrics``; the other fields are ignored: the instruction,
the record and the reference already live here. ``prompt_id`` names an instruction of the
dataset (its ``instruction_id``, or the ``external_id`` a previous import kept). Each line
becomes the instruction's next rubric version, *in review* (``source = "healthbench:<file>"``):
a clinician still accepts it before anyone grades with it. The whole file is checked before
anything is written; a line whose prompt matches no instruction, or whose instruction has a
version open, is reported and skipped. A byte-order mark opening the file (as Windows editors
and spreadsheets write UTF-8) is not part of the first line.

Export: each instruction's latest accepted version (or every accepted version), with what
HealthBench's eval reads of a line (``HealthBenchEval.__init__`` and ``__call__``:
``row["prompt"]``, ``row["rubrics"]`` through ``RubricItem.from_dict``, ``row["example_tags"]``,
``row["prompt_id"]``; ``example["ideal_completions_data"]`` in its physician-completion mode):

- ``prompt``: the instruction's question as the one user turn. The patient's record is not
  in it: it stays in the app under the DUA (and runs to 100,000 events); a grader reading the
  file judges the response against the criteria, which name what the record holds.
- ``example_tags``: the instruction's ``category:<taxonomy category>`` and
  ``specialty:<author's specialty>``, HealthBench's per-example breakdown (its themes) made of
  MedAlign's own; an imported file's example tags are not kept.
- ``ideal_completions_data``: null (no physician completion is exported).
- points as whole numbers, tags without repeats (HealthBench asserts both per item).
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max, Prefetch
from django.http import HttpRequest
from django.utils import timezone

from review.models import AuditEvent, Criterion, Dataset, Instruction, Rubric, User

from .audit import audit_record
from .rubrics import CriterionInput, RubricError, _write_criteria, criteria_inputs

MAX_LINE_CHARS = 1_000_000


@dataclass
class RubricImport:
    """What an import did: versions created, and the lines skipped with why (no text)."""

    created: list[Rubric] = field(default_factory=list)
    skipped: list[tuple[int, str, str]] = field(default_factory=list)  # (line, prompt_id, why)


@dataclass(frozen=True)
class ParsedLine:
    line: int
    prompt_id: str
    criteria: list[CriterionInput]


def rubric_lines_parse(lines: Iterable[str]) -> list[ParsedLine]:
    """Every line checked; RubricError naming the first bad line (nothing is written)."""
    out: list[ParsedLine] = []
    for number, raw in enumerate(lines, start=1):
        if number == 1 and raw.startswith("\ufeff"):
            raw = raw[1:]  # a UTF-8 byte-order mark, decoded
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_CHARS:
            raise RubricError(f"line {number} is longer than {MAX_LINE_CHARS} characters")
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            # RecursionError: arrays nested thousands deep, which json cannot parse at all.
            raise RubricError(f"line {number} is not valid JSON") from None
        if not isinstance(obj, dict):
            raise RubricError(f"line {number} is not a JSON object")
        prompt_id = obj.get("prompt_id")
        rubrics = obj.get("rubrics")
        if not isinstance(prompt_id, str) or not prompt_id.strip():
            raise RubricError(f"line {number} has no prompt_id")
        if not isinstance(rubrics, list) or not all(isinstance(r, dict) for r in rubrics):
            raise RubricError(f"line {number}: rubrics must be a list of objects")
        try:
            criteria = criteria_inputs(rubrics)
        except RubricError as exc:
            raise RubricError(f"line {number}, {exc.message}", field=exc.field) from None
        if not any(c.points > 0 for c in criteria):
            raise RubricError(f"line {number}: no criterion is worth positive points")
        out.append(ParsedLine(line=number, prompt_id=prompt_id.strip(), criteria=criteria))
    return out


@transaction.atomic
def rubrics_import(
    *,
    dataset: Dataset,
    lines: Iterable[str],
    source_name: str,
    actor: User | None,
    reviewer: User | None = None,
    request: HttpRequest | None = None,
) -> RubricImport:
    """Each line as the next rubric version of its instruction, in review (see the module)."""
    parsed = rubric_lines_parse(lines)
    ids = {p.prompt_id for p in parsed}
    by_id: dict[str, Instruction] = {
        i.instruction_id: i for i in dataset.instructions.filter(instruction_id__in=ids)
    }
    for rubric in Rubric.objects.filter(
        instruction__dataset=dataset, external_id__in=ids - set(by_id)
    ).select_related("instruction"):
        by_id.setdefault(rubric.external_id, rubric.instruction)
    open_ids = set(
        Rubric.objects.filter(instruction__in=by_id.values())
        .exclude(status=Rubric.Status.ACCEPTED)
        .values_list("instruction_id", flat=True)
    )
    latest = dict(
        Rubric.objects.filter(instruction__in=by_id.values())
        .values("instruction_id")
        .annotate(n=Max("version"))
        .values_list("instruction_id", "n")
    )
    result = RubricImport()
    now = timezone.now()
    seen: set[int] = set()
    for p in parsed:
        instruction = by_id.get(p.prompt_id)
        if instruction is None:
            result.skipped.append((p.line, p.prompt_id, "no instruction with this id"))
            continue
        if instruction.pk in open_ids or instruction.pk in seen:
            result.skipped.append((p.line, p.prompt_id, "a version is already open"))
            continue
        seen.add(instruction.pk)
        rubric = Rubric.objects.create(
            instruction=instruction,
            version=(latest.get(instruction.pk) or 0) + 1,
            status=Rubric.Status.IN_REVIEW,
            reviewer=reviewer,
            assigned_by=actor,
            source=f"healthbench:{source_name}"[:200],
            external_id=p.prompt_id,
            submitted_at=now,
        )
        _write_criteria(rubric, p.criteria)
        result.created.append(rubric)
    audit_record(
        action=AuditEvent.Action.RUBRIC_CHANGED,
        actor=actor,
        request=request,
        obj=dataset,
        details={
            "step": "imported",
            "file": source_name[:200],
            "created": len(result.created),
            "skipped": len(result.skipped),
        },
    )
    return result


def _accepted(dataset: Dataset, *, all_versions: bool) -> list[Rubric]:
    rubrics = (
        Rubric.objects.filter(instruction__dataset=dataset, status=Rubric.Status.ACCEPTED)
        .select_related("instruction")
        .prefetch_related(Prefetch("criteria", queryset=Criterion.objects.order_by("order", "id")))
        .order_by("instruction__instruction_id", "-version")
    )
    if all_versions:
        return list(rubrics)
    latest: dict[int, Rubric] = {}
    for rubric in rubrics:
        latest.setdefault(rubric.instruction_id, rubric)
    return list(latest.values())


def example_tags(instruction: Instruction) -> list[str]:
    """HealthBench's example-level tags of an instruction: its category and specialty."""
    tags = [
        f"{name}:{value.strip()}"
        for name, value in (
            ("category", instruction.category),
            ("specialty", instruction.specialty),
        )
        if value.strip()
    ]
    return list(dict.fromkeys(tags))


def rubric_line(rubric: Rubric) -> dict[str, Any]:
    """One rubric version in HealthBench's shape (see the module)."""
    instruction = rubric.instruction
    return {
        "prompt_id": rubric.external_id or instruction.instruction_id,
        "prompt": [{"role": "user", "content": instruction.question}],
        "rubrics": [
            {"criterion": c.text, "points": c.points, "tags": list(dict.fromkeys(c.tags))}
            for c in rubric.criteria.all()
        ],
        "example_tags": example_tags(instruction),
        "ideal_completions_data": None,
    }


def rubrics_export(
    *,
    dataset: Dataset,
    actor: User | None,
    all_versions: bool = False,
    request: HttpRequest | None = None,
) -> Iterator[str]:
    """The dataset's accepted rubrics as JSONL lines (each ending in a newline); audited as
    an export, since criteria may quote the record."""
    rubrics = _accepted(dataset, all_versions=all_versions)
    audit_record(
        action=AuditEvent.Action.EXPORT,
        actor=actor,
        request=request,
        obj=dataset,
        details={"what": "rubrics", "format": "healthbench-jsonl", "rubrics": len(rubrics)},
    )
    for rubric in rubrics:
        yield json.dumps(rubric_line(rubric), ensure_ascii=False) + "\n"
