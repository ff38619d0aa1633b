"""Importer tests on both XML formats and the tables, bad input, atomicity and idempotence."""

import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from review.importers import ImportFailed, import_release
from review.importers.ehr_xml import CountingReader, iter_eventstream
from review.models import (
    Dataset,
    Encounter,
    Event,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    TaxonomyEntry,
)

pytestmark = pytest.mark.django_db

EVENTSTREAM = """\
<eventstream person_id="1000001">
  <encounter start_timestamp="2016-02-01 08:00:00" end_timestamp="2019-06-30 23:59:00">
    <person>
      <birthdate>1958-02-03</birthdate>
      <age><days>22319</days><years>61</years></age>
      <demographics><ethnicity>Not Hispanic or Latino</ethnicity><gender>MALE</gender></demographics>
      <payerplan>Medicare</payerplan>
    </person>
    <caresites><caresite care_site_id="42" care_site_name="Emergency Department"/></caresites>
    <providers><provider provider_id="7" gender="NULL" speciality="Internal Medicine"/></providers>
    <events>
      <entry timestamp="2019-03-14 09:35:00">
        <event type="condition_occurrence" code="ICD10CM/J18.9" name="Pneumonia, unspecified organism" provider_id="7" care_site_id="42"/>
        <event type="note" code="LOINC/34111-5" name="ED note" note_id="991" provider_id="7">Cough &amp; fever for three days.</event>
      </entry>
      <entry timestamp="2019-03-14 09:40:00">
        <event type="measurement" code="LOINC/8867-4" name="Heart rate" value="104" unit="/min" visit_id="NULL"/>
      </entry>
    </events>
  </encounter>
  <encounter start_timestamp="2020-01-01 10:00:00" end_timestamp="NULL">
    <events><entry timestamp="2020-01-01 10:05:00"><event type="drug_exposure" code="RxNorm/1665005" name="ceftriaxone 1 g injection"/></entry></events>
  </encounter>
</eventstream>
"""

RECORD = """\
<record>
  <visit type="Emergency Room Visit" start="03/14/2019 09:30">
    <day start="03/14/2019 09:30">
      <person> Birth:2/3/1958 Race: Asian Gender: MALE Ethnicity: Not Hispanic or Latino Age in Days: 22319 Age in Years: 61 </person>
      <condition_occurrence start="03/14/2019 09:35 AM"><code>[ICD/J18.9] Pneumonia, unspecified organism</code></condition_occurrence>
      <measurement start="03/14/2019 09:40 PM">
        <code>[LOINC/8867-4] Heart rate 104 </code>
        <code>[LOINC/8480-6] Systolic blood pressure 128 mm Hg</code>
      </measurement>
      <drug_exposure start="03/14/2019 10:05 AM"><code>[RxNorm/1665005] ceftriaxone 1 g injection</code></drug_exposure>
      <note type="emergency department note" start="03/14/2019 10:20 AM">Patient with cough.</note>
    </day>
  </visit>
</record>
"""

INSTRUCTIONS = """\
instruction_id,question,human_assigned_subcategory_1,source
101,"What was the last heart rate?",retrieve vitals,test
102,"Summarize the history, briefly.",retrieve medical history,test
"""

TAXONOMY = """\
category,subcategory,description
information retrieval,retrieve vitals,"Vitals, past"
information retrieval,retrieve medical history,History
"""

REFERENCES = (
    "person_id\tinstruction_id\tannotator_num\tquestion\tclinician_response\tfilename\n"
    "1000001\t101\tAnnotator_1\tWhat was the last heart rate?\t104 per minute\t1000001.xml\n"
    '1000001\t101\tAnnotator_2\tWhat was the last heart rate?\t"It was 104.\tTab\n'
    'and newline"\t1000001.xml\n'
    "1000001\t102\tAnnotator_1\tSummarize the history, briefly.\tPneumonia in 2019.\t1000001.xml\n"
)

RESPONSES_HEADER = (
    "model_name\tinstruction_id\tperson_id\tquestion\tfilename\tclinician_response\tevidence\t"
    "binary_correct\tis_used_eval\tsubmitter_specialty\tmodel_response\tis_applicable\t"
    "is_sufficient\tgeneration_length\textra_info\n"
)


