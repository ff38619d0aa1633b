"""What a dataset holds, counted (never walked object by object: the demo holds 61,000 rows)."""

from review.models import (
    Assignment,
    Dataset,
    Encounter,
    Event,
    ModelResponse,
    ReferenceResponse,
    Review,
)


def dataset_contents(dataset: Dataset) -> dict[str, int]:
    """Rows that belong to ``dataset``, by kind: one COUNT each."""
    return {
        "patients": dataset.patients.count(),
        "encounters": Encounter.objects.filter(patient__dataset=dataset).count(),
        "events": Event.objects.filter(patient__dataset=dataset).count(),
        "instructions": dataset.instructions.count(),
        "reference answers": ReferenceResponse.objects.filter(instruction__dataset=dataset).count(),
        "model responses": ModelResponse.objects.filter(instruction__dataset=dataset).count(),
        "assignments": Assignment.objects.filter(instruction__dataset=dataset).count(),
        "reviews": Review.objects.filter(assignment__instruction__dataset=dataset).count(),
        # The scoring app's rows, through their relations (review does not import scoring).
        "scoring runs": dataset.scoring_runs.count(),
        "reports": dataset.reports.count(),
        "generation runs": dataset.generation_runs.count(),
    }


def datasets_by_name() -> list[Dataset]:
    """Every dataset, by name (id and name only): the admin home links each one's studies."""
    return list(Dataset.objects.order_by("name").only("id", "name"))
