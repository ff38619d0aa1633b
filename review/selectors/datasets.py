"""What a dataset holds, counted (never walked object by object: the demo holds 61,000 rows),
and the model names masking reads for its clinician pages."""

import time

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


def datasets_not_synthetic() -> list[str]:
    """Names of the datasets not marked synthetic (imported real data, or not known to be fake)."""
    return sorted(Dataset.objects.filter(is_synthetic=False).values_list("name", flat=True))


def debug_refusal(names: list[str]) -> str:
    """Why a process with the DEBUG settings does not serve beside ``names``, and what to do.

    DEBUG is for synthetic data: its cookies go over plain HTTP, its keys are kept in DATA_DIR,
    and it loads demo accounts whose passwords and TOTP secrets are in the README."""
    listed = ", ".join(names)
    return (
        f"This database holds {listed}, which is not synthetic, and DEBUG (make demo, make run) "
        "is for synthetic data only. Keep real data in a database of its own and serve it "
        "without DEBUG: for example DATA_DIR=/secure/medalign-var (its own SQLite file, keys "
        "and certificates) or DATABASE_URL=postgres://postgres@127.0.0.1:5432/medalign_real, "
        "with SECRET_KEY and MFA_ENCRYPTION_KEY set, then `DEBUG=false make run` (README: "
        "Settings). The demo keeps var/ to itself. Once the data is imported there, take it "
        f"out of this database with manage.py delete_dataset {names[0]} --yes."
    )


def datasets_by_name() -> list[Dataset]:
    """Every dataset, by name (id and name only): the admin home links each one's studies."""
    return list(Dataset.objects.order_by("name").only("id", "name"))


# Every clinician page masks its responses against the dataset's model names: each process
# reads them once per dataset and again after this long, as it does the error tags. A model
# added to the dataset meanwhile is masked on every page from the next read on; until then a
# page still masks its own set's names, which it reads with the responses.
MODEL_NAMES_CACHE_SECONDS = 30.0
_MODEL_NAMES_MAX_DATASETS = 64
_model_names: dict[int, tuple[float, tuple[str, ...]]] = {}


def dataset_model_names(dataset_id: int) -> tuple[str, ...]:
    """Every model name of the dataset's responses (candidates included), sorted: one
    ``SELECT DISTINCT`` per process and dataset at most every ``MODEL_NAMES_CACHE_SECONDS``.
    The same tuple for every page of a dataset, so the masker compiled for it is reused
    (``review.blinding`` caches it by its names)."""
    now = time.monotonic()
    cached = _model_names.get(dataset_id)
    if cached is not None and now - cached[0] <= MODEL_NAMES_CACHE_SECONDS:
        return cached[1]
    names = tuple(
        sorted(
            ModelResponse.objects.filter(instruction__dataset_id=dataset_id)
            .order_by()
            .values_list("model_name", flat=True)
            .distinct()
        )
    )
    if len(_model_names) >= _MODEL_NAMES_MAX_DATASETS:
        _model_names.clear()
    _model_names[dataset_id] = (now, names)
    return names


def dataset_model_names_forget() -> None:
    _model_names.clear()
