"""Reads for reviewing quality: gold and calibration references, each clinician's figures,
calibration results and feedback, disagreements worth adjudicating, exclusions.

Everything here is for admins (and, for calibration feedback, the clinician who calibrated):
nothing reaches a clinician's ordinary review that could tell a gold item from another.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from django.db.models import Count, Q, QuerySet

from review.access import unblinding_roles, user_access
from review.models import (
    AccessApplication,
    Adjudication,
    Assignment,
    ClinicianExclusion,
    GoldItem,
    GoldJudgement,
    QualityPolicy,
    ResponseJudgement,
    Review,
    Study,
    User,
    response_label,
)
from review.selectors.assignments import clinicians_approved
from scoring.reports.statistics.quality import (
    CalibrationResult,
    ClinicianQuality,
    QualityRows,
    calibration_results,
    clinician_quality,
    kendall_tau_b,
)

Reference = tuple[float, float]  # (rank, correct), nan where unset


def quality_policy(study: Study) -> QualityPolicy:
    """The study's quality settings; the defaults (unsaved) when an admin set none."""
    policy = QualityPolicy.objects.filter(study=study).first()
    return policy or QualityPolicy(study=study)


def gold_references(
    study: Study, *, use: str | None = None, instruction_ids: set[int] | None = None
) -> dict[int, Reference]:
    """Each response of the study's gold (or calibration, or both) items with its reference
    (rank, correct), retired items included: reviews made of them keep their comparison."""
    rows = GoldJudgement.objects.filter(item__study=study)
    if use is not None:
        rows = rows.filter(item__use=use)
    if instruction_ids is not None:
        rows = rows.filter(item__instruction_id__in=instruction_ids)
    return {
        response_id: (
            math.nan if rank is None else float(rank),
            math.nan if correct is None else float(correct),
        )
        for response_id, rank, correct in rows.values_list("response_id", "rank", "is_correct")
    }


def known_instruction_ids(study_ids: set[int]) -> set[tuple[int, int]]:
    """(study, instruction) of every gold or calibration item of these studies: regular
    assignment leaves them out."""
    return set(
        GoldItem.objects.filter(study_id__in=study_ids).values_list("study_id", "instruction_id")
    )


def gold_items_available(study_id: int, *, use: str) -> list[int]:
    """The instructions of the study's active items of ``use``, in id order."""
    return list(
        GoldItem.objects.filter(study_id=study_id, use=use, retired_at__isnull=True)
        .order_by("instruction_id")
        .values_list("instruction_id", flat=True)
    )


def held_instruction_ids(clinician_ids: set[int]) -> dict[int, set[int]]:
    """Every instruction each clinician holds an assignment of, in any study and for any
    purpose: a gold or calibration item they met before is not given to them again."""
    held: dict[int, set[int]] = defaultdict(set)
    for clinician_id, instruction_id in Assignment.objects.filter(
        clinician_id__in=clinician_ids
    ).values_list("clinician_id", "instruction_id"):
        held[clinician_id].add(instruction_id)
    return held


def purpose_counts(study_ids: set[int], clinician_ids: set[int]) -> dict[tuple[int, int, str], int]:
    """(study, clinician, purpose) -> assignments held."""
    return {
        (row["study_id"], row["clinician_id"], row["purpose"]): row["n"]
        for row in Assignment.objects.filter(study_id__in=study_ids, clinician_id__in=clinician_ids)
        .values("study_id", "clinician_id", "purpose")
        .annotate(n=Count("id"))
    }


# --- reviews as rows -----------------------------------------------------------------------------
def quality_rows(
    study: Study,
    purposes: tuple[str, ...] = (Assignment.Purpose.REVIEW, Assignment.Purpose.GOLD),
    *,
    response_ids: set[int] | None = None,
) -> QualityRows:
    """The study's submitted, assessable reviews of ``purposes`` (of the instructions of
    ``response_ids``, when given) as QualityRows."""
    return _rows(study, purposes, response_ids=response_ids)[0]


