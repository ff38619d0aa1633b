"""Writes of the vocabulary synonyms a dataset brings (``EventNameSynonym``).

An importer reads them (an OMOP export's ``concept_synonym``: ``review.importers.omop.synonyms``)
and stores them here, keyed by the event name, so search and the excerpt find an event under any
name its vocabulary gives it.
"""

from collections.abc import Iterable

from django.db import transaction

from review.models import Dataset, EventNameSynonym

MAX_PER_NAME = 20  # a few concepts carry hundreds of synonyms (trade names): the first 20 do


@transaction.atomic
def event_name_synonyms_store(*, dataset: Dataset, pairs: Iterable[tuple[str, str]]) -> int:
    """Store (name, synonym) pairs for ``dataset``, replacing what its names had; returns how
    many. A synonym equal to its name (ignoring case) is no synonym and is skipped."""
    by_name: dict[str, dict[str, None]] = {}
    for name, synonym in pairs:
        name, synonym = name.strip(), synonym.strip()
        if name and synonym and synonym.lower() != name.lower():
            kept = by_name.setdefault(name, {})
            if len(kept) < MAX_PER_NAME:
                kept[synonym] = None
    if not by_name:
        return 0
    names = list(by_name)
    for start in range(0, len(names), 500):
        EventNameSynonym.objects.filter(
            dataset=dataset, name__in=names[start : start + 500]
        ).delete()
    rows = [
        EventNameSynonym(dataset=dataset, name=name, synonym=synonym)
        for name, synonyms in by_name.items()
        for synonym in synonyms
    ]
    EventNameSynonym.objects.bulk_create(rows, batch_size=2000)
    return len(rows)