def response_row(model: str, instruction: str, text: str, correct: str = "1") -> str:
    return (
        f"{model}\t{instruction}\t1000001\tq\t1000001.xml\tref\t\t{correct}\t1\tCardiology\t"
        f"{text}\t1\t0\t12\ttemp=0.7\n"
    )


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text) if name.endswith(".xml") else text, encoding="utf-8")
    return path


@pytest.fixture
def release(tmp_path: Path) -> Path:
    folder = tmp_path / "release"
    write(folder, "instruction-taxonomy.csv", TAXONOMY)
    write(folder, "instructions.csv", INSTRUCTIONS)
    write(folder, "clinician-instruction-responses.tsv", REFERENCES)
    write(
        folder,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER
        + response_row("model-a", "101", "Heart rate was 104.")
        + response_row("model-b", "101", '"Maybe 90;\tnot sure"', "0")
        + response_row("model-a", "102", "Pneumonia."),
    )
    write(folder, "ehrs/1000001.xml", EVENTSTREAM)
    write(folder, "ehrs/EHR_1000002.xml", RECORD)
    return folder


def counts() -> dict[str, int]:
    return {
        model.__name__: model.objects.count()
        for model in (
            Dataset,
            Patient,
            Encounter,
            Event,
            Instruction,
            ReferenceResponse,
            ModelResponse,
            TaxonomyEntry,
        )
    }


def test_it_imports_a_whole_release(release: Path) -> None:
    summary = import_release(release, dataset_name="t")
    assert summary.counts["patients"] == 2
    assert summary.counts["instructions"] == 2
    assert summary.counts["references"] == 3
    assert summary.counts["responses"] == 3
    instruction = Instruction.objects.get(instruction_id="101")
    assert instruction.category == "information retrieval"
    assert instruction.subcategory == "retrieve vitals"
    assert instruction.specialty == "Cardiology"
    assert instruction.is_sufficient is False
    assert instruction.patient.person_id == "1000001"
    refs = list(instruction.references.order_by("annotator_order"))
    assert [r.annotator for r in refs] == ["Annotator_1", "Annotator_2"]
    assert refs[1].text == "It was 104.\tTab\nand newline"
    b = ModelResponse.objects.get(model_name="model-b")
    assert b.text == "Maybe 90;\tnot sure"
    assert b.release_binary_correct is False
    assert b.generation_length == 12
    assert b.generation_metadata == {"extra_info": "temp=0.7"}


def test_it_reads_the_release_eventstream_format(release: Path) -> None:
    import_release(release, dataset_name="t")
    patient = Patient.objects.get(person_id="1000001")
    assert patient.source_format == "eventstream"
    assert (patient.gender, str(patient.birth_date)) == ("MALE", "1958-02-03")
    assert patient.event_count == 4 and patient.note_count == 1
    encounters = list(patient.encounters.all())
    assert len(encounters) == 2
    assert encounters[0].care_sites == [
        {"care_site_id": "42", "care_site_name": "Emergency Department"}
    ]
    assert encounters[0].event_count == 3 and encounters[1].end is None
    note = patient.events.get(event_type="note")
    assert note.text == "Cough & fever for three days."
    assert note.attributes["note_id"] == "991"
    hr = patient.events.get(code="LOINC/8867-4")
    assert (hr.value_numeric, hr.unit, hr.timestamp.isoformat()) == (
        104.0,
        "/min",
        "2019-03-14T09:40:00+00:00",
    )
    assert "visit_id" not in hr.attributes  # "NULL" means missing


def test_it_reads_the_paper_era_record_format(release: Path) -> None:
    import_release(release, dataset_name="t")
    patient = Patient.objects.get(person_id="1000002")  # from EHR_1000002.xml
    assert patient.source_format == "record"
    assert (patient.race, patient.gender, str(patient.birth_date)) == (
        "Asian",
        "MALE",
        "1958-02-03",
    )
    events = {e.code: e for e in patient.events.all()}
    assert len(events) == 5
    sbp = events["LOINC/8480-6"]
    assert (sbp.name, sbp.value, sbp.unit) == ("Systolic blood pressure", "128", "mm Hg")
    assert events["LOINC/8867-4"].timestamp.hour == 21  # 09:40 PM
    drug = events["RxNorm/1665005"]
    assert drug.name == "ceftriaxone 1 g injection" and drug.value == ""  # no value for drugs
    assert patient.events.get(event_type="note").note_type == "emergency department note"


