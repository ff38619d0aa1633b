"""A MEDS cohort a clinician cannot read: raw codes, no descriptions, a ``table`` column that
contradicts the codes (the MIMIC-IV demo in MEDS, as a new user imported it), and what makes it
readable: the import's warnings, types from the codes, the record's span, the review page's
notice, and descriptions attached afterwards (``import_code_descriptions``).

The cohort is built here in the demo's shape: MEDS_transforms' MIMIC-IV codes (``LAB//<itemid>
//<unit>``, ``DIAGNOSIS//ICD//<version>//<code>``, ``MEDICATION//…``, ``PROCEDURE//…``, the
``omr`` names such as ``BMI (kg/m2)``), no ``metadata/codes.parquet``, and a ``table`` column
that says "condition" on every row. The descriptions are MIMIC-IV's dictionary labels
(``d_labitems``, ``d_items``, ``d_icd_diagnoses``) for those item ids and codes.
"""

import csv
import json
import shutil
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from review.importers import ImportFailed, import_release
from review.importers.descriptions import describe, read_descriptions
from review.models import AuditEvent, Event, Patient, RecordExcerpt, Role
from review.selectors import records
from review.services.code_descriptions import code_descriptions_import
from review.services.excerpts import record_excerpts_prepare
from tests import factories
from tests.review import review_data

from .test_meds_importer import MEDS_SCHEMA, table
from .test_meds_real_exports import MEDS_ETL_ROWS, META_SCHEMA

pytestmark = pytest.mark.django_db

T = datetime
TABLE_SCHEMA = pa.schema([*MEDS_SCHEMA, ("table", pa.string())])
SYNTHEA = Path(__file__).parent / "fixtures" / "synthea27nj"

# One MIMIC-IV demo-shaped subject: a birth sixty years before the admission, an ED stay that
# led to it, labs, vitals charted as LAB rows, medications, a procedure, diagnoses, omr rows.
ADMIT = T(2180, 5, 6, 23, 30)
MIMIC_ROWS = [
    (10000032, None, "GENDER//F", None, None),
    (10000032, T(2120, 3, 15), "MEDS_BIRTH", None, None),
    (10000032, T(2180, 5, 6, 19, 17), "ED_REGISTRATION", None, None),
    (10000032, T(2180, 5, 6, 20, 0), "LAB//50912//mg/dL", 1.1, None),
    (10000032, T(2180, 5, 6, 20, 0), "LAB//50852//%", 6.1, None),
    (10000032, T(2180, 5, 6, 20, 0), "LAB//50902//mEq/L", 101.0, None),
    (10000032, T(2180, 5, 6, 20, 0), "LAB//50893//mg/dL", 8.9, None),
    (10000032, T(2180, 5, 6, 21, 0), "LAB//220179//mmHg", 128.0, None),
    (10000032, T(2180, 5, 6, 21, 0), "LAB//220180//mmHg", 74.0, None),
    (10000032, ADMIT, "HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM", None, None),
    (10000032, T(2180, 5, 7, 0, 10), "ED_OUT", None, None),
    (10000032, T(2180, 5, 7, 2, 0), "MEDICATION//Acetaminophen//Administered", None, None),
    (10000032, T(2180, 5, 7, 6, 0), "LAB//50912//mg/dL", 1.4, None),
    (10000032, T(2180, 5, 7, 9, 0), "PROCEDURE//ICD//9//5491", None, None),
    (10000032, T(2180, 5, 7, 10, 0), "BMI (kg/m2)", None, "28.5"),
    (10000032, T(2180, 5, 7, 10, 0), "Blood Pressure", None, "110/65"),
    (10000032, T(2180, 5, 8, 11, 0), "DIAGNOSIS//ICD//10//A41.9", None, None),
    (10000032, T(2180, 5, 8, 11, 0), "DIAGNOSIS//ICD//9//78650", None, None),
    (10000032, T(2180, 5, 8, 12, 0), "HOSPITAL_DISCHARGE//HOME", None, None),
    (10000032, T(2180, 9, 9), "MEDS_DEATH", None, None),
]
# MIMIC-IV's labels for those items and codes, as a team converts its dictionaries: by item
# (the unit stays in the code), and by the whole diagnosis code.
MIMIC_DICTIONARY = [
    ("LAB//50912", "Creatinine"),
    ("LAB//50852", "% Hemoglobin A1c"),
    ("LAB//50902", "Chloride"),
    ("LAB//50893", "Calcium, Total"),
    ("LAB//220179", "Non Invasive Blood Pressure systolic"),
    ("LAB//220180", "Non Invasive Blood Pressure diastolic"),
    ("DIAGNOSIS//ICD//10//A41.9", "Sepsis, unspecified organism"),
    ("DIAGNOSIS//ICD//9//78650", "Chest pain, unspecified"),
]


