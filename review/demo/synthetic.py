"""The synthetic patients, instructions and answers of the demo release, made from seeds.

Nothing here comes from a real patient. Every person, note and answer is generated from a seeded
random number generator and small built-in vocabularies, and written in the real release formats
(both EHR XML formats, the two TSVs, the instructions and taxonomy CSVs) so that the demo goes
through exactly the importer a real release does.
"""

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

SYNTHETIC_NOTICE = "SYNTHETIC DEMO DATA - not a real patient"

TAXONOMY = [
    ("information retrieval", "retrieve medical history", "Past symptoms, signs, treatments"),
    ("information retrieval", "retrieve medication information", "Medications and interactions"),
    ("information retrieval", "retrieve laboratory studies", "Past laboratory results"),
    ("information retrieval", "retrieve vitals", "Past vital signs"),
    ("information retrieval", "retrieve imaging studies", "Past imaging and diagnostic tests"),
    ("information retrieval", "retrieve social history", "Social determinants of health"),
    ("information retrieval", "retrieve appointment information", "Visits and appointments"),
    ("calculation & scoring", "calculate numerical measures", "Standardised scores and measures"),
    ("calculation & scoring", "provide risk assessment", "Risk of disease or outcomes"),
    ("diagnosis support", "provide diagnosis assistance", "Differential diagnosis"),
    ("care planning", "determine plan of care", "Future plan of care"),
    ("translation", "translate materials", "Translate documents for the patient"),
    ("other", "other", "Instructions that fit no other category"),
]

CONDITIONS = [
    ("ICD10CM/E11.9", "Type 2 diabetes mellitus without complications"),
    ("ICD10CM/I10", "Essential (primary) hypertension"),
    ("ICD10CM/J45.909", "Unspecified asthma, uncomplicated"),
    ("ICD10CM/N18.3", "Chronic kidney disease, stage 3"),
    ("ICD10CM/I48.91", "Unspecified atrial fibrillation"),
    ("ICD10CM/E78.5", "Hyperlipidemia, unspecified"),
    ("ICD10CM/J18.9", "Pneumonia, unspecified organism"),
    ("ICD10CM/F32.9", "Major depressive disorder, single episode"),
    ("ICD10CM/M17.11", "Unilateral primary osteoarthritis, right knee"),
    ("ICD10CM/I50.9", "Heart failure, unspecified"),
]
DRUGS = [
    ("RxNorm/860975", "metformin 500 mg oral tablet", "E11.9"),
    ("RxNorm/314076", "lisinopril 10 mg oral tablet", "I10"),
    ("RxNorm/617314", "atorvastatin 20 mg oral tablet", "E78.5"),
    ("RxNorm/745679", "albuterol 90 mcg inhaler", "J45.909"),
    ("RxNorm/855332", "warfarin 5 mg oral tablet", "I48.91"),
    ("RxNorm/1665005", "ceftriaxone 1 g injection", "J18.9"),
    ("RxNorm/312938", "sertraline 50 mg oral tablet", "F32.9"),
    ("RxNorm/197361", "amlodipine 5 mg oral tablet", "I10"),
    ("RxNorm/310429", "furosemide 40 mg oral tablet", "I50.9"),
]
LABS = [
    ("LOINC/4548-4", "Hemoglobin A1c", "%", 5.2, 9.8, 1),
    ("LOINC/2160-0", "Creatinine", "mg/dL", 0.6, 2.4, 2),
    ("LOINC/2345-7", "Glucose", "mg/dL", 70, 260, 0),
    ("LOINC/718-7", "Hemoglobin", "g/dL", 9.0, 16.5, 1),
    ("LOINC/2093-3", "Cholesterol", "mg/dL", 130, 290, 0),
    ("LOINC/6301-6", "INR", "", 0.9, 3.6, 1),
    ("LOINC/2823-3", "Potassium", "mmol/L", 3.2, 5.6, 1),
]
VITALS = [
    ("LOINC/8480-6", "Systolic blood pressure", "mm Hg", 100, 175, 0),
    ("LOINC/8462-4", "Diastolic blood pressure", "mm Hg", 58, 105, 0),
    ("LOINC/8867-4", "Heart rate", "/min", 52, 118, 0),
    ("LOINC/29463-7", "Body weight", "kg", 48, 130, 1),
    ("LOINC/8310-5", "Body temperature", "Cel", 36.1, 39.2, 1),
]
PROCEDURES = [
    ("SNOMED/268400002", "12 lead ECG"),
    ("SNOMED/399208008", "Chest X-ray"),
    ("SNOMED/77477000", "CT of abdomen"),
    ("SNOMED/241615005", "MRI of knee"),
    ("SNOMED/40701008", "Echocardiography"),
]
VISIT_TYPES = ["Office Visit", "Emergency Room Visit", "Inpatient Visit", "Telehealth Visit"]
NOTE_TYPES = ["progress note", "emergency department note", "discharge summary", "telephone note"]
SOCIAL = [
    "Lives with spouse, retired teacher, never smoker, drinks alcohol socially.",
    "Lives alone, works as a delivery driver, former smoker (quit 2015), no alcohol.",
    "Lives with daughter, current smoker one pack per day, occasional alcohol.",
    "Married, works in accounting, never smoker, no recreational drug use.",
]
SPECIALTIES = ["Internal Medicine", "Cardiology", "Family Medicine", "Oncology", "Neurology"]
# Dune-32k and Dune-2k are one base model at two context lengths (the demo's report declares
# them so), for the report's context-length section; MedAlign saw GPT-4 drop from 32k to 2k.
MODELS = ["Atlas-70B", "Beacon-13B", "Cedar-7B", "Dune-32k", "Dune-2k", "Fjord-Instruct"]
# Each model's tendency to answer well (probability of a faithful answer), so the leaderboard
# and the metrics have something to agree and disagree about.
MODEL_SKILL = dict(zip(MODELS, [0.8, 0.65, 0.45, 0.7, 0.5, 0.55], strict=True))
MODEL_CONTEXT = dict(zip(MODELS, [32768, 4096, 2048, 32768, 2048, 8192], strict=True))
FIRST_NAMES = ["Alex", "Jordan", "Sam", "Casey", "Robin", "Morgan", "Taylor", "Jamie"]