def test_reimporting_creates_no_duplicates(release: Path) -> None:
    import_release(release, dataset_name="t")
    before = counts()
    summary = import_release(release, dataset_name="t")
    assert counts() == before
    assert summary.skipped["record already imported (use --replace)"] == 2
    assert summary.skipped["response already imported"] == 3


def test_replace_updates_changed_rows_and_drops_their_scores(release: Path) -> None:
    from scoring.models import MetricConfig, MetricScore

    import_release(release, dataset_name="t")
    a101 = ModelResponse.objects.get(model_name="model-a", instruction__instruction_id="101")
    config = MetricConfig.objects.create(backend="bleu", identity={}, identity_hash="x", label="b")
    MetricScore.objects.create(response=a101, config=config, value=1.0)
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER + response_row("model-a", "101", "Heart rate was 110."),
    )
    summary = import_release(release, dataset_name="t")
    assert summary.skipped["response differs from stored (use --replace)"] == 1
    a101.refresh_from_db()
    assert a101.text == "Heart rate was 104."
    before = counts()
    import_release(release, dataset_name="t", replace=True)
    a101.refresh_from_db()
    assert a101.text == "Heart rate was 110."
    assert not MetricScore.objects.filter(response=a101).exists()
    assert counts() == before  # records reloaded, not duplicated


def assert_nothing_stored() -> None:
    assert all(v == 0 for v in counts().values()), counts()


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "ehrs/1000003.xml",
            "<eventstream person_id='3'><encounter>\n<events>\n</eventstream>",
            "1000003.xml, line 3: broken XML",
        ),
        (
            "ehrs/1000004.xml",
            '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
            '<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>\n<eventstream>&lol2;</eventstream>',
            "1000004.xml, line 2: DTD or entity declarations are not allowed",
        ),
        (
            "ehrs/1000005.xml",
            '<eventstream person_id="5"><encounter start_timestamp="2019-02-30 10:00:00">'
            "</encounter></eventstream>",
            "1000005.xml, line 1, field 'start_timestamp': unparseable timestamp '2019-02-30",
        ),
        (
            "ehrs/EHR_6.xml",
            '<record>\n<visit start="03/14/2019 9am"></visit></record>',
            "EHR_6.xml, line 2, field 'start': unparseable timestamp",
        ),
        (
            "bad-instructions.csv",
            'instruction_id,question,source\n,"q",x\n',
            "bad-instructions.csv, line 2, field 'instruction_id': required value is empty",
        ),
        (
            "clinician-reviewed-model-responses.tsv",
            RESPONSES_HEADER + response_row("model-a", "999", "text"),
            "clinician-reviewed-model-responses.tsv, line 2, field 'instruction_id': response for "
            "unknown instruction '999'",
        ),
        (
            "clinician-reviewed-model-responses.tsv",
            RESPONSES_HEADER.replace("model_response", "notes") + response_row("m", "101", "t"),
            "clinician-reviewed-model-responses.tsv, line 1, field 'model_response or response': "
            "required column is missing",
        ),
        (
            "clinician-reviewed-model-responses.tsv",
            RESPONSES_HEADER + response_row("model-a", "101", "t", correct="perhaps"),
            "line 2, field 'binary_correct': 'perhaps' is not a yes/no value",
        ),
        (
            "clinician-reviewed-model-responses.tsv",
            RESPONSES_HEADER
            + response_row("model-a", "101", "fine")
            + response_row("model-b", "101", "Hold\x00 the statin."),
            "clinician-reviewed-model-responses.tsv, line 3, field 'model_response': holds a NUL "
            "character, which the database cannot store",
        ),
        (
            "responses.csv",
            'model_name,instruction_id,response\nmodel-a,101,"a\x00b"\n',
            "responses.csv, line 2, field 'response': holds a NUL character",
        ),
    ],
)
def test_bad_input_is_refused_with_file_line_and_field_and_nothing_is_stored(
    release: Path, name: str, content: str, expected: str
) -> None:
    write(release, name, content)
    with pytest.raises(ImportFailed) as failure:
        import_release(release, dataset_name="t")
    assert expected in str(failure.value)
    assert "nothing was imported" in str(failure.value)
    assert_nothing_stored()


