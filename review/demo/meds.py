"""A small synthetic MEDS cohort for the demo: so a newcomer sees a MEDS record on the review page.

SYNTHETIC: every subject, value and report here is invented by this module (fixed seed); none
comes from a real patient or from MedAlign, INSPECT or EHRSHOT. The cohort is written as MEDS
would hold it (``data/0.parquet``, ``metadata/codes.parquet``, ``metadata/dataset.json``), in the
style of a pulmonary-embolism cohort (CT angiogram reports split into sections, D-dimer,
anticoagulants), with instructions, reference answers and model responses keyed by
``subject_id`` in the release's own table formats. ``load_demo`` imports it with the rest of the
demo release through the same importer a real MEDS dataset goes through.
"""

import csv
import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import meds
import pyarrow as pa
import pyarrow.parquet as pq

from review.demo.synthetic import (
    MODEL_CONTEXT,
    MODELS,
    SYNTHETIC_NOTICE,
    SynthInstruction,
    make_response,
)

# A MEDS data row: subject_id, time, code, numeric_value, text_value.
Row = tuple[int, datetime | None, str, float | None, str | None]

FIRST_SUBJECT_ID = 5_000_001  # far from the XML demo's person ids (9,000,001…)
FIRST_INSTRUCTION_ID = 79_000_001
CODES = {
    "GENDER/F": "Female",
    "GENDER/M": "Male",
    "RACE/White": "White",
    "RACE/Asian": "Asian",
    "ETHNICITY/Not Hispanic or Latino": "Not Hispanic or Latino",
    "NOTICE/SYNTHETIC": "Synthetic demo record",
    "MEDS_BIRTH": "Birth",
    "VISIT/ER": "Emergency Room Visit",
    "VISIT/IP": "Inpatient Visit",
    "VISIT/OP": "Office Visit",
    "HOSPITAL_DISCHARGE//HOME": "Discharged home",
    "LOINC/48065-7": "D-dimer FEU",
    "LOINC/8867-4": "Heart rate",
    "LOINC/59408-5": "Oxygen saturation (pulse oximetry)",
    "LOINC/6598-7": "Troponin T",
    "ICD10CM/R06.02": "Shortness of breath",
    "ICD10CM/I26.99": "Other pulmonary embolism without acute cor pulmonale",
    "ICD10CM/I10": "Essential (primary) hypertension",
    "RxNorm/1364435": "apixaban 5 MG Oral Tablet",
    "RxNorm/5224": "heparin",
    "CPT4/71275": "CT angiography, chest",
    "RADIOLOGY//CTPA//FINDINGS": "CT pulmonary angiogram: findings",
    "RADIOLOGY//CTPA//IMPRESSION": "CT pulmonary angiogram: impression",
    "NOTE//DISCHARGE_SUMMARY": "Discharge summary",
}


