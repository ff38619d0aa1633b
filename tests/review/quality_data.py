"""A study with clinicians, gold items and submitted reviews, for the reviewing-quality tests.

Every review is made through the services a browser reaches (start, submit), so the rows are
what the app writes. Judgements are given by model name, whatever order a review showed.
"""

import time
from types import SimpleNamespace

from review.models import Assignment, ModelResponse, Review, Role
from review.services.reviews import review_get_or_start, review_submit
from tests import factories
from tests.review import review_data

# Four responses per instruction; the release's own clinicians judged them so.
RELEASE = {
    review_data.MODEL_NAMES[0]: (1, True),
    review_data.MODEL_NAMES[1]: (2, True),
    review_data.MODEL_NAMES[2]: (3, False),
    review_data.MODEL_NAMES[3]: (4, False),
}


def edits(review: Review, judgements: dict[str, tuple[int, bool]]) -> dict:
    """A submit payload giving each response (by model name) its rank and verdict."""
    names = dict(
        ModelResponse.objects.filter(pk__in=review.shown_order).values_list("id", "model_name")
    )
    now = int(time.time() * 1000)
    out = []
    for handle, rid in zip(review.handles, review.shown_order, strict=True):
        rank, correct = judgements[names[int(rid)]]
        out += [
            {"handle": handle, "field": "rank", "value": rank, "at": now},
            {"handle": handle, "field": "is_correct", "value": correct, "at": now},
        ]
    return {"edits": out, "tab": "t", "seq": 1, "active_seconds": 0}


def submit(assignment: Assignment, judgements: dict[str, tuple[int, bool]]) -> Review:
    review = review_get_or_start(assignment=assignment)
    review_submit(
        review_id=review.pk, clinician=assignment.clinician, payload=edits(review, judgements)
    )
    return Review.objects.get(pk=review.pk)


def make_world(*, n_instructions: int = 6, n_clinicians: int = 3, prefix: str = "Q"):
    w = SimpleNamespace()
    factories.active_dua()
    w.dataset = review_data.make_dataset(f"quality-{prefix.lower()}")
    w.patient = review_data.make_record(w.dataset, f"P-{prefix}", n_events=20)
    w.instructions = []
    for i in range(n_instructions):
        instruction = review_data.make_instruction(w.dataset, w.patient, f"{prefix}-{i:02d}")
        for response in instruction.responses.all():
            rank, correct = RELEASE[response.model_name]
            response.release_rank, response.release_binary_correct = float(rank), correct
            response.save(update_fields=["release_rank", "release_binary_correct"])
        w.instructions.append(instruction)
    w.study = factories.put_in_study(*w.instructions)
    w.clinicians = [
        factories.make_user(f"{prefix.lower()}c{k}@example.edu", roles=[Role.CLINICIAN])
        for k in range(n_clinicians)
    ]
    w.admin = factories.make_user(f"{prefix.lower()}admin@example.edu", roles=[Role.ADMIN])
    w.adjudicator = factories.make_user(
        f"{prefix.lower()}adj@example.edu", roles=[Role.ADJUDICATOR], full_name="Ada Judge"
    )
    return w