def write_mimic(root: Path, rows: list[tuple] = MIMIC_ROWS, *, column: str = "condition") -> Path:
    """The demo's layout: data/train/0.parquet with a ``table`` column, and no codes file."""
    (root / "data" / "train").mkdir(parents=True)
    (root / "metadata").mkdir()
    (root / "metadata" / "dataset.json").write_text('{"dataset_name": "MIMIC-IV-demo"}')
    shard = table([(*r, column) for r in rows], TABLE_SCHEMA)
    pq.write_table(shard, root / "data" / "train" / "0.parquet")
    return root


def write_dictionary(path: Path, rows: list[tuple[str, str]] = MIMIC_DICTIONARY) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["code", "description"])
        writer.writerows(rows)
    return path


def mimic(tmp_path: Path) -> Patient:
    import_release(write_mimic(tmp_path / "mimic"), dataset_name="mimic")
    return Patient.objects.get()


# --- the import ------------------------------------------------------------------------------------
def test_an_import_without_descriptions_warns_with_counts(tmp_path: Path) -> None:
    summary = import_release(write_mimic(tmp_path / "mimic"), dataset_name="mimic")

    [warning] = [w for w in summary.warnings if "have no description" in w]
    # Every code but GENDER (demographics), MEDS_BIRTH and MEDS_DEATH (named by MEDS): 16.
    assert warning.startswith("16 of 16 codes have no description; 0 notes")
    assert "import_code_descriptions" in warning
    named_by_code = Event.objects.exclude(code__in=["MEDS_BIRTH", "MEDS_DEATH"]).count()
    assert summary.warnings[warning] == named_by_code == 17
    patient = Patient.objects.get()
    assert patient.undescribed_event_count == 17
    assert patient.mostly_undescribed


def test_a_described_cohort_is_not_warned(tmp_path: Path) -> None:
    root = write_mimic(tmp_path / "mimic", MIMIC_ROWS[:4])
    pq.write_table(
        pa.table({"code": ["LAB//50912//mg/dL", "ED_REGISTRATION"], "description": ["a", "b"]}),
        root / "metadata" / "codes.parquet",
    )
    summary = import_release(root, dataset_name="mimic")
    assert not [w for w in summary.warnings if "have no description" in w]
    assert Patient.objects.get().undescribed_event_count == 0


def test_types_follow_the_codes_where_the_table_column_contradicts_them(tmp_path: Path) -> None:
    summary = import_release(write_mimic(tmp_path / "mimic"), dataset_name="mimic")

    types = dict(Event.objects.values_list("code", "event_type"))
    assert types["LAB//50912//mg/dL"] == "measurement"
    assert types["MEDICATION//Acetaminophen//Administered"] == "drug"
    assert types["PROCEDURE//ICD//9//5491"] == "procedure"
    assert types["DIAGNOSIS//ICD//10//A41.9"] == "condition"
    assert types["MEDS_DEATH"] == "death"
    assert types["HOSPITAL_ADMISSION//EW EMER.//EMERGENCY ROOM"] == "visit"
    # Nothing in these codes names a type: the column is all there is.
    assert types["BMI (kg/m2)"] == "condition"
    offered = records.record_event_types(Patient.objects.get())
    assert {"measurement", "drug", "procedure", "condition", "death", "visit"} <= set(offered)
    warning = (
        "LAB: the table column says 'condition' on 7 of 7 rows; typed measurement, as the code says"
    )
    assert summary.warnings[warning] == 7
    assert not any(w.startswith("DIAGNOSIS:") for w in summary.warnings)  # it agrees