def _subject(rng: random.Random, index: int, has_pe: bool) -> tuple[list[Row], dict[str, Any]]:
    """Rows of one subject (time-ordered, static rows first) and facts for the questions."""
    sid = FIRST_SUBJECT_ID + index
    sex = rng.choice(["F", "M"])
    birth = datetime(rng.randint(1945, 1985), rng.randint(1, 12), rng.randint(1, 28))
    rows: list[Row] = [
        (sid, None, f"GENDER/{sex}", None, None),
        (sid, None, f"RACE/{rng.choice(['White', 'Asian'])}", None, None),
        (sid, None, "ETHNICITY/Not Hispanic or Latino", None, None),
        (sid, None, "NOTICE/SYNTHETIC", None, SYNTHETIC_NOTICE),
        (sid, birth, meds.birth_code, None, None),
    ]
    t = datetime(2021, 1, 4, 9) + timedelta(days=rng.randint(0, 200))
    rows.append((sid, t, "VISIT/OP", None, None))
    rows.append((sid, t + timedelta(minutes=5), "LOINC/8867-4", float(rng.randint(64, 84)), None))
    rows.append((sid, t + timedelta(minutes=6), "ICD10CM/I10", None, None))
    t += timedelta(days=rng.randint(60, 300), hours=3)
    ddimer = round(rng.uniform(1.1, 4.5) if has_pe else rng.uniform(0.2, 0.45), 2)
    saturation = float(rng.randint(88, 93) if has_pe else rng.randint(95, 99))
    heart = float(rng.randint(104, 124) if has_pe else rng.randint(72, 92))
    rows += [
        (sid, t, "VISIT/ER", None, None),
        (sid, t + timedelta(minutes=2), "ICD10CM/R06.02", None, None),
        (sid, t + timedelta(minutes=10), "LOINC/8867-4", heart, None),
        (sid, t + timedelta(minutes=10), "LOINC/59408-5", saturation, None),
        (sid, t + timedelta(minutes=40), "LOINC/48065-7", ddimer, None),
        (sid, t + timedelta(minutes=40), "LOINC/6598-7", round(rng.uniform(0.005, 0.03), 3), None),
        (sid, t + timedelta(minutes=90), "CPT4/71275", None, None),
    ]
    side = rng.choice(["right lower lobe", "left lower lobe", "bilateral segmental"])
    if has_pe:
        findings = (
            f"{SYNTHETIC_NOTICE}.\nFilling defects in the {side} pulmonary arteries. "
            "RV/LV ratio 0.9. No pleural effusion."
        )
        impression = f"Acute pulmonary embolism, {side}. No CT signs of right heart strain."
    else:
        findings = (
            f"{SYNTHETIC_NOTICE}.\nPulmonary arteries opacify well without filling defect. "
            "Mild dependent atelectasis."
        )
        impression = "No pulmonary embolism."
    t_report = t + timedelta(hours=2)
    rows += [
        (sid, t_report, "RADIOLOGY//CTPA//FINDINGS", None, findings),
        (sid, t_report, "RADIOLOGY//CTPA//IMPRESSION", None, impression),
    ]
    if has_pe:
        rows += [
            (sid, t_report + timedelta(minutes=20), "ICD10CM/I26.99", None, None),
            (sid, t_report + timedelta(minutes=30), "RxNorm/5224", None, None),
            (sid, t_report + timedelta(hours=3), "VISIT/IP", None, None),
        ]
        discharge = t_report + timedelta(days=rng.randint(2, 4))
        summary = (
            f"{SYNTHETIC_NOTICE}.\nAdmitted with acute pulmonary embolism ({side}) on CT "
            f"angiogram; D-dimer {ddimer} mg/L FEU. Treated with heparin, switched to apixaban "
            "5 mg twice daily. Discharged home in stable condition."
        )
        rows += [
            (sid, discharge - timedelta(hours=2), "RxNorm/1364435", None, None),
            (sid, discharge - timedelta(hours=1), "NOTE//DISCHARGE_SUMMARY", None, summary),
            (sid, discharge, "HOSPITAL_DISCHARGE//HOME", None, None),
        ]
    facts = {
        "sid": sid,
        "has_pe": has_pe,
        "side": side,
        "ddimer": ddimer,
        "saturation": saturation,
        "heart": heart,
        "ct_date": t_report.date(),
        "birth": birth.date(),
    }
    return rows, facts


def _instructions(subjects: list[dict[str, Any]]) -> list[SynthInstruction]:
    out = []
    for i, f in enumerate(subjects):
        when = f["ct_date"].strftime("%d %b %Y")
        if f["has_pe"]:
            reference = (
                f"Yes. The CT pulmonary angiogram on {when} showed acute pulmonary embolism "
                f"({f['side']}) without right heart strain; the patient was started on heparin "
                "and discharged on apixaban."
            )
            facts = [f"acute pulmonary embolism ({f['side']})", "anticoagulated with apixaban"]
            wrong = ["no pulmonary embolism on CT", "a negative D-dimer"]
        else:
            reference = (
                f"No. The CT pulmonary angiogram on {when} showed no pulmonary embolism; the "
                f"D-dimer was {f['ddimer']} mg/L FEU."
            )
            facts = ["no pulmonary embolism on CT", f"D-dimer {f['ddimer']} mg/L FEU"]
            wrong = ["a right lower lobe pulmonary embolism", "started on apixaban"]
        out.append(
            SynthInstruction(
                instruction_id=str(FIRST_INSTRUCTION_ID + 2 * i),
                person_id=str(f["sid"]),
                question="Did the CT angiogram show a pulmonary embolism, and how was it managed?",
                subcategory="retrieve imaging studies",
                specialty="Pulmonology",
                reference=reference,
                second_reference="In short: " + reference[0].lower() + reference[1:],
                facts=facts,
                wrong_facts=wrong,
            )
        )
    return out


