"""Reads about studies and their response sets: what clinicians of a study rank, which of its
instructions have started (their sets are frozen), and a fingerprint every report names."""

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from medalign_site.prepared import PreparedQuery
from review.blinding import model_name_hits, names_a_model, near_misses
from review.models import Dataset, ModelResponse, Review, Study, StudyResponse

# (response id, text, model name): the review page's responses of one instruction in a study.
ResponseRow = tuple[int, str, str]
_SET_ROWS: PreparedQuery[ResponseRow] = PreparedQuery(
    lambda p: (
        StudyResponse.objects.filter(study_id=p.study_id, instruction_id=p.instruction_id)
        .order_by()
        .values_list("response_id", "response__text", "response__model_name")
    ),
    params=("study_id", "instruction_id"),
)


def study_response_rows(*, study_id: int, instruction_id: int) -> list[ResponseRow]:
    """The responses an instruction is reviewed with in a study: one statement."""
    return _SET_ROWS.all(study_id=study_id, instruction_id=instruction_id)


def study_current(dataset: Dataset) -> Study | None:
    """The dataset's latest round, where new assignments and imports go by default."""
    return Study.objects.filter(dataset=dataset).order_by("-round").first()


def study_latest_reviewed(dataset: Dataset) -> Study | None:
    """The latest round with a submitted review, else the latest round: what a report or the
    power calculator analyses by default. A new, empty round must not silently become the
    default analysis (an empty report, a plan from nothing)."""
    reviewed = (
        Study.objects.filter(dataset=dataset, assignments__review__status=Review.Status.SUBMITTED)
        .order_by("-round")
        .first()
    )
    return reviewed or study_current(dataset)


def study_label(round_number: int, name: str) -> str:
    """A round as an admin reads it, its number said once: "Round 2: with the new model";
    "Round 2" alone where the name only repeats the number; a name that starts with its own
    number ("Round 2: adds a model") is not prefixed again.

    For admins only: a clinician sees ``clinician_round_label``, since what an admin types may
    name a model.
    """
    plain = f"Round {round_number}"
    text = " ".join(name.split())
    if text.casefold().startswith(plain.casefold()):
        rest = text[len(plain) :]
        if not rest[:1].isdigit():  # "Round 21" is not "Round 2"
            text = rest.lstrip(" :-\u2013\u2014\u00b7.,")
    return f"{plain}: {text}" if text else plain


def clinician_round_label(round_number: int) -> str:
    """A round as a clinician sees it: its number alone, never the name an admin typed
    ("Round 2: adds Atlas-70B" would name the model whose responses are new)."""
    return f"Round {round_number}"


def dataset_model_names(dataset: Dataset) -> list[str]:
    """Every model name among the dataset's responses, candidates included."""
    return sorted(
        set(
            ModelResponse.objects.filter(instruction__dataset=dataset)
            .order_by()
            .values_list("model_name", flat=True)
            .distinct()
        )
    )


def study_masking_counts(study: Study) -> tuple[int, int]:
    """Of the study's responses, how many had model names masked for clinicians (any name of
    the dataset, a family or a maker: what masking finds in the text now, not the import's
    flag) and how many hold near misses an admin has yet to confirm (``manage.py mask_check``
    lists them; the Django admin's "Confirm the masking" action marks them checked)."""
    names = tuple(dataset_model_names(study.dataset))
    masked = near = 0
    rows = ModelResponse.objects.filter(studies__study=study).values_list("text", "mask_checked_at")
    for text, checked_at in rows.iterator(chunk_size=2000):
        masked += names_a_model(text, names)
        # Confirmed in the Django admin ("Confirm the masking … was checked"): nothing awaits.
        near += checked_at is None and bool(near_misses(text, names))
    return masked, near


def round_name_hits(name: str, model_names: list[str]) -> list[str]:
    """The words of a round's name that name a model (of the dataset, a family or a maker),
    as typed: what the admin is warned about. Clinicians never see the name
    (``clinician_round_label``); researchers, exports and the audit log do."""
    return model_name_hits(name, model_names)


def study_names(study_ids: set[int]) -> list[str]:
    """How a message names rounds: "<dataset>: Round <n>: <name>"."""
    return [
        f"{s.dataset.name}: {study_label(s.round, s.name)}"
        for s in Study.objects.filter(pk__in=study_ids).select_related("dataset")
    ]


def studies_of(dataset: Dataset) -> QuerySet[Study]:
    return Study.objects.filter(dataset=dataset).order_by("round")


def study_started_instruction_ids(study: Study) -> set[int]:
    """Instructions of the study with a review that has shown responses (draft or submitted):
    their response sets are frozen, since the review stores the order it showed them in. A
    review opened while the set was still empty has shown nothing."""
    return set(
        Review.objects.filter(assignment__study=study)
        .exclude(shown_order=[])
        .values_list("assignment__instruction_id", flat=True)
    )


@dataclass(frozen=True)
class ResponseSetSummary:
    """What a report names as the response set it analysed."""

    study_id: int
    study: str
    dataset: str
    round: int
    instructions: int
    responses: int
    models: dict[str, int] = field(default_factory=dict)  # model name -> responses in the set
    fingerprint: str = ""  # sha256 over (instruction id, model name) pairs, sorted
    # How the study's instructions were assigned (uniform, or adaptive with its recorded
    # parameters): an adaptive study's unweighted statistics over-represent the instructions
    # chosen for doubt, so every report names the design.
    assignment_mode: str = "uniform"
    assignment_params: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "study_id": self.study_id,
            "study": self.study,
            "dataset": self.dataset,
            "round": self.round,
            "instructions": self.instructions,
            "responses": self.responses,
            "models": self.models,
            "fingerprint": self.fingerprint,
            "assignment_mode": self.assignment_mode,
            "assignment_params": self.assignment_params,
        }