def test_a_table_column_still_types_codes_that_name_no_type(tmp_path: Path) -> None:
    root = tmp_path / "etl"
    (root / "data").mkdir(parents=True)
    pq.write_table(table(MEDS_ETL_ROWS, META_SCHEMA), root / "data" / "0.parquet")
    summary = import_release(root, dataset_name="etl")
    types = dict(Event.objects.values_list("code", "event_type"))
    assert types["SNOMED/430193006"] == "procedure"  # the column, not the vocabulary
    assert not any("table column says" in w for w in summary.warnings)


def test_the_records_span_starts_at_its_first_clinical_event(tmp_path: Path) -> None:
    patient = mimic(tmp_path)
    assert patient.birth_date.year == 2120
    assert patient.first_event_at.replace(tzinfo=None) == T(2180, 5, 6, 19, 17)
    assert patient.last_event_at.replace(tzinfo=None) == T(2180, 9, 9)
    excerpt = records.record_excerpt(_instruction(patient, "Summarize the stay."), patient)
    assert excerpt.first_event_at.year == 2180


def test_code_families_are_named_whole(tmp_path: Path) -> None:
    summary = import_release(write_mimic(tmp_path / "mimic"), dataset_name="mimic")
    assert "BMI (kg/m2)" in summary.sources  # not "BMI (KG", cut at the unit's slash
    assert "Blood Pressure" in summary.sources
    assert summary.sources["LAB"]["read"] == 7


def test_the_summary_says_rows_read_by_fallback_are_read(tmp_path: Path, capsys) -> None:
    rows = [(1, T(2020, 1, 1), "HR", 80.0, None), (1, T(2020, 1, 2), "HR", 82.0, None)]
    root = tmp_path / "m"
    (root / "data").mkdir(parents=True)
    pq.write_table(table(rows), root / "data" / "0.parquet")
    call_command("import_medalign", str(root), "--dataset", "m", "--no-progress")
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "rows by table or code family" in line)
    assert header.split()[-3:] == ["by", "fallback", "ignored"]
    [hr] = [line.split() for line in out.splitlines() if line.split()[:1] == ["HR"]]
    assert hr == ["HR", "2", "2", "0"]  # read 2, 2 of them by fallback


# --- the review page -------------------------------------------------------------------------------
def _instruction(patient: Patient, question: str, instruction_id: str = "I-1"):
    return review_data.make_instruction(
        patient.dataset, patient, instruction_id, question=question, n_responses=2
    )


def test_the_review_page_says_when_a_record_is_mostly_undescribed_codes(tmp_path, client):
    patient = mimic(tmp_path)
    instruction = _instruction(patient, "What is the most recent creatinine?")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    url = reverse("clinician_review", args=[instruction.pk])

    page = client.get(url).content.decode()
    assert 'data-testid="undescribed-codes"' in page
    assert "17 of its 19 coded events have no description" in page
    assert "and it has no notes" in page

    code_descriptions_import(dataset_name="mimic", path=write_dictionary(tmp_path / "labels.csv"))
    assert 'data-testid="undescribed-codes"' not in client.get(url).content.decode()


def test_a_described_record_shows_no_notice(client):
    dataset = review_data.make_dataset()
    patient = review_data.make_clinical_record(dataset, "P-OK")
    instruction = _instruction(patient, "What is the most recent creatinine?")
    clinician = factories.make_user("clin@example.edu", roles=[Role.CLINICIAN])
    review_data.assign(instruction, clinician)
    client.force_login(clinician)
    page = client.get(reverse("clinician_review", args=[instruction.pk])).content.decode()
    assert "undescribed-codes" not in page


# --- descriptions attached afterwards ----------------------------------------------------------
CLINICAL_WORDS = {
    "creatinine": "Creatinine (mg/dL)",
    "HbA1c": "% Hemoglobin A1c (%)",
    "chest pain": "Chest pain, unspecified",
    "sepsis": "Sepsis, unspecified organism",
}


