"""Importers for the MedAlign release files (TSV/CSV tables and both EHR XML formats)."""

from .errors import ImportFailed, Problem
from .loader import ImportSummary, import_release, total_bytes

__all__ = ["ImportFailed", "ImportSummary", "Problem", "import_release", "total_bytes"]
