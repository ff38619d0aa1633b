"""What the importer reads of the OMOP CDM: the tables, and each event table's columns.

An event table names its event by a concept id column, dates it by a datetime column (else a
date column), and keeps its source value; ``visit_detail`` and ``device_exposure`` also have an
end, kept on the event. The CDM's other tables are known by name, so that finding one beside
the tables read is "not read", never "unrecognised file".
"""

from dataclasses import dataclass

# The file types a table may come as, and their CSV delimiters (Parquet has none).
SUFFIXES = {".csv": ",", ".tsv": "\t", ".parquet": None}


@dataclass(frozen=True)
class EventTable:
    event_type: str
    concept: str  # the concept id column that names the event
    datetime: str
    date: str
    source_value: str
    end: tuple[str, str] | None = None  # (datetime, date) columns kept as the "end" attribute
    has_key: bool = True  # a ``<table>_id`` primary key (``death`` has none: one per person)


EVENT_TABLES = {
    "condition_occurrence": EventTable(
        "condition",
        "condition_concept_id",
        "condition_start_datetime",
        "condition_start_date",
        "condition_source_value",
    ),
    "drug_exposure": EventTable(
        "drug",
        "drug_concept_id",
        "drug_exposure_start_datetime",
        "drug_exposure_start_date",
        "drug_source_value",
    ),
    "procedure_occurrence": EventTable(
        "procedure",
        "procedure_concept_id",
        "procedure_datetime",
        "procedure_date",
        "procedure_source_value",
    ),
    "measurement": EventTable(
        "measurement",
        "measurement_concept_id",
        "measurement_datetime",
        "measurement_date",
        "measurement_source_value",
    ),
    "observation": EventTable(
        "observation",
        "observation_concept_id",
        "observation_datetime",
        "observation_date",
        "observation_source_value",
    ),
    "note": EventTable("note", "note_class_concept_id", "note_datetime", "note_date", "note_title"),
    # A stay inside a visit (a ward, the ICU): an event of its visit's encounter, so the visit
    # stays one encounter and the stay shows inside it, with its end.
    "visit_detail": EventTable(
        "visit",
        "visit_detail_concept_id",
        "visit_detail_start_datetime",
        "visit_detail_start_date",
        "visit_detail_source_value",
        end=("visit_detail_end_datetime", "visit_detail_end_date"),
    ),
    "device_exposure": EventTable(
        "device",
        "device_concept_id",
        "device_exposure_start_datetime",
        "device_exposure_start_date",
        "device_source_value",
        end=("device_exposure_end_datetime", "device_exposure_end_date"),
    ),
    # The concept is the cause of death; the event itself is MEDS's death code.
    "death": EventTable(
        "death",
        "cause_concept_id",
        "death_datetime",
        "death_date",
        "cause_source_value",
        has_key=False,
    ),
}
TABLES = ("concept", "person", "visit_occurrence", *EVENT_TABLES, "observation_period")
# The other tables of OMOP CDM 5.4 and its vocabulary: not read here, and listed as ignored in
# the import summary (``concept_synonym`` is read beside ``concept``: ``synonyms``).
UNREAD_CDM_TABLES = frozenset(
    {
        "specimen", "note_nlp", "fact_relationship", "location", "care_site", "provider",
        "payer_plan_period", "cost", "drug_era", "dose_era", "condition_era", "episode",
        "episode_event", "metadata", "cdm_source", "vocabulary", "domain", "concept_class",
        "concept_relationship", "relationship", "concept_ancestor", "source_to_concept_map",
        "drug_strength", "cohort", "cohort_definition", "attribute_definition",
        "location_history", "survey_conduct", "concept_synonym",
    }
)  # fmt: skip