def test_a_missing_required_column_names_the_file_and_field(tmp_path: Path) -> None:
    write(tmp_path, "clinician-instruction-responses.tsv", "instruction_id\tannotator_num\n1\tA\n")
    with pytest.raises(ImportFailed, match=r"line 1, field 'clinician_response': required column"):
        import_release(tmp_path / "clinician-instruction-responses.tsv", dataset_name="t")
    assert_nothing_stored()


def test_it_reports_every_bad_row_not_just_the_first(release: Path) -> None:
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER + "".join(response_row("m", str(900 + i), "t") for i in range(3)),
    )
    with pytest.raises(ImportFailed) as failure:
        import_release(release, dataset_name="t")
    assert [p.line for p in failure.value.problems] == [2, 3, 4]


def test_a_failed_import_leaves_earlier_data_untouched(release: Path) -> None:
    import_release(release, dataset_name="t")
    before = counts()
    write(release, "ehrs/1000009.xml", "<eventstream person_id='9'><oops></eventstream>")
    write(release, "instructions.csv", INSTRUCTIONS + '103,"A new one",other,test\n')
    with pytest.raises(ImportFailed):
        import_release(release, dataset_name="t")
    assert counts() == before
    assert not Instruction.objects.filter(instruction_id="103").exists()


def test_rows_with_a_wrong_field_count_name_their_line(tmp_path: Path) -> None:
    write(tmp_path, "instructions.csv", 'instruction_id,question\n1,"ok"\n2,"a","b"\n')
    with pytest.raises(ImportFailed, match=r"instructions.csv, line 3: row has 3 fields"):
        import_release(tmp_path, dataset_name="t")


def test_eventstream_parsing_drops_processed_elements(tmp_path: Path) -> None:
    # Memory must not grow with the file: after parsing, processed entries have been removed.
    entries = "".join(
        f'<entry timestamp="2020-01-01 00:{i % 60:02d}:00"><event type="measurement" '
        f'code="LOINC/1" name="x" value="{i}"/></entry>'
        for i in range(2000)
    )
    path = write(
        tmp_path,
        "big.xml",
        f'<eventstream person_id="1"><encounter start_timestamp="2020-01-01 00:00:00">'
        f"<events>{entries}</events></encounter></eventstream>",
    )
    with path.open("rb") as fh:
        reader = CountingReader(fh)
        items = iter_eventstream(reader, "big.xml")
        seen = 0
        for kind, _item in items:
            if kind == "event":
                seen += 1
                if seen == 1500:
                    # the element tree built so far holds only a handful of live entries
                    events_elem = items.gi_frame.f_locals["elem"].getparent()
                    assert events_elem is not None and len(events_elem) < 5
    assert seen == 2000
    assert reader.count == path.stat().st_size


def test_the_command_prints_a_summary_and_fails_clearly(release: Path, capsys) -> None:
    call_command("import_medalign", str(release), "--dataset", "t", "--no-progress")
    out = capsys.readouterr().out
    assert "patients" in out and "events" in out and "responses" in out
    write(release, "ehrs/1000008.xml", "<record><visit>")
    with pytest.raises(CommandError, match="1000008.xml.*broken XML"):
        call_command("import_medalign", str(release), "--dataset", "t2", "--no-progress")
    assert not Dataset.objects.filter(name="t2").exists()


def test_an_unknown_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImportFailed, match="no such file or folder"):
        import_release(tmp_path / "missing", dataset_name="t")


def test_replace_drops_scores_when_a_reference_changes(release: Path) -> None:
    from scoring.models import MetricConfig, MetricScore

    import_release(release, dataset_name="t")
    import_release(release, dataset_name="t", replace=True)  # settles the files' own differences
    config = MetricConfig.objects.create(backend="bleu", identity={}, identity_hash="y", label="b")
    for response in ModelResponse.objects.all():
        MetricScore.objects.create(response=response, config=config, value=1.0)
    write(
        release,
        "clinician-instruction-responses.tsv",
        REFERENCES.replace("104 per minute", "104 beats per minute"),
    )
    import_release(release, dataset_name="t", replace=True)
    # Instruction 101's reference changed: its two responses lose their scores, 102 keeps its.
    assert set(
        MetricScore.objects.values_list("response__instruction__instruction_id", flat=True)
    ) == {"102"}