def test_a_clinicians_words_find_nothing_until_descriptions_are_attached(tmp_path) -> None:
    patient = mimic(tmp_path)
    for query in CLINICAL_WORDS:
        _, page = records.record_search_page(patient, query=query)
        assert page.rows == [], query

    summary = code_descriptions_import(
        dataset_name="mimic", path=write_dictionary(tmp_path / "labels.csv")
    )

    for query, name in CLINICAL_WORDS.items():
        _, page = records.record_search_page(patient, query=query)
        assert name in {row.name for row in page.rows}, query
    creatinine = Event.objects.filter(code="LAB//50912//mg/dL").order_by("seq")
    assert [(e.name, e.value) for e in creatinine] == [
        ("Creatinine (mg/dL)", "1.1"),
        ("Creatinine (mg/dL)", "1.4"),
    ]
    assert (summary.codes_in_file, summary.codes_described, summary.events_renamed) == (8, 8, 9)
    assert summary.records_changed == 1
    patient.refresh_from_db()
    # ED and admission codes, omr names, the medication and the procedure stay codes.
    assert patient.undescribed_event_count == summary.events_still_undescribed == 8
    assert not patient.mostly_undescribed


def test_the_excerpt_is_prepared_again_with_the_descriptions(tmp_path) -> None:
    patient = mimic(tmp_path)
    instruction = _instruction(patient, "What is the most recent creatinine?")
    record_excerpts_prepare(dataset_id=patient.dataset_id)
    before = RecordExcerpt.objects.get(instruction=instruction)
    assert before.content["findings"] == []
    assert "No measurement, medication or other coded event" in before.html

    summary = code_descriptions_import(
        dataset_name="mimic", path=write_dictionary(tmp_path / "labels.csv")
    )

    assert summary.excerpts_prepared == 1
    after = RecordExcerpt.objects.get(instruction=instruction)
    [finding] = after.content["findings"]
    assert finding["name"] == "Creatinine (mg/dL)"
    assert [o["value"] for o in finding["occurrences"]] == ["1.4", "1.1"]
    assert "<mark>Creatinine</mark> (mg/dL)" in after.html


def test_a_meds_codes_file_describes_a_dataset_too(tmp_path) -> None:
    mimic(tmp_path)
    path = tmp_path / "codes.parquet"
    pq.write_table(
        pa.table(
            {
                "code": ["LAB//50912//mg/dL", "BMI (kg/m2)", "MEDS_DEATH", "LAB//1"],
                "description": ["Creatinine [Mass/volume] in Serum or Plasma", "BMI", "x", None],
                "parent_codes": pa.array([["LOINC/2160-0"], [], [], []], pa.list_(pa.string())),
            }
        ),
        path,
    )
    summary = code_descriptions_import(dataset_name="mimic", path=path)
    names = dict(Event.objects.values_list("code", "name"))
    assert names["LAB//50912//mg/dL"] == "Creatinine [Mass/volume] in Serum or Plasma"
    assert names["BMI (kg/m2)"] == "BMI"
    assert names["MEDS_DEATH"] == "Death"  # named already: kept without --replace
    assert summary.rows_without_description == 1


def test_replace_renames_events_named_before(tmp_path) -> None:
    mimic(tmp_path)
    code_descriptions_import(dataset_name="mimic", path=write_dictionary(tmp_path / "a.csv"))
    newer = write_dictionary(tmp_path / "b.csv", [("LAB//50912//mg/dL", "Creatinine, serum")])
    assert code_descriptions_import(dataset_name="mimic", path=newer).events_renamed == 0
    assert Event.objects.filter(name="Creatinine (mg/dL)").count() == 2
    summary = code_descriptions_import(dataset_name="mimic", path=newer, replace=True)
    assert summary.events_renamed == 2
    assert Event.objects.filter(name="Creatinine, serum").count() == 2


def test_attaching_descriptions_is_audited(tmp_path) -> None:
    mimic(tmp_path)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    code_descriptions_import(
        dataset_name="mimic", path=write_dictionary(tmp_path / "labels.csv"), actor=admin
    )
    event = AuditEvent.objects.get(action=AuditEvent.Action.DATA_IMPORTED, actor=admin)
    assert event.object_type == "Dataset"
    details = event.details
    assert details["kind"] == "code descriptions"
    assert (details["file"], details["events_renamed"], details["replace"]) == (
        "labels.csv",
        9,
        False,
    )
    # Names of codes and counts only: no value, no description text of a record.
    assert "1.1" not in json.dumps(details) and "Creatinine" not in json.dumps(details)