def _rows(
    study: Study, purposes: tuple[str, ...], *, response_ids: set[int] | None = None
) -> tuple[QualityRows, dict[int, str]]:
    """The study's submitted, assessable reviews of ``purposes`` as QualityRows, and each
    review's assignment purpose (one query)."""
    judgements = ResponseJudgement.objects.filter(
        review__assignment__study=study,
        review__assignment__purpose__in=purposes,
        review__status=Review.Status.SUBMITTED,
        review__cannot_assess="",
    )
    if response_ids is not None:
        judgements = judgements.filter(
            review__assignment__instruction__responses__in=response_ids
        ).distinct()
    values = list(
        judgements.order_by("review_id", "position").values_list(
            "review_id",
            "review__assignment__clinician_id",
            "review__assignment__instruction_id",
            "response_id",
            "rank",
            "is_correct",
            "position",
            "review__submitted_at",
            "review__time_spent_seconds",
            "review__assignment__purpose",
        )
    )
    cols = list(zip(*values, strict=True)) if values else [()] * 10
    rows = QualityRows(
        review=np.asarray(cols[0], dtype=np.int64),
        clinician=np.asarray(cols[1], dtype=np.int64),
        instruction=np.asarray(cols[2], dtype=np.int64),
        response=np.asarray(cols[3], dtype=np.int64),
        rank=np.array([math.nan if r is None else r for r in cols[4]], dtype=float),
        correct=np.array([math.nan if c is None else float(c) for c in cols[5]], dtype=float),
        position=np.asarray(cols[6], dtype=np.int64),
        submitted_at=np.array([t.timestamp() if t else 0.0 for t in cols[7]], dtype=float),
        time_spent=np.asarray(cols[8], dtype=float),
    )
    return rows, dict(zip(cols[0], cols[9], strict=True))


# --- the admin's quality page --------------------------------------------------------------------
@dataclass
class CalibrationSummary:
    assigned: int = 0
    submitted: int = 0
    matches: int = 0
    verdicts: int = 0
    taus: list[float] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.assigned > 0 and self.submitted == self.assigned

    @property
    def share(self) -> float:
        return self.matches / self.verdicts if self.verdicts else math.nan

    @property
    def mean_tau(self) -> float:
        known = [t for t in self.taus if not math.isnan(t)]
        return float(np.mean(known)) if known else math.nan


@dataclass
class ClinicianRow:
    clinician_id: int
    email: str
    pseudonym: str
    is_simulated: bool
    quality: ClinicianQuality
    calibration: CalibrationSummary
    exclusion: ClinicianExclusion | None = None


@dataclass
class GoldItemRow:
    item: GoldItem
    instruction_code: str
    reviews: int  # submitted reviews of it in the study, any purpose


@dataclass
class Disagreement:
    instruction_id: int
    instruction_code: str
    review_ids: list[int]
    clinician_ids: list[int]
    split: list[int]  # response ids whose correctness verdicts split
    min_tau: float = math.nan
    adjudication: Adjudication | None = None

    @property
    def evidence(self) -> dict[str, object]:
        return {
            "split": self.split,
            "min_tau": None if math.isnan(self.min_tau) else self.min_tau,
            "reviews": self.review_ids,
        }


@dataclass
class StudyQuality:
    study: Study
    policy: QualityPolicy
    clinicians: list[ClinicianRow]
    gold_items: list[GoldItemRow]
    disagreements: list[Disagreement]
    exclusions: list[ClinicianExclusion]
    adjudicators: list[User]

    @property
    def flagged(self) -> int:
        return sum(1 for c in self.clinicians if c.quality.flags)


def calibration_summaries(study: Study) -> dict[int, CalibrationSummary]:
    """Per clinician: calibration items assigned and submitted in the study, and how their
    judgements compare with the references."""
    out: dict[int, CalibrationSummary] = defaultdict(CalibrationSummary)
    for clinician_id, status in Assignment.objects.filter(
        study=study, purpose=Assignment.Purpose.CALIBRATION
    ).values_list("clinician_id", "review__status"):
        out[clinician_id].assigned += 1
        out[clinician_id].submitted += status == Review.Status.SUBMITTED
    rows, _ = _rows(study, (Assignment.Purpose.CALIBRATION,))
    references = gold_references(study, use=GoldItem.Use.CALIBRATION)
    result: CalibrationResult
    for result in calibration_results(rows, references):
        summary = out[result.clinician]
        summary.matches += result.matches
        summary.verdicts += result.verdicts
        summary.taus.append(result.tau)
    return dict(out)