def test_replace_relinks_an_instruction_whose_person_id_changed(release: Path) -> None:
    import_release(release, dataset_name="t")
    assert Instruction.objects.get(instruction_id="102").patient.person_id == "1000001"
    write(
        release,
        "clinician-instruction-responses.tsv",
        REFERENCES.replace("1000001\t102\t", "1000777\t102\t"),
    )
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER
        + response_row("model-a", "101", "Heart rate was 104.")
        + response_row("model-a", "102", "Pneumonia.").replace("1000001", "1000777"),
    )
    import_release(release, dataset_name="t", replace=True)
    moved = Instruction.objects.get(instruction_id="102")
    assert moved.person_id == "1000777"
    assert moved.patient is None  # not the old patient's record: 1000777 is not loaded yet


def test_a_repeated_taxonomy_row_is_skipped_not_a_crash(release: Path) -> None:
    write(
        release, "instruction-taxonomy.csv", TAXONOMY + "diagnosis support,retrieve vitals,Again\n"
    )
    import_release(release, dataset_name="t", replace=True)
    summary = import_release(release, dataset_name="t", replace=True)
    assert summary.skipped["duplicate taxonomy row in instruction-taxonomy.csv"] == 1
    assert (
        TaxonomyEntry.objects.get(subcategory="retrieve vitals").category == "information retrieval"
    )


# --- the EHR XML importer refuses DTD and entity declarations, whatever precedes them ------------
BOMB = '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'


@pytest.mark.parametrize(
    ("padding", "expected"),
    [
        ("<eventstream> " + "x" * (300 * 1024), "no root element in the first 256 KiB"),
        ("<eventstream> " + "x" * (100 * 1024), "DTD or entity declarations are not allowed"),
    ],
)
def test_a_long_leading_comment_cannot_hide_a_dtd(release: Path, padding, expected) -> None:
    # The pre-check reads the first 256 KiB: a longer comment, with a fake root inside it, used
    # to push the DOCTYPE out of its sight and let the file through.
    write(
        release,
        "ehrs/1000007.xml",
        f"<!-- {padding} -->\n{BOMB}\n<eventstream person_id='7'>&lol2;</eventstream>",
    )
    with pytest.raises(ImportFailed) as failure:
        import_release(release, dataset_name="t")
    assert expected in str(failure.value)
    assert_nothing_stored()


def test_a_dtd_after_a_comment_is_refused_by_the_parser_too(tmp_path: Path) -> None:
    import io

    from review.importers.ehr_xml import XMLImportError

    data = '<!-- c -->\n<!DOCTYPE eventstream [<!ENTITY x "y">]>\n<eventstream person_id="8"/>'
    with pytest.raises(XMLImportError, match="DTD or entity declarations are not allowed"):
        list(iter_eventstream(CountingReader(io.BytesIO(data.encode())), "8.xml"))


def test_an_entity_reference_in_note_text_is_an_import_error(release: Path) -> None:
    # Entities are not expanded: the text after one used to be dropped without a word.
    write(
        release,
        "ehrs/EHR_1000009.xml",
        '<record>\n<visit start="03/14/2019 09:00:00" end="03/14/2019 10:00:00"><day>'
        '<note start="03/14/2019 09:30:00" type="progress">Before &nbsp; after.</note>'
        "</day></visit></record>",
    )
    with pytest.raises(ImportFailed):
        import_release(release, dataset_name="t")
    assert_nothing_stored()


def test_the_summary_counts_responses_masked_for_any_model_and_the_near_misses(
    release: Path,
) -> None:
    # Masking is against every name of the dataset and the built-in families: a response that
    # names another model of the set counts, as it is masked for clinicians.
    write(
        release,
        "clinician-reviewed-model-responses.tsv",
        RESPONSES_HEADER
        + response_row("Atlas-70B", "101", "Unlike Beacon-13B, I see no tachycardia.")
        + response_row("Beacon-13B", "101", "Mixtrall would say 104.")
        + response_row("Atlas-70B", "102", "Pneumonia."),
    )
    summary = import_release(release, dataset_name="t")
    assert summary.counts["responses with model names masked"] == 1
    assert summary.counts["responses with near misses to check"] == 1
    flagged = ModelResponse.objects.get(names_own_model=True)
    assert flagged.model_name == "Atlas-70B" and "Beacon-13B" in flagged.text