@dataclass
class SynthEvent:
    ts: datetime
    kind: str
    code: str
    name: str
    value: str = ""
    unit: str = ""
    text: str = ""


@dataclass
class SynthPatient:
    person_id: str
    birth: date
    gender: str
    race: str
    ethnicity: str
    fmt: str
    visits: list[tuple[str, datetime, list[SynthEvent]]] = field(default_factory=list)
    conditions: list[tuple[str, str]] = field(default_factory=list)
    drugs: list[tuple[str, str, str]] = field(default_factory=list)
    social: str = ""

    def events(self) -> Iterator[SynthEvent]:
        for _, _, events in self.visits:
            yield from events

    def latest(self, name: str) -> SynthEvent | None:
        found = None
        for event in self.events():
            if event.name == name and (found is None or event.ts >= found.ts):
                found = event
        return found


def _fmt_value(rng: random.Random, low: float, high: float, digits: int) -> str:
    value = rng.uniform(low, high)
    return f"{value:.{digits}f}" if digits else str(round(value))


def make_patient(rng: random.Random, index: int, n_events: int, fmt: str) -> SynthPatient:
    person_id = str(9_000_001 + index)
    birth = date(rng.randint(1938, 1995), rng.randint(1, 12), rng.randint(1, 28))
    patient = SynthPatient(
        person_id=person_id,
        birth=birth,
        gender=rng.choice(["FEMALE", "MALE"]),
        race=rng.choice(["White", "Asian", "Black or African American", "Other"]),
        ethnicity=rng.choice(["Not Hispanic or Latino", "Hispanic or Latino"]),
        fmt=fmt,
        social=rng.choice(SOCIAL),
    )
    patient.conditions = rng.sample(CONDITIONS, k=rng.randint(2, 4))
    cond_codes = {c[0].split("/")[1] for c in patient.conditions}
    patient.drugs = [d for d in DRUGS if d[2] in cond_codes] or [rng.choice(DRUGS)]
    start = datetime(2016, 1, 4, 8, 0) + timedelta(days=rng.randint(0, 300))
    span_days = rng.randint(3 * 365, 6 * 365)
    n_visits = max(3, min(400, n_events // 40))
    per_visit = max(8, n_events // n_visits)
    day_offsets = sorted(rng.sample(range(span_days), k=min(n_visits, span_days)))
    made = 0
    for i, offset in enumerate(day_offsets):
        visit_ts = start + timedelta(days=offset, hours=rng.randint(0, 9))
        visit_type = rng.choice(VISIT_TYPES)
        events: list[SynthEvent] = []
        budget = per_visit if i < len(day_offsets) - 1 else max(per_visit, n_events - made)
        t = visit_ts
        if i == 0 or rng.random() < 0.3:
            for code, name in patient.conditions[: rng.randint(1, len(patient.conditions))]:
                events.append(SynthEvent(t, "condition_occurrence", code, name))
        while len(events) < budget - 2:
            t += timedelta(minutes=rng.randint(1, 20))
            for code, name, unit, low, high, digits in VITALS:
                events.append(
                    SynthEvent(
                        t, "measurement", code, name, _fmt_value(rng, low, high, digits), unit
                    )
                )
            for code, name, unit, low, high, digits in rng.sample(LABS, k=3):
                events.append(
                    SynthEvent(
                        t, "measurement", code, name, _fmt_value(rng, low, high, digits), unit
                    )
                )
            if rng.random() < 0.5:
                code, name, _ = rng.choice(patient.drugs)
                events.append(SynthEvent(t, "drug_exposure", code, name))
            if rng.random() < 0.15:
                code, name = rng.choice(PROCEDURES)
                events.append(SynthEvent(t, "procedure_occurrence", code, name))
        events = events[: max(budget - 1, 1)]
        t += timedelta(minutes=30)
        events.append(
            SynthEvent(
                t,
                "note",
                "LOINC/11506-3",
                rng.choice(NOTE_TYPES),
                text=_note(rng, patient, visit_type, events),
            )
        )
        made += len(events)
        patient.visits.append((visit_type, visit_ts, events))
    return patient


def _note(rng: random.Random, p: SynthPatient, visit_type: str, events: list[SynthEvent]) -> str:
    vitals = {e.name: e for e in events if e.kind == "measurement"}
    bp = vitals.get("Systolic blood pressure")
    problems = ", ".join(name.lower() for _, name in p.conditions)
    meds = ", ".join(name for _, name, _ in p.drugs)
    complaint = rng.choice(
        [
            "follow-up of chronic conditions",
            "shortness of breath for three days",
            "chest discomfort on exertion",
            "dizziness and fatigue",
            "knee pain when walking",
            "productive cough and fever",
            "medication review",
        ]
    )
    plan = rng.choice(
        [
            "Continue current medications and repeat labs in three months.",
            "Increase the dose of the antihypertensive and recheck blood pressure in two weeks.",
            "Referred to cardiology for further evaluation; echocardiogram ordered.",
            "Start antibiotics; return if symptoms worsen.",
            "Counselled on diet and exercise; follow up in six months.",
        ]
    )
    return (
        f"{SYNTHETIC_NOTICE}. {visit_type}. Chief complaint: {complaint}. "
        f"Known problems: {problems}. Current medications: {meds}. "
        f"Social history: {p.social} "
        f"Blood pressure {bp.value if bp else 'not recorded'} systolic. "
        f"Assessment and plan: {plan}"
    )


# --- writers for the two XML formats ------------------------------------------------------------
def write_eventstream(patient: SynthPatient, path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.write(f'<eventstream person_id="{patient.person_id}">\n')
        out.write(f"<!-- {SYNTHETIC_NOTICE} -->\n")
        for visit_type, visit_ts, events in patient.visits:
            end = events[-1].ts if events else visit_ts
            out.write(
                f'<encounter start_timestamp="{visit_ts:%Y-%m-%d %H:%M:%S}" '
                f'end_timestamp="{end:%Y-%m-%d %H:%M:%S}" type={quoteattr(visit_type)}>\n'
                f"<person><birthdate>{patient.birth.isoformat()}</birthdate>"
                f"<age><years>{visit_ts.year - patient.birth.year}</years></age>"
                f"<demographics><ethnicity>{escape(patient.ethnicity)}</ethnicity>"
                f"<gender>{patient.gender}</gender><race>{escape(patient.race)}</race>"
                "</demographics><payerplan>NULL</payerplan></person>\n"
                '<caresites><caresite care_site_id="42" care_site_name="Synthetic Clinic"/>'
                "</caresites>\n"
                '<providers><provider provider_id="7" gender="NULL" speciality="Internal Medicine"'
                ' year_of_birth="NULL" care_site_name="NULL"/></providers>\n<events>\n'
            )
            current = None
            for event in events:
                if event.ts != current:
                    if current is not None:
                        out.write("</entry>\n")
                    out.write(f'<entry timestamp="{event.ts:%Y-%m-%d %H:%M:%S}">\n')
                    current = event.ts
                value = f" value={quoteattr(event.value)}" if event.value else ""
                unit = f" unit={quoteattr(event.unit)}" if event.unit else ""
                attrs = (
                    f'<event type="{event.kind}" code={quoteattr(event.code)} '
                    f'name={quoteattr(event.name)}{value}{unit} provider_id="7" care_site_id="42"'
                )
                if event.text:
                    out.write(f"{attrs}>{escape(event.text)}</event>\n")
                else:
                    out.write(f"{attrs}/>\n")
            if current is not None:
                out.write("</entry>\n")
            out.write("</events>\n</encounter>\n")
        out.write("</eventstream>\n")


def write_record(patient: SynthPatient, path: Path) -> None:
    def us(ts: datetime, meridiem: bool) -> str:
        return ts.strftime("%m/%d/%Y %I:%M %p") if meridiem else ts.strftime("%m/%d/%Y %H:%M")

    vocab = {"ICD10CM": "ICD"}
    with path.open("w", encoding="utf-8") as out:
        out.write(f"<record>\n<!-- {SYNTHETIC_NOTICE} -->\n")
        for visit_type, visit_ts, events in patient.visits:
            age_years = visit_ts.year - patient.birth.year
            out.write(
                f'<visit type={quoteattr(visit_type)} start="{us(visit_ts, False)}">\n'
                f'<day start="{us(visit_ts, False)}">\n'
                f"<person> Birth:{patient.birth.month}/{patient.birth.day}/{patient.birth.year} "
                f"Race: {escape(patient.race)} Gender: {patient.gender} "
                f"Ethnicity: {escape(patient.ethnicity)} "
                f"Age in Days: {(visit_ts.date() - patient.birth).days} "
                f"Age in Years: {age_years} </person>\n"
            )
            i = 0
            while i < len(events):
                event = events[i]
                if event.kind == "note":
                    out.write(
                        f'<note type={quoteattr(event.name)} start="{us(event.ts, True)}">'
                        f"{escape(event.text)}</note>\n"
                    )
                    i += 1
                    continue
                # Group consecutive events of one kind and time under one element, as the
                # paper-era export did.
                j = i
                out.write(f'<{event.kind} start="{us(event.ts, True)}">\n')
                while j < len(events) and events[j].kind == event.kind and events[j].ts == event.ts:
                    e = events[j]
                    vocab_name, _, code = e.code.partition("/")
                    line = f"[{vocab.get(vocab_name, vocab_name)}/{code}] {e.name}"
                    if e.value:
                        line += f" {e.value} {e.unit}".rstrip()
                    out.write(f"<code>{escape(line)}</code>\n")
                    j += 1
                out.write(f"</{event.kind}>\n")
                i = j
            out.write("</day>\n</visit>\n")
        out.write("</record>\n")


# --- instructions, references and responses -----------------------------------------------------
@dataclass
class SynthInstruction:
    instruction_id: str
    person_id: str
    question: str
    subcategory: str
    specialty: str
    reference: str
    second_reference: str
    facts: list[str]
    wrong_facts: list[str]
    # The XML record the instruction is about; None for the MEDS cohort's subjects, whose
    # rows are written from their facts instead (an answer reads only the texts).
    patient: SynthPatient | None = None


def make_instructions(
    rng: random.Random, patients: list[SynthPatient], n: int
) -> list[SynthInstruction]:
    builders = [
        _q_lab,
        _q_medications,
        _q_history,
        _q_vitals,
        _q_social,
        _q_imaging,
        _q_visits,
        _q_score,
        _q_risk,
        _q_diagnosis,
        _q_plan,
        _q_translate,
        _q_other,
    ]
    out = []
    for i in range(n):
        builder = builders[i % len(builders)]
        patient = patients[i % len(patients)]
        question, sub, reference, facts, wrong = builder(rng, patient)
        second = "In short: " + reference[0].lower() + reference[1:]
        out.append(
            SynthInstruction(
                instruction_id=str(70_000_000 + i * 37),
                person_id=patient.person_id,
                patient=patient,
                question=question,
                subcategory=sub,
                specialty=SPECIALTIES[i % len(SPECIALTIES)],
                reference=reference,
                second_reference=second,
                facts=facts,
                wrong_facts=wrong,
            )
        )
    return out


Built = tuple[str, str, str, list[str], list[str]]


def _q_lab(rng: random.Random, p: SynthPatient) -> Built:
    code, name, unit, low, high, digits = rng.choice(LABS)
    latest = p.latest(name)
    value = latest.value if latest else "not recorded"
    when = f"{latest.ts:%Y-%m-%d}" if latest else "never"
    wrong = _fmt_value(rng, low, high, digits)
    return (
        f"What was the patient's most recent {name} and when was it measured?",
        "retrieve laboratory studies",
        f"The most recent {name} was {value} {unit} on {when}.".replace("  ", " "),
        [f"{name} was {value} {unit}", f"measured on {when}"],
        [f"{name} was {wrong} {unit}", "measured last year"],
    )


def _q_medications(rng: random.Random, p: SynthPatient) -> Built:
    meds = [name for _, name, _ in p.drugs]
    return (
        "List the patient's current medications.",
        "retrieve medication information",
        "The patient takes " + ", ".join(meds) + ".",
        meds,
        [rng.choice(DRUGS)[1]],
    )


def _q_history(rng: random.Random, p: SynthPatient) -> Built:
    problems = [name for _, name in p.conditions]
    return (
        "Summarize this patient's past medical history.",
        "retrieve medical history",
        "The patient's history includes " + "; ".join(problems).lower() + ".",
        [x.lower() for x in problems],
        [rng.choice(CONDITIONS)[1].lower()],
    )


def _q_vitals(rng: random.Random, p: SynthPatient) -> Built:
    sbp, dbp = p.latest("Systolic blood pressure"), p.latest("Diastolic blood pressure")
    s = sbp.value if sbp else "?"
    d = dbp.value if dbp else "?"
    return (
        "What was the last recorded blood pressure?",
        "retrieve vitals",
        f"The last recorded blood pressure was {s}/{d} mm Hg.",
        [f"{s}/{d} mm Hg"],
        [f"{int(float(s)) + 22 if s != '?' else 150}/{d} mm Hg"],
    )


def _q_social(rng: random.Random, p: SynthPatient) -> Built:
    return (
        "Does the patient smoke or drink alcohol?",
        "retrieve social history",
        f"According to the notes: {p.social}",
        [p.social.lower()],
        ["the patient is a heavy drinker"],
    )


def _q_imaging(rng: random.Random, p: SynthPatient) -> Built:
    seen = sorted({e.name for e in p.events() if e.kind == "procedure_occurrence"})
    listed = ", ".join(seen) if seen else "no imaging or diagnostic studies"
    return (
        "Which imaging or diagnostic studies has the patient had?",
        "retrieve imaging studies",
        f"The record shows: {listed}.",
        seen or ["no studies"],
        ["a PET scan"],
    )


def _q_visits(rng: random.Random, p: SynthPatient) -> Built:
    last_type, last_ts, _ = p.visits[-1]
    return (
        "When was the patient last seen and for what kind of visit?",
        "retrieve appointment information",
        f"The last visit was a {last_type.lower()} on {last_ts:%Y-%m-%d}.",
        [last_type.lower(), f"{last_ts:%Y-%m-%d}"],
        ["an inpatient admission last month"],
    )


def _q_score(rng: random.Random, p: SynthPatient) -> Built:
    has_chf = any("Heart failure" in n for _, n in p.conditions)
    has_htn = any("hypertension" in n for _, n in p.conditions)
    age = 2022 - p.birth.year
    score = int(has_chf) + int(has_htn) + (2 if age >= 75 else int(age >= 65))
    score += int(p.gender == "FEMALE")
    return (
        "Calculate the patient's CHA2DS2-VASc score from the record.",
        "calculate numerical measures",
        f"The CHA2DS2-VASc score is {score} (age {age}, {p.gender.lower()}, "
        f"{'hypertension' if has_htn else 'no hypertension'}, "
        f"{'heart failure' if has_chf else 'no heart failure'}).",
        [f"score is {score}"],
        [f"score is {score + 2}"],
    )


def _q_risk(rng: random.Random, p: SynthPatient) -> Built:
    a1c = p.latest("Hemoglobin A1c")
    value = a1c.value if a1c else "not recorded"
    return (
        "Is this patient at high risk of diabetic complications?",
        "provide risk assessment",
        f"The latest HbA1c is {value}%; risk depends on glycaemic control and kidney function.",
        [f"HbA1c is {value}%"],
        ["the patient has no diabetes risk factors"],
    )


def _q_diagnosis(rng: random.Random, p: SynthPatient) -> Built:
    main = p.conditions[0][1].lower()
    return (
        "Given the recent notes, what is the most likely explanation for the patient's symptoms?",
        "provide diagnosis assistance",
        f"The symptoms are most consistent with {main}, a known problem in the record.",
        [main],
        ["an acute pulmonary embolism"],
    )


def _q_plan(rng: random.Random, p: SynthPatient) -> Built:
    meds = ", ".join(name for _, name, _ in p.drugs[:2])
    return (
        "Draft a follow-up plan for the next visit.",
        "determine plan of care",
        f"Review adherence to {meds}, repeat basic labs and recheck blood pressure.",
        [meds, "repeat basic labs"],
        ["stop all medications"],
    )


def _q_translate(rng: random.Random, p: SynthPatient) -> Built:
    return (
        "Translate the discharge medication instructions into Spanish for the patient.",
        "translate materials",
        "Tome sus medicamentos como se le indicó y vuelva si los síntomas empeoran.",
        ["tome sus medicamentos", "vuelva si los síntomas empeoran"],
        ["take your medications"],
    )


def _q_other(rng: random.Random, p: SynthPatient) -> Built:
    return (
        "Write a one-sentence summary of this patient for a handoff.",
        "other",
        f"{2022 - p.birth.year}-year-old {p.gender.lower()} with "
        f"{p.conditions[0][1].lower()} on {p.drugs[0][1]}.",
        [p.conditions[0][1].lower(), p.drugs[0][1]],
        ["a healthy young adult with no medical history"],
    )


# Real answers to one question differ even when they agree: each model has its own openers,
# hedges and verbosity, and sampling varies the wording from answer to answer. Without this the
# demo's responses were often word-for-word identical within an instruction (hundreds of metric
# ties), which left the demo report little to say.
_OPENERS_GOOD = [
    "Based on the record, {ref}",
    "According to the chart, {ref}",
    "Reviewing the available notes, {ref}",
    "Per the most recent documentation, {ref}",
    "Short answer: {ref}",
    "{Ref}",
]
_OPENERS_PARTIAL = [
    "From the available notes: {facts}.",
    "What I could find: {facts}.",
    "The chart documents the following: {facts}.",
    "Relevant findings - {facts}.",
]
_OPENERS_MIXED = [
    "The record suggests {facts}.",
    "It appears that {facts}.",
    "Looking through the encounters, {facts}.",
]
_OPENERS_WRONG = [
    "I found {wrong} in the record, which answers the question.",
    "The notes indicate {wrong}.",
    "{Wrong}, according to the last visit.",
]
_REFUSALS = [
    "I cannot determine this from the information provided in the record.",
    "The record does not contain enough information to answer this.",
    "This is not documented in the available notes.",
    "I was unable to locate this in the patient's chart.",
]
_CLOSERS = [
    "",
    "",
    " Please verify against the chart.",
    " Other details were not found.",
    " Consider confirming with the care team.",
    " No other relevant entries were found.",
    " This should be interpreted in the clinical context.",
]
# How much a model tends to say beyond the answer (0 terse .. 1 chatty).
_VERBOSITY = {"Atlas": 0.3, "Beacon": 0.6, "Cedar": 0.8, "Dune": 0.45, "Fjord": 0.7}


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def make_answer(rng: random.Random, instruction: SynthInstruction, model: str) -> tuple[str, bool]:
    """A response and whether it is correct; quality depends on the model's skill plus noise."""
    quality = MODEL_SKILL[model] + rng.uniform(-0.35, 0.35)
    facts = list(instruction.facts)
    rng.shuffle(facts)
    ref = instruction.reference[0].lower() + instruction.reference[1:]
    wrong = instruction.wrong_facts[0]
    if quality > 0.75:
        text, correct = rng.choice(_OPENERS_GOOD).format(ref=ref, Ref=_cap(ref)), True
    elif quality > 0.55:
        kept = facts[: max(1, len(facts) - rng.randint(0, 1))]
        text, correct = rng.choice(_OPENERS_PARTIAL).format(facts="; ".join(kept)), True
    elif quality > 0.4:
        mixed = facts[:1] + instruction.wrong_facts[:1]
        rng.shuffle(mixed)
        text, correct = rng.choice(_OPENERS_MIXED).format(facts=" and ".join(mixed)), False
    elif quality > 0.2:
        text = rng.choice(_OPENERS_WRONG).format(wrong=wrong, Wrong=_cap(wrong))
        correct = False
    else:
        return rng.choice(_REFUSALS), False
    verbosity = _VERBOSITY.get(model.split("-")[0], 0.5)
    if rng.random() < verbosity:
        text += rng.choice(_CLOSERS)
    if rng.random() < verbosity / 2:
        text += f" (Based on {rng.randint(2, 40)} notes reviewed.)"
    return text, correct


def release_ranks(
    seed: int, instruction_id: str, answers: dict[str, tuple[str, bool]]
) -> dict[str, int]:
    """The release's own (synthetic) clinician ranking of one instruction's responses, as
    MedAlign ships it in ``model_rank``: correct answers first, then by the model's skill with
    noise, ties allowed (rank 1 is best; tied responses share the smallest rank). Its own random
    stream, so adding it left every other part of the demo as it was."""
    noise = random.Random(f"{seed}:release-rank:{instruction_id}")
    score = {
        model: 2 * correct + MODEL_SKILL[model] + noise.uniform(-0.3, 0.3)
        for model, (_, correct) in answers.items()
    }
    # Scores within 0.05 of each other read as a tie, as a clinician would leave them.
    rounded = {model: round(value / 0.1) for model, value in score.items()}
    return {
        model: 1 + sum(1 for v in rounded.values() if v > mine) for model, mine in rounded.items()
    }


def make_response(rng: random.Random, instruction: SynthInstruction, model: str) -> str:
    """A response's text (see :func:`make_answer`)."""
    return make_answer(rng, instruction, model)[0]