def study_quality(study: Study) -> StudyQuality:
    """Everything the admin's quality page shows for one study (a handful of queries)."""
    policy = quality_policy(study)
    rows, _ = _rows(study, (Assignment.Purpose.REVIEW, Assignment.Purpose.GOLD))
    figures = clinician_quality(
        rows,
        gold=gold_references(study, use=GoldItem.Use.GOLD),
        window=policy.drift_window,
        seed=study.pk,
    )
    calibration = calibration_summaries(study)
    exclusions = list(
        ClinicianExclusion.objects.filter(study=study)
        .select_related("clinician", "excluded_by", "lifted_by")
        .order_by("-excluded_at")
    )
    active = {e.clinician_id: e for e in exclusions if e.is_active}
    ids = set(figures) | set(calibration) | set(active)
    people = {u.pk: u for u in User.objects.filter(pk__in=ids)}
    clinicians = [
        ClinicianRow(
            clinician_id=pk,
            email=people[pk].email,
            pseudonym=people[pk].pseudonym,
            is_simulated=people[pk].is_simulated,
            quality=figures.get(pk) or ClinicianQuality(clinician=pk, n_reviews=0),
            calibration=calibration.get(pk) or CalibrationSummary(),
            exclusion=active.get(pk),
        )
        for pk in sorted(ids, key=lambda pk: people[pk].email)
    ]
    reviewed = dict(
        Review.objects.filter(assignment__study=study, status=Review.Status.SUBMITTED)
        .values("assignment__instruction_id")
        .annotate(n=Count("id"))
        .values_list("assignment__instruction_id", "n")
    )
    items = [
        GoldItemRow(
            item=item,
            instruction_code=item.instruction.instruction_id,
            reviews=reviewed.get(item.instruction_id, 0),
        )
        for item in GoldItem.objects.filter(study=study)
        .select_related("instruction", "senior")
        .order_by("use", "instruction__instruction_id")
    ]
    return StudyQuality(
        study=study,
        policy=policy,
        clinicians=clinicians,
        gold_items=items,
        disagreements=disagreements(study, threshold=policy.adjudication_tau),
        exclusions=exclusions,
        adjudicators=adjudicator_candidates(),
    )


def adjudicator_candidates() -> list[User]:
    """Accounts an admin may ask to adjudicate: current adjudicator access and nothing that
    reads model names."""
    candidates = User.objects.filter(
        applications__status=AccessApplication.Status.APPROVED, applications__is_adjudicator=True
    ).distinct()
    return [
        u
        for u in candidates.order_by("email")
        if user_access(u).is_adjudicator and not unblinding_roles(u)
    ]


def senior_candidates() -> list[User]:
    """Who may set a reference: accounts with current clinician or adjudicator access."""
    found = {u.pk: u for u in clinicians_approved()}
    found.update({u.pk: u for u in adjudicator_candidates()})
    return sorted(found.values(), key=lambda u: u.email)


def disagreements(
    study: Study, *, threshold: float, instruction_ids: set[int] | None = None
) -> list[Disagreement]:
    """The study's instructions whose submitted reviews (ordinary ones, at least two by
    different clinicians) split on a response's correctness, or rank the responses with a
    Kendall's tau-b below ``threshold`` between some two of them."""
    rows, purpose = _rows(study, (Assignment.Purpose.REVIEW,))
    by_instruction: dict[int, dict[int, dict[int, tuple[float, float]]]] = defaultdict(dict)
    clinician_of: dict[int, int] = {}
    for i in range(len(rows)):
        review = int(rows.review[i])
        instruction = int(rows.instruction[i])
        if instruction_ids is not None and instruction not in instruction_ids:
            continue
        clinician_of[review] = int(rows.clinician[i])
        by_instruction[instruction].setdefault(review, {})[int(rows.response[i])] = (
            float(rows.rank[i]),
            float(rows.correct[i]),
        )
    codes = dict(
        study.dataset.instructions.filter(pk__in=list(by_instruction)).values_list(
            "pk", "instruction_id"
        )
    )
    existing = {
        a.instruction_id: a
        for a in Adjudication.objects.filter(
            study=study, instruction_id__in=list(by_instruction)
        ).select_related("adjudicator")
    }
    out = []
    for instruction, reviews in sorted(by_instruction.items(), key=lambda kv: codes.get(kv[0], "")):
        if len({clinician_of[r] for r in reviews}) < 2:
            continue
        verdicts: dict[int, set[float]] = defaultdict(set)
        for judged in reviews.values():
            for response, (_rank, correct) in judged.items():
                if not math.isnan(correct):
                    verdicts[response].add(correct)
        split = sorted(r for r, v in verdicts.items() if len(v) > 1)
        taus = []
        for a, b in combinations(sorted(reviews), 2):
            if clinician_of[a] == clinician_of[b]:
                continue
            common = sorted(set(reviews[a]) & set(reviews[b]))
            tau = kendall_tau_b(
                np.array([reviews[a][x][0] for x in common]),
                np.array([reviews[b][x][0] for x in common]),
            )
            if not math.isnan(tau):
                taus.append(tau)
        min_tau = min(taus) if taus else math.nan
        if not split and not (taus and min_tau < threshold):
            continue
        out.append(
            Disagreement(
                instruction_id=instruction,
                instruction_code=codes.get(instruction, str(instruction)),
                review_ids=sorted(reviews),
                clinician_ids=sorted({clinician_of[r] for r in reviews}),
                split=split,
                min_tau=min_tau,
                adjudication=existing.get(instruction),
            )
        )
    return out