def response_set_summary(study: Study) -> ResponseSetSummary:
    """The study's response set in a few numbers and a fingerprint that changes whenever the
    set does (keyed by the release's instruction ids and model names, not database keys, so a
    re-import of the same release gives the same fingerprint)."""
    pairs = sorted(
        StudyResponse.objects.filter(study=study).values_list(
            "instruction__instruction_id", "response__model_name"
        )
    )
    models: dict[str, int] = {}
    for _, name in pairs:
        models[name] = models.get(name, 0) + 1
    digest = hashlib.sha256("\n".join(f"{i}\t{m}" for i, m in pairs).encode()).hexdigest()
    return ResponseSetSummary(
        study_id=study.pk,
        study=study.name,
        dataset=study.dataset.name,
        round=study.round,
        instructions=len({i for i, _ in pairs}),
        responses=len(pairs),
        models=dict(sorted(models.items())),
        fingerprint=digest,
        assignment_mode=study.assignment_mode,
        assignment_params=dict(study.assignment_params or {}),
    )


def candidate_responses(dataset: Dataset) -> QuerySet[ModelResponse]:
    """The dataset's responses in no study: generated or imported candidates, retired ones
    included (marked), for an admin deciding what joins a study."""
    return (
        ModelResponse.objects.filter(instruction__dataset=dataset)
        .exclude(studies__isnull=False)
        .order_by("model_name", "instruction_id")
    )


@dataclass
class ModelGroup:
    """One model's responses in a dataset: where they are, and where they came from."""

    model_name: str
    responses: int = 0
    retired: int = 0
    # Study id -> responses of this model in its set.
    in_studies: dict[int, int] = field(default_factory=dict)
    runs: set[int] = field(default_factory=set)  # generation runs that produced them
    # Responses in at least one study: a response in two rounds (a copied set) counts once.
    in_any_study: set[int] = field(default_factory=set)
    # What "Add to round" and "Remove from round" would do in each round, in round order.
    rounds: list["RoundAction"] = field(default_factory=list)

    @property
    def source(self) -> str:
        if self.runs:
            return ", ".join(f"generation run #{r}" for r in sorted(self.runs))
        return "import"

    @property
    def candidates(self) -> int:
        return self.responses - len(self.in_any_study) - self.retired


@dataclass(frozen=True)
class RoundAction:
    """One model in one round: how many of its responses adding it would bring in (its
    unretired responses not in the round yet) and how many removing it would take out. The
    page offers a button only where it would change something; the service still refuses a
    change that touches a started instruction, and says why."""

    study_id: int
    round: int
    addable: int
    in_round: int


@dataclass
class StudyRow:
    study: Study
    summary: ResponseSetSummary
    started: int  # instructions whose response set is frozen
    assignments: int
    adaptive: Any = None  # review.selectors.adaptive.AdaptiveState, adaptive studies only
    predictors: list[tuple[int, str]] = field(default_factory=list)
    label: str = ""  # "Round 2: with the new model", the number said once
    name_hits: list[str] = field(default_factory=list)  # words of the name naming a model


def studies_overview(dataset: Dataset) -> tuple[list[StudyRow], list[ModelGroup]]:
    """The admin's page: each study's set and how much of it has started; each model's
    responses (a handful of queries, whatever the dataset's size)."""
    groups: dict[str, ModelGroup] = {}
    live: dict[str, set[int]] = {}  # model -> its unretired responses
    for response_id, name, retired_at, run in (
        ModelResponse.objects.filter(instruction__dataset=dataset)
        .values_list("id", "model_name", "retired_at", "generation_metadata__generation__run")
        .order_by()
    ):
        group = groups.setdefault(name, ModelGroup(model_name=name))
        group.responses += 1
        group.retired += retired_at is not None
        if retired_at is None:
            live.setdefault(name, set()).add(response_id)
        if isinstance(run, int):
            group.runs.add(run)
    in_set: dict[tuple[int, str], set[int]] = {}  # (study, model) -> its responses there
    for study_id, response_id, name in (
        StudyResponse.objects.filter(study__dataset=dataset)
        .values_list("study_id", "response_id", "response__model_name")
        .order_by()
    ):
        in_studies = groups[name].in_studies
        in_studies[study_id] = in_studies.get(study_id, 0) + 1
        groups[name].in_any_study.add(response_id)
        in_set.setdefault((study_id, name), set()).add(response_id)
    rows = []
    names = sorted(groups)
    for study in studies_of(dataset).select_related("dataset"):
        rows.append(
            StudyRow(
                study=study,
                summary=response_set_summary(study),
                started=len(study_started_instruction_ids(study)),
                assignments=study.assignments.count(),
                label=study_label(study.round, study.name),
                name_hits=round_name_hits(study.name, names),
            )
        )
        for name, group in groups.items():
            present = in_set.get((study.pk, name), set())
            group.rounds.append(
                RoundAction(
                    study_id=study.pk,
                    round=study.round,
                    addable=len(live.get(name, set()) - present),
                    in_round=len(present),
                )
            )
    return rows, sorted(groups.values(), key=lambda g: g.model_name)
