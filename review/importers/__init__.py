"""Importers for the MedAlign release files (TSV/CSV tables and both EHR XML formats), MEDS
datasets and OMOP CDM tables (``dispatch`` says which files are which)."""

from .dispatch import import_release, total_bytes
from .errors import ImportFailed, Problem
from .run import ImportSummary, ProgressFn

__all__ = [
    "ImportFailed",
    "ImportSummary",
    "Problem",
    "ProgressFn",
    "import_release",
    "total_bytes",
]