def exclusions_active(study: Study) -> QuerySet[ClinicianExclusion]:
    return ClinicianExclusion.objects.filter(study=study, lifted_at__isnull=True).select_related(
        "clinician"
    )


# --- calibration feedback on the review page -----------------------------------------------------
@dataclass
class FeedbackRow:
    label: str
    rank: int | None
    is_correct: bool | None
    reference_rank: int | None
    reference_correct: bool | None

    @property
    def correct_matches(self) -> bool:
        return self.is_correct == self.reference_correct


@dataclass
class CalibrationFeedback:
    reason: str
    source: str
    rows: list[FeedbackRow]

    @property
    def matches(self) -> int:
        return sum(1 for r in self.rows if r.correct_matches)


def calibration_feedback(assignment: Assignment, review: Review) -> CalibrationFeedback | None:
    """The reference judgement of a submitted calibration review, beside the clinician's own,
    by the labels the review showed; None for any other review (and before submitting)."""
    if (
        assignment.purpose != Assignment.Purpose.CALIBRATION
        or review.status != Review.Status.SUBMITTED
    ):
        return None
    item = (
        GoldItem.objects.filter(
            study_id=assignment.study_id,
            instruction_id=assignment.instruction_id,
            use=GoldItem.Use.CALIBRATION,
        )
        .prefetch_related("judgements")
        .first()
    )
    if item is None:
        return None
    reference = {j.response_id: j for j in item.judgements.all()}
    mine = {j.response_id: j for j in ResponseJudgement.objects.filter(review=review)}
    rows = []
    for position, rid in enumerate(int(r) for r in review.shown_order):
        ref, own = reference.get(rid), mine.get(rid)
        rows.append(
            FeedbackRow(
                label=response_label(position),
                rank=own.rank if own else None,
                is_correct=own.is_correct if own else None,
                reference_rank=ref.rank if ref else None,
                reference_correct=ref.is_correct if ref else None,
            )
        )
    return CalibrationFeedback(
        reason=item.reason, source=GoldItem.Source(item.source).label, rows=rows
    )


def gold_item_for(study: Study, instruction_id: int) -> GoldItem | None:
    return (
        GoldItem.objects.filter(study=study, instruction_id=instruction_id)
        .prefetch_related("judgements")
        .first()
    )


def clinicians_to_calibrate(study: Study) -> list[User]:
    """Clinicians with current access and no calibration in the study yet."""
    calibrated = set(
        Assignment.objects.filter(study=study, purpose=Assignment.Purpose.CALIBRATION).values_list(
            "clinician_id", flat=True
        )
    )
    return [c for c in clinicians_approved() if c.pk not in calibrated]


def has_quality_data(study: Study) -> bool:
    return (
        GoldItem.objects.filter(study=study).exists()
        or Review.objects.filter(assignment__study=study, status=Review.Status.SUBMITTED)
        .filter(~Q(assignment__purpose=Assignment.Purpose.REVIEW))
        .exists()
    )
