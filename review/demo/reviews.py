"""Simulated clinician reviews for the demo, so a correlation report has something to show.

These are NOT clinicians' judgements. They come from accounts named "Simulated clinician N"
(``simulated-N@demo.medalign.local``, no usable password) marked ``User.is_simulated``: reports
count them apart from real reviews and show a banner when any are included.

Each simulated clinician reviews every instruction of the dataset. A response's latent quality is
its model's skill in the synthetic generator plus a bonus when the release marks it correct, plus
per-instruction noise; each clinician ranks by quality plus personal noise, rounded so that ties
occur, with competition ranks (1, 1, 3) as the review page produces. Correctness follows the
release label, flipped now and then (clinicians disagree). The reviews go through the real review
services (start, submit), so shown order, validation and audit are exactly a clinician's.
"""

import hashlib
from typing import Any

import numpy as np
from django.db import transaction
from numpy.typing import NDArray
from scipy.stats import rankdata

from review.demo.accounts import DemoAccount, demo_account_ensure
from review.demo.synthetic import MODEL_SKILL
from review.models import Assignment, Dataset, ErrorTag, ModelResponse, Review, Role, User
from review.services.reviews import review_get_or_start, review_submit
from review.services.studies import study_first_round

SIMULATED_DOMAIN = "demo.medalign.local"
SIMULATED_PREFIX = "simulated-"
CORRECT_FLIP = 0.1  # share of responses whose correctness a simulated clinician calls otherwise


def simulated_email(n: int) -> str:
    return f"{SIMULATED_PREFIX}{n}@{SIMULATED_DOMAIN}"


def _simulated_clinician(n: int) -> User:
    email = simulated_email(n)
    if not User.objects.filter(email=email).exists():
        # No usable password: nobody signs in as a simulated clinician.
        User.objects.create_user(
            email, None, full_name=f"Simulated clinician {n}", is_simulated=True
        )
    return demo_account_ensure(
        DemoAccount(email, f"Simulated clinician {n}", (Role.CLINICIAN,), "Simulated")
    )


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, ("medalign-sim", *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big"))


def _skill(model_name: str) -> float:
    return MODEL_SKILL.get(model_name, 0.5)


# Every draw is keyed by names (dataset, instruction id, model, clinician number), never by
# database ids, so the same data gives the same simulated reviews in any database.
def _latent_quality(responses: list[ModelResponse], key: str) -> NDArray[np.float64]:
    rng = _rng("instruction", key)
    quality = []
    for r in responses:
        if r.release_rank is not None:
            base = -float(r.release_rank) / 2.0  # rank 1 is best
        else:
            base = 2.0 * _skill(r.model_name)
        if r.release_binary_correct is not None:
            base += 0.8 if r.release_binary_correct else 0.0
        quality.append(base)
    noise = rng.normal(0.0, 0.4, size=len(responses))
    return np.asarray(quality, dtype=np.float64) + noise


def _payload(
    review: Review,
    responses: dict[int, ModelResponse],
    quality: dict[int, float],
    clinician_n: int,
    tags: list[str],
) -> dict[str, Any]:
    instruction = review.assignment.instruction
    rng = _rng("review", clinician_n, instruction.instruction_id)
    order = [int(rid) for rid in review.shown_order]
    by_name = sorted(order, key=lambda rid: responses[rid].model_name)
    noise = dict(zip(by_name, rng.normal(0.0, 0.35, len(by_name)).tolist(), strict=True))
    perceived = np.asarray([quality[rid] + noise[rid] for rid in order])
    # Rounding to half points makes close responses tie, as clinicians' ranks do.
    ranks = rankdata(-np.round(perceived * 2.0) / 2.0, method="min").astype(int)
    edits = []
    at = 0  # simulated: the edits carry no real time
    for handle, rid, rank in zip(review.handles, order, ranks, strict=True):
        response = responses[rid]
        truth = response.release_binary_correct
        correct = bool(truth) if truth is not None else bool(quality[rid] > 1.6)
        draw = _rng("judgement", clinician_n, instruction.instruction_id, response.model_name)
        if draw.random() < CORRECT_FLIP:
            correct = not correct
        error_tags = [tags[int(draw.integers(len(tags)))]] if (not correct and tags) else []
        edits += [
            {"handle": handle, "field": "rank", "value": int(rank), "at": at},
            {"handle": handle, "field": "is_correct", "value": correct, "at": at},
            {"handle": handle, "field": "tags", "value": error_tags, "at": at},
        ]
    return {"edits": edits, "tab": "simulated", "seq": 1, "active_seconds": 0}


def demo_simulated_reviews(*, dataset_name: str, n_clinicians: int = 3) -> list[str]:
    """Create (idempotently) simulated clinicians and their submitted reviews; lines to print."""
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if dataset is None:
        return [f"Simulated reviews skipped: no dataset {dataset_name!r}."]
    clinicians = [_simulated_clinician(n) for n in range(1, n_clinicians + 1)]
    external_ids = dict(dataset.instructions.values_list("id", "instruction_id"))
    instructions = sorted(external_ids)
    # The simulated clinicians review the dataset's latest study, as real ones would.
    study = study_first_round(dataset=dataset)
    Assignment.objects.bulk_create(
        [
            Assignment(study=study, instruction_id=i, clinician=c)
            for c in clinicians
            for i in instructions
        ],
        ignore_conflicts=True,
    )
    responses_by_instruction: dict[int, dict[int, ModelResponse]] = {}
    for response in ModelResponse.objects.filter(studies__study=study).order_by("id"):
        responses_by_instruction.setdefault(response.instruction_id, {})[response.pk] = response
    quality: dict[int, float] = {}
    for instruction_pk, responses in responses_by_instruction.items():
        ordered = sorted(responses.values(), key=lambda r: r.model_name)
        values = _latent_quality(ordered, f"{dataset.name}:{external_ids[instruction_pk]}")
        quality.update(zip((r.pk for r in ordered), values.tolist(), strict=True))
    tags = list(ErrorTag.objects.filter(is_active=True).values_list("slug", flat=True))
    submitted = 0
    for n, clinician in enumerate(clinicians, start=1):
        assignments = (
            Assignment.objects.filter(clinician=clinician, study=study)
            .exclude(review__status=Review.Status.SUBMITTED)
            .select_related("instruction")
            .order_by("instruction_id")
        )
        for assignment in assignments:
            responses = responses_by_instruction.get(assignment.instruction_id, {})
            if len(responses) < 2:
                continue
            with transaction.atomic():
                review = review_get_or_start(assignment=assignment)
                payload = _payload(review, responses, quality, n, tags)
                review_submit(review_id=review.pk, clinician=clinician, payload=payload)
            submitted += 1
    total = Review.objects.filter(
        assignment__clinician__in=clinicians,
        assignment__study=study,
        status=Review.Status.SUBMITTED,
    ).count()
    return [
        f"Simulated reviews (SIMULATED, not clinicians' judgements): {submitted} new, {total} in "
        f"all, by {', '.join(c.email for c in clinicians)}."
    ]