def test_the_command_prints_what_it_changed(tmp_path, capsys) -> None:
    mimic(tmp_path)
    call_command(
        "import_code_descriptions", str(write_dictionary(tmp_path / "l.csv")), "--dataset", "mimic"
    )
    out = capsys.readouterr().out
    lines = {line.rsplit(None, 1)[0].strip(): line.split()[-1] for line in out.splitlines()[1:]}
    assert lines["events renamed"] == "9"
    assert lines["events still named by their code"] == "8"


# --- bad files: every problem named, nothing changed -------------------------------------------
def _refused(tmp_path: Path, path: Path, dataset: str = "mimic") -> str:
    with pytest.raises(ImportFailed) as failure:
        code_descriptions_import(dataset_name=dataset, path=path)
    assert Event.objects.filter(name="Creatinine (mg/dL)").count() == 0
    return str(failure.value)


def test_bad_rows_are_named_by_file_line_and_column_and_nothing_changes(tmp_path) -> None:
    mimic(tmp_path)
    path = tmp_path / "labels.csv"
    path.write_text(
        "code,description\nLAB//50912,Creatinine\n,Orphan\nLAB//50912,Creatinine, serum\n",
    )
    message = _refused(tmp_path, path)
    assert "labels.csv, line 4: row has 3 fields but the header has 2" in message

    path.write_text(
        "code,description\n"
        "LAB//50912,Creatinine\n"
        ",Orphan\n"
        'LAB//50912,"Creatinine, serum"\n'
        "LAB//50902,Chlo\x00ride\n"
    )
    message = _refused(tmp_path, path)
    assert "labels.csv, line 3, field 'code': required value is empty" in message
    assert (
        "labels.csv, line 4, field 'description': code 'LAB//50912' is described again, "
        "differently (line 2 says 'Creatinine')"
    ) in message
    assert "labels.csv, line 5, field 'description': holds a NUL character" in message
    assert "nothing was imported" in message


def test_a_file_without_the_columns_says_which(tmp_path) -> None:
    mimic(tmp_path)
    path = tmp_path / "d_labitems.csv"
    path.write_text("itemid,label,fluid,category\n50912,Creatinine,Blood,Chemistry\n")
    message = _refused(tmp_path, path)
    assert "d_labitems.csv, line 1, field 'code': required column is missing" in message
    assert "d_labitems.csv, line 1, field 'description': required column is missing" in message
    parquet = tmp_path / "codes.parquet"
    pq.write_table(pa.table({"code": ["LAB//50912"], "description": [1]}), parquet)
    message = _refused(tmp_path, parquet)
    assert "codes.parquet, field 'description': has type int64" in message


def test_unreadable_files_and_unknown_datasets_are_refused(tmp_path) -> None:
    mimic(tmp_path)
    assert "x.json: no such file" in _refused(tmp_path, tmp_path / "x.json")
    (tmp_path / "x.json").write_text("{}")
    assert "not a .parquet, .csv or .tsv file" in _refused(tmp_path, tmp_path / "x.json")
    broken = tmp_path / "codes.parquet"
    broken.write_bytes(b"PAR1 not really")
    assert "codes.parquet: not a readable Parquet file" in _refused(tmp_path, broken)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("code,description\nLAB//50912,Cr\xe9atinine\n".encode("latin-1"))
    assert "latin.csv, line 1: not UTF-8 text" in _refused(tmp_path, latin)
    surrogate = tmp_path / "surrogate.csv"
    surrogate.write_bytes(b"code,description\nLAB//50912,\xed\xa0\x80\n")  # a lone surrogate
    assert "surrogate.csv" in _refused(tmp_path, surrogate)
    labels = write_dictionary(tmp_path / "labels.csv")
    assert "nope: no such dataset" in _refused(tmp_path, labels, dataset="nope")
    with pytest.raises(CommandError, match="no such dataset"):
        call_command("import_code_descriptions", str(labels), "--dataset", "nope")


