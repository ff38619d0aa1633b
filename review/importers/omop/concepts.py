"""What a concept id names: a code (``VOCABULARY/concept_code``, e.g. ``LOINC/8867-4``) and a name.

The ``concept`` table, when the export has one, goes to a temporary table (a full vocabulary
export holds millions of concepts); each batch looks up, in one query, the concepts earlier
batches did not need, and up to ``CONCEPT_CACHE_MAX`` are kept. Without a concept table an id
is ``CONCEPT/<id>``, named by the row's source value. Concept 0 ("no matching concept") names
nothing. An id that a present concept table lacks is a gap in the vocabulary export, not in the
record (OHDSI's own Synthea sample lacks the gender concepts): ``CONCEPT/<id>`` too, counted as
fallen back, and the summary names the ids.
"""

from typing import NamedTuple

from ..run import ImportSummary
from ..scratch import ScratchTable
from .columns import Columns

# Concepts looked up for earlier batches are kept, up to this many (then forgotten, and looked up
# again when needed): a full vocabulary export holds millions.
CONCEPT_CACHE_MAX = 100_000


class Named(NamedTuple):
    """A concept as the record shows it. ``fell_back``: the concept table lacks the id, so the
    code is ``CONCEPT/<id>`` and the row's source value names it."""

    code: str
    name: str
    fell_back: bool = False


class Concepts:
    """The export's concepts: stored from the ``concept`` table (``store``), then asked by id."""

    def __init__(self, table: ScratchTable, *, present: bool) -> None:
        self.table = table  # id, vocabulary, code, name
        self.present = present  # the export has a concept table
        self.cache: dict[int, tuple[str, str, str] | None] = {}  # id -> vocab, code, name
        # Concept ids a present concept table lacks, by the column that used them: their rows
        # fall back to the source value and the summary names them.
        self.missing: dict[str, set[int]] = {}

    def store(self, file: str, columns: Columns) -> None:
        """One batch of the ``concept`` table, into the temporary table."""
        ids = columns.ints("concept_id")
        vocabularies = columns.texts("vocabulary_id")
        codes = columns.texts("concept_code")
        names = columns.texts("concept_name")
        rows = []
        for i, concept_id in enumerate(ids):
            if concept_id is None:
                if i not in columns.bad:
                    columns.fail(i, "concept_id", "required value is empty")
                continue
            rows.append((concept_id, vocabularies[i], codes[i], names[i]))
        self.table.insert(rows)

    def prefetch(self, id_columns: list[list[int | None]]) -> None:
        """Look up, in one query, the concepts of a batch that earlier batches did not need."""
        if not self.present:
            return
        wanted = {i for ids in id_columns for i in ids if i and i not in self.cache}
        if not wanted:
            return
        if len(self.cache) + len(wanted) > CONCEPT_CACHE_MAX:
            self.cache = {}
        found = self.table.lookup("id", wanted, ("vocabulary", "code", "name"))
        for concept_id in wanted:
            self.cache[concept_id] = found.get(concept_id)

    def named(self, concept_id: int | None, column: str) -> Named | None:
        """The code and name of a concept id; None when empty or 0 ("no matching concept").
        An id the concept table lacks is a gap in the vocabulary export, not in the record:
        ``CONCEPT/<id>``, named by the row's source value, counted as a fallback."""
        if not concept_id:
            return None
        if not self.present:
            return Named(f"CONCEPT/{concept_id}", "")
        if concept_id not in self.cache:
            self.prefetch([[concept_id]])
        concept = self.cache.get(concept_id)
        if concept is None:
            self.missing.setdefault(column, set()).add(concept_id)
            return Named(f"CONCEPT/{concept_id}", "", True)
        vocab, code, name = concept
        return Named(f"{vocab}/{code}", name)

    def resolve(self, ids: list[int | None], column: str) -> dict[int | None, Named | None]:
        """Each distinct concept of a batch's column, named once."""
        return {concept_id: self.named(concept_id, column) for concept_id in set(ids)}

    def warn_missing(self, summary: ImportSummary) -> None:
        """The summary's warning per column whose concepts the concept table lacks."""
        for column, ids in sorted(self.missing.items()):
            shown = ", ".join(str(i) for i in sorted(ids)[:10]) + (", …" if len(ids) > 10 else "")
            summary.warnings[
                f"{column}: concept(s) not in the concept table, shown by source value: {shown}"
            ] += len(ids)