def write_meds_cohort(out: Path, *, seed: int, n_subjects: int = 3) -> dict[str, int]:
    """Write the synthetic MEDS dataset and its instruction tables under ``out``; counts back."""
    rng = random.Random(seed + 15)
    (out / meds.data_subdirectory).mkdir(parents=True, exist_ok=True)
    (out / "metadata").mkdir(exist_ok=True)
    rows: list[Row] = []
    subjects = []
    for index in range(n_subjects):
        subject_rows, facts = _subject(rng, index, has_pe=index % 3 != 1)
        rows += subject_rows
        subjects.append(facts)
    schema = meds.DataSchema.schema()
    columns = list(zip(*rows, strict=True))
    pq.write_table(
        pa.table(
            {f.name: pa.array(list(c), f.type) for f, c in zip(schema, columns, strict=True)},
            schema=schema,
        ),
        out / meds.data_subdirectory / "0.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "code": list(CODES),
                "description": list(CODES.values()),
                "parent_codes": pa.array([[] for _ in CODES], pa.list_(pa.string())),
            },
            schema=meds.CodeMetadataSchema.schema(),
        ),
        out / meds.code_metadata_filepath,
    )
    (out / meds.dataset_metadata_filepath).write_text(
        json.dumps(
            {
                "dataset_name": "medalign-review synthetic MEDS demo",
                "dataset_version": f"seed-{seed}",
                "etl_name": "review.demo.meds",
                "etl_version": "1",
                "meds_version": "0.4",
                "created_at": date(2024, 2, 14).isoformat(),
                "license": "synthetic; no real patient data",
            },
            indent=2,
        )
    )
    (out / "README-SYNTHETIC.txt").write_text(
        f"{SYNTHETIC_NOTICE}. A MEDS cohort written by review/demo_meds.py (seed {seed}).\n"
    )
    instructions = _instructions(subjects)
    _write_tables(out, instructions, rng)
    return {
        "subjects": n_subjects,
        "rows": len(rows),
        "instructions": len(instructions),
        "responses": len(instructions) * len(MODELS),
    }


def _write_tables(out: Path, instructions: list[SynthInstruction], rng: random.Random) -> None:
    with (out / "meds-clinician-instruction-responses.tsv").open(
        "w", newline="", encoding="utf-8"
    ) as fh:
        writer = csv.writer(fh, delimiter="\t")
        writer.writerow(
            [
                "instruction_id",
                "annotator_num",
                "question",
                "clinician_response",
                "person_id",
                "human_assigned_subcategory_1",
                "submitter_specialty",
                "source",
            ]
        )
        for ins in instructions:
            writer.writerow(
                [
                    ins.instruction_id,
                    "Annotator_1",
                    ins.question,
                    ins.reference,
                    ins.person_id,
                    ins.subcategory,
                    ins.specialty,
                    "synthetic MEDS demo",
                ]
            )
    with (out / "meds-clinician-reviewed-model-responses.tsv").open(
        "w", newline="", encoding="utf-8"
    ) as fh:
        writer = csv.writer(fh, delimiter="\t")
        writer.writerow(
            ["instruction_id", "person_id", "question", "model_name", "model_response"]
            + ["context_length", "truncation_policy"]
        )
        for ins in instructions:
            for model in MODELS:
                writer.writerow(
                    [
                        ins.instruction_id,
                        ins.person_id,
                        ins.question,
                        model,
                        make_response(rng, ins, model),
                        MODEL_CONTEXT[model],
                        "left-truncate (most recent tokens)",
                    ]
                )
