"""Writes of the stored record excerpts (``RecordExcerpt``): one per instruction.

The excerpt does not depend on the clinician: the import prepares each instruction's (ranked
and rendered), and a page view that finds none current prepares and stores it, so every later
view, by anyone, reads one row. Two first views at once both compute and the later write wins,
with the same content.
"""

from collections.abc import Callable

from django.db import transaction
from django.utils.safestring import SafeString, mark_safe

from review.models import Instruction, Patient, RecordExcerpt
from review.selectors import records
from review.selectors.records import Excerpt


@transaction.atomic
def record_excerpt_store(
    *,
    instruction: Instruction,
    patient: Patient,
    fingerprint: str,
    excerpt: Excerpt,
    html: str = "",
    html_version: str = "",
) -> None:
    """Store (or replace) the excerpt of ``instruction`` computed from ``patient``'s record,
    with its rendered HTML when the caller rendered it."""
    RecordExcerpt.objects.update_or_create(
        instruction=instruction,
        defaults={
            "patient": patient,
            "fingerprint": fingerprint,
            "content": excerpt.to_json(),
            "html": html,
            "html_version": html_version,
        },
    )


def record_excerpt_prepare(
    *,
    instruction: Instruction,
    patient: Patient,
    fingerprint: str,
    excerpt: Excerpt | None = None,
) -> str:
    """Rank one instruction's excerpt (unless given its stored ranking), render it as the review
    page shows it and store both; returns the HTML. Used by the import's preparation and by a
    page view that finds none current."""
    if excerpt is None:
        excerpt = records.record_excerpt(instruction, patient)
    html = records.record_excerpt_render(instruction, excerpt)
    record_excerpt_store(
        instruction=instruction,
        patient=patient,
        fingerprint=fingerprint,
        excerpt=excerpt,
        html=html,
        html_version=records.excerpt_html_version(),
    )
    return html


def record_excerpts_prepare(
    *, dataset_id: int, progress: Callable[[int], object] | None = None
) -> int:
    """Rank and render the excerpt of every instruction of the dataset that has none current,
    so no clinician's page view pays for it (BM25 over a record's latest notes: tens of
    milliseconds, against one row read). Returns how many were prepared.

    Run after an import commits, one instruction at a time (each its own short transaction):
    an interruption leaves the rest to be prepared on first view, as before.
    """
    version = records.excerpt_html_version()
    current = {
        pk: (fingerprint, html_version)
        for pk, fingerprint, html_version in RecordExcerpt.objects.filter(
            instruction__dataset_id=dataset_id
        ).values_list("instruction_id", "fingerprint", "html_version")
    }
    prepared = 0
    instructions = (
        Instruction.objects.filter(dataset_id=dataset_id, patient__isnull=False)
        .select_related("patient")
        .order_by("pk")
    )
    for instruction in instructions.iterator(chunk_size=200):
        patient = instruction.patient
        assert patient is not None  # filtered above
        fingerprint = records.record_excerpt_fingerprint(instruction, patient)
        if current.get(instruction.pk) == (fingerprint, version):
            continue
        record_excerpt_prepare(instruction=instruction, patient=patient, fingerprint=fingerprint)
        prepared += 1
        if progress is not None:
            progress(1)
    return prepared


def record_excerpt_cached(instruction: Instruction, patient: Patient) -> Excerpt:
    """``record_excerpt()`` read from its stored row, computed and stored when none is current
    (question or record changed, or never prepared)."""
    stored = records.record_excerpt_stored_ranking(instruction, patient)
    if stored is not None:
        return stored
    excerpt = records.record_excerpt(instruction, patient)
    record_excerpt_store(
        instruction=instruction,
        patient=patient,
        fingerprint=records.record_excerpt_fingerprint(instruction, patient),
        excerpt=excerpt,
    )
    return excerpt


def record_excerpt_html(instruction: Instruction, patient: Patient) -> SafeString:
    """The excerpt's HTML for the review page: one row read on every view after the first.

    An instruction imported before excerpts were prepared, or whose record or question changed,
    is ranked on its first view and stored; a stored excerpt rendered by other templates is
    rendered again from its stored ranking.
    """
    stored = records.record_excerpt_stored(instruction, patient)
    if stored.html is not None:
        return mark_safe(stored.html)  # noqa: S308 - rendered by the template, which escapes
    html = record_excerpt_prepare(
        instruction=instruction,
        patient=patient,
        fingerprint=stored.fingerprint,
        excerpt=stored.ranking,
    )
    return mark_safe(html)  # noqa: S308 - rendered by the template, which escapes