def test_hostile_descriptions_stay_bounded(tmp_path) -> None:
    mimic(tmp_path)
    long = "7" * 100_000
    path = write_dictionary(
        tmp_path / "hostile.csv",
        [("LAB//50912", long), ("9" * 5000 + "//" * 2000, "x"), ("LAB//50902", "a\tb\r\nc")],
    )
    summary = code_descriptions_import(dataset_name="mimic", path=path)
    assert summary.descriptions_cut == 1
    assert {
        len(n)
        for n in Event.objects.filter(code__startswith="LAB//50912").values_list("name", flat=True)
    } == {500}
    assert Event.objects.get(code="LAB//50902//mEq/L").name == "a b c (mEq/L)"
    assert describe("//" * 5000, {"": "x"}) is None


def test_a_code_is_described_by_itself_else_by_its_longest_item_prefix() -> None:
    table_ = {"LAB//50912": "Creatinine", "LAB": "Lab", "LAB//50912//mg/dL": "Creatinine, mg"}
    assert describe("LAB//50912//mg/dL", table_) == "Creatinine, mg"
    assert describe("LAB//50912//umol/L", table_) == "Creatinine (umol/L)"
    assert describe("LAB//99999//mg/dL", table_) is None  # "LAB" alone describes no lab
    assert describe("LOINC/2160-0", {"LOINC": "x"}) is None


def test_a_tsv_dictionary_is_read_too(tmp_path) -> None:
    path = tmp_path / "labels.tsv"
    path.write_text("code\tdescription\nLAB//50912\tCreatinine\n")
    assert read_descriptions(path).descriptions == {"LAB//50912": "Creatinine"}


# --- data nobody here wrote ------------------------------------------------------------------------
def test_synthea27njs_own_concept_names_describe_its_meds_etl_codes(tmp_path) -> None:
    """meds_etl's output of OHDSI's Synthea27Nj rows (person 7, see test_meds_real_exports)
    without a codes file, described afterwards from the sample's own CONCEPT.csv converted
    to code,description (``<vocabulary_id>/<concept_code>``, as meds_etl writes codes)."""
    root = tmp_path / "etl"
    (root / "data").mkdir(parents=True)
    pq.write_table(table(MEDS_ETL_ROWS, META_SCHEMA), root / "data" / "0.parquet")
    summary = import_release(root, dataset_name="etl")
    assert any("have no description" in w for w in summary.warnings)
    patient = Patient.objects.get()
    _, page = records.record_search_page(patient, query="heart rate")
    assert page.rows == []

    shutil.copy(SYNTHEA / "CONCEPT.csv", tmp_path / "CONCEPT.csv")
    with (tmp_path / "CONCEPT.csv").open(encoding="utf-8", newline="") as fh:
        concepts = [
            (f"{r['vocabulary_id']}/{r['concept_code']}", r["concept_name"])
            for r in csv.DictReader(fh)
        ]
    code_descriptions_import(
        dataset_name="etl", path=write_dictionary(tmp_path / "concepts.csv", concepts)
    )

    names = dict(Event.objects.values_list("code", "name"))
    assert names["LOINC/8867-4"] == "Heart rate"
    assert names["LOINC/38265-5"] == "DXA Radius and Ulna [T-score] Bone density"
    assert names["SNOMED/430193006"] == "Medication Reconciliation"
    assert names["Visit/OP"] == "Outpatient Visit"
    _, page = records.record_search_page(patient, query="heart rate")
    assert [row.name for row in page.rows] == ["Heart rate"]
    _, page = records.record_search_page(patient, query="medication reconciliation")
    assert [row.name for row in page.rows] == ["Medication Reconciliation"]


def test_a_code_family_is_found_in_one_pass_on_hostile_codes() -> None:
    from review.importers.meds import family_of

    assert family_of("BMI (kg/m2)") == "BMI (kg/m2)"
    assert family_of("LAB//50912//mg/dL") == "LAB"
    assert family_of("Weight [kg/m]/x") == "Weight [kg/m]"
    hostile = "(" * 50_000 + "/" * 50_000  # brackets never closed: no family, the whole code
    assert family_of(hostile) == hostile
    assert family_of(")" * 50_000 + "1/2") == ")" * 50_000 + "1"
    assert family_of("\x00\ud800/x") == "\x00\ud800"
    assert family_of("9" * 100_000) == "9" * 100_000
