"""One import as every reader sees it: the dataset it writes into, its options, its report.

The MedAlign release reader, the MEDS reader and the OMOP reader all write through an
``ImportRun``: they add to one ``ImportSummary`` (what was read, skipped, fell back, looks
wrong) and one ``ProblemCollector`` (what refuses the import), so a release that mixes formats
is reported, and refused, as one import.
"""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from review.models import Dataset

from .errors import ProblemCollector

ProgressFn = Callable[[int], None]


@dataclass
class ImportSummary:
    dataset: str
    files: dict[str, str] = field(default_factory=dict)  # file -> kind
    counts: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    # MEDS and OMOP: per table or code family, rows "read", rows that "fell back" (a concept
    # missing from the vocabulary, shown by its source value) and rows "ignored", so a data
    # manager sees at once whether the cohort came through whole.
    sources: dict[str, Counter[str]] = field(default_factory=dict)
    warnings: Counter[str] = field(default_factory=Counter)  # read but looks wrong -> rows

    def tally(self, source: str, outcome: str, n: int = 1) -> None:
        """Count ``n`` rows of ``source`` (a table or code family) as ``outcome``."""
        self.sources.setdefault(source, Counter())[outcome] += n

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "files": self.files,
            "counts": dict(self.counts),
            "skipped": dict(self.skipped),
            "sources": {name: dict(counts) for name, counts in self.sources.items()},
            "warnings": dict(self.warnings),
        }


def _no_progress(n: int) -> None:
    """Progress reported to no one."""


class ImportRun:
    """The dataset an import writes into, whether it replaces records already there, where it
    reports progress (bytes read), and the summary and problems every reader adds to."""

    def __init__(self, dataset: Dataset, *, replace: bool, progress: ProgressFn | None) -> None:
        self.dataset = dataset
        self.replace = replace
        self.progress: ProgressFn = progress or _no_progress
        self.summary = ImportSummary(dataset=dataset.name)
        self.problems = ProblemCollector()
