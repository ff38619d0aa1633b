"""Deleting a dataset: counted, audited, in one transaction, never by Django's admin.

The admin's delete confirmation collected every object a dataset cascades to, one query per
relation and object, before showing them: on the demo (61,000 rows) the page took a minute and
would be killed by gunicorn's timeout. Deletion is a command
(``manage.py delete_dataset``) through ``dataset_delete``; the admin shows the counts.
"""

from typing import Any

from django.db import transaction
from django.http import HttpRequest

from review.models import AuditEvent, Dataset, ResponseJudgement, Review, User
from review.selectors.datasets import dataset_contents
from review.services.audit import audit_record


class DatasetError(ValueError):
    """A deletion refused; the message says why and what to do."""


@transaction.atomic
def dataset_delete(
    *,
    dataset: Dataset,
    actor: User | None = None,
    with_reviews: bool = False,
    request: HttpRequest | None = None,
) -> dict[str, int]:
    """Delete ``dataset`` and everything in it; return what was deleted, by kind.

    Reviews are clinicians' judgements and protected from cascades: a dataset that has any is
    deleted only with ``with_reviews=True`` (their judgements go with them).
    """
    dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
    contents = dataset_contents(dataset)
    if contents["reviews"] and not with_reviews:
        raise DatasetError(
            f"Dataset {dataset.name} has {contents['reviews']} reviews (clinicians' "
            "judgements): export what you need, then delete it with --with-reviews."
        )
    reviews = Review.objects.filter(assignment__instruction__dataset=dataset)
    through: Any = ResponseJudgement.error_tags.through
    through.objects.filter(responsejudgement__review__in=reviews).delete()
    ResponseJudgement.objects.filter(review__in=reviews).delete()
    reviews.delete()
    name, synthetic = dataset.name, dataset.is_synthetic
    # The rest cascades; Django deletes rows nothing else points at with one DELETE per table.
    dataset.delete()
    audit_record(
        action=AuditEvent.Action.DATASET_DELETED,
        actor=actor,
        request=request,
        details={"dataset": name, "synthetic": synthetic, "deleted": contents},
    )
    return contents
