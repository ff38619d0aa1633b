"""Fuzzing the importers (hypothesis): malformed XML and tables, XML bombs, oversized files,
random bytes. Every input ends in ``ImportFailed`` naming the file (and the line where there is
one) or in a clean import; never another exception, and a refused import stores nothing.

Short by default so it runs in `make test`; FUZZ_EXAMPLES=2000 for a long run.
"""

import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from review.importers import ImportFailed, import_release
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
from tests.review.test_importers import (
    EVENTSTREAM,
    INSTRUCTIONS,
    RECORD,
    REFERENCES,
    RESPONSES_HEADER,
    TAXONOMY,
    response_row,
)

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 100,  # CI: the same examples every run; long runs explore
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
MODELS = (Dataset, Patient, Encounter, Event, Instruction, ReferenceResponse, ModelResponse)

SEEDS = {
    "1000001.xml": textwrap.dedent(EVENTSTREAM),
    "EHR_1000002.xml": textwrap.dedent(RECORD),
    "instructions.csv": INSTRUCTIONS,
    "instruction-taxonomy.csv": TAXONOMY,
    "clinician-instruction-responses.tsv": REFERENCES,
    "clinician-reviewed-model-responses.tsv": RESPONSES_HEADER
    + response_row("model-a", "101", "Heart rate was 104."),
}

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<eventstream person_id="1"><encounter start_timestamp="2019-01-01 00:00:00">
<events><entry timestamp="2019-01-01 00:00:00"><event type="note" name="n">&lol9;</event></entry>
</events></encounter></eventstream>
"""
QUADRATIC_BLOWUP = (
    '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "' + "A" * 5000 + '">]>'
    '<eventstream person_id="1"><encounter start_timestamp="2019-01-01 00:00:00"><events>'
    '<entry timestamp="2019-01-01 00:00:00"><event type="note" name="n">'
    + "&a;" * 2000
    + "</event></entry></events></encounter></eventstream>"
)
EXTERNAL_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    '<record><visit type="x" start="03/14/2019 09:30"><day start="03/14/2019 09:30">'
    '<note start="03/14/2019 09:30">&x;</note></day></visit></record>'
)
PARAMETER_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x.dtd"> %p;]>'
    "<record></record>"
)


def _counts() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in (*MODELS, TaxonomyEntry)}


def _import_one(name: str, content: bytes) -> None:
    """Import one file; check the outcome is a clean import or a located ImportFailed."""
    folder = Path(tempfile.mkdtemp(prefix="fuzz-import-"))
    try:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        before = _counts()
        try:
            import_release(path, dataset_name="fuzz")
        except ImportFailed as exc:
            assert exc.problems, "ImportFailed without a problem"
            for problem in exc.problems:
                assert problem.file, f"a problem without a file: {problem}"
                assert problem.message
            assert _counts() == before, "a refused import stored something"
            assert "nothing was imported" in str(exc)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --- strategies ------------------------------------------------------------------------------
@st.composite
def mutated(draw: st.DrawFn, seed: str) -> bytes:
    """A seed file with a few byte-level edits: flips, cuts, insertions, duplications."""
    data = bytearray(seed.encode())
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        op = draw(st.sampled_from(["flip", "cut", "insert", "truncate", "dup"]))
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[i : i + draw(st.integers(1, 40))]
        elif op == "insert":
            data[i:i] = draw(
                st.sampled_from(
                    [
                        b"<",
                        b">",
                        b"&",
                        b"&amp;",
                        b'"',
                        b"\t",
                        b"\n",
                        b"\x00",
                        b"\xff\xfe",
                        b"<event/>",
                        b"</events>",
                        b"<!ENTITY x 'y'>",
                        b"&x;",
                        b"]]>",
                        b"NULL",
                        b'timestamp="13/45/2019 99:99"',
                        b'timestamp="2019-02-30 00:00:00"',
                        b"\r\n",
                        b'"',
                        b"\t\t\t\t\t\t\t",
                        b"1e309",
                        b"-1",
                    ]
                )
            )
        elif op == "truncate":
            del data[i:]
        else:
            j = draw(st.integers(i, min(len(data), i + 200)))
            data[j:j] = data[i:j]
    return bytes(data)


xml_names = st.sampled_from(["1000001.xml", "EHR_1000002.xml", "ehrs/EHR_7.xml", "odd name.xml"])
table_names = st.sampled_from(
    [
        "instructions.csv",
        "instruction-taxonomy.csv",
        "clinician-instruction-responses.tsv",
        "clinician-reviewed-model-responses.tsv",
    ]
)


# --- tests -------------------------------------------------------------------------------------
@FUZZ
@given(which=st.sampled_from(["1000001.xml", "EHR_1000002.xml"]), data=st.data())
def test_it_survives_mutated_xml(which: str, data: st.DataObject) -> None:
    _import_one(which, data.draw(mutated(SEEDS[which])))


@FUZZ
@given(which=table_names, data=st.data())
def test_it_survives_mutated_tables(which: str, data: st.DataObject) -> None:
    _import_one(which, data.draw(mutated(SEEDS[which])))


@FUZZ
@given(name=st.one_of(xml_names, table_names), content=st.binary(max_size=2000))
def test_it_survives_random_bytes(name: str, content: bytes) -> None:
    _import_one(name, content)


@FUZZ
@given(
    which=table_names,
    rows=st.lists(
        st.lists(st.text(max_size=30), min_size=0, max_size=18).map("\t".join),
        max_size=8,
    ),
)
# Found by a long run: a superscript digit in the annotator column ("²".isdigit() is true).
@example(which="clinician-instruction-responses.tsv", rows=["\t\U000802f0\t²\t\t0\t"])
def test_it_survives_random_rows_under_a_real_header(which: str, rows: list[str]) -> None:
    header = SEEDS[which].splitlines()[0]
    _import_one(which, ("\n".join([header, *rows]) + "\n").encode("utf-8", "surrogatepass"))


@FUZZ
@given(text=st.text(max_size=300))
def test_it_survives_random_text_inside_an_event(text: str) -> None:
    xml = (
        '<eventstream person_id="5"><encounter start_timestamp="2019-01-01 00:00:00"><events>'
        '<entry timestamp="2019-01-01 00:00:00"><event type="note" name="n">'
        + text
        + "</event></entry></events></encounter></eventstream>"
    )
    _import_one("5.xml", xml.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    "content",
    [BILLION_LAUGHS, QUADRATIC_BLOWUP, EXTERNAL_ENTITY, PARAMETER_ENTITY],
    ids=["billion-laughs", "quadratic-blowup", "external-entity", "parameter-entity"],
)
def test_it_refuses_xml_bombs_and_entities(content: str) -> None:
    folder = Path(tempfile.mkdtemp(prefix="fuzz-bomb-"))
    try:
        (folder / "1.xml").write_text(content)
        with pytest.raises(ImportFailed) as caught:
            import_release(folder / "1.xml", dataset_name="bomb")
        assert "1.xml" in str(caught.value)
        assert "root:" not in str(caught.value)  # /etc/passwd never read into the message
        assert not Dataset.objects.filter(name="bomb").exists()
        assert Event.objects.count() == 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", ["1000001.xml", "instructions.csv"])
def test_it_refuses_files_over_the_size_limit(settings, tmp_path: Path, name: str) -> None:
    settings.IMPORT_MAX_FILE_BYTES = 1024
    path = tmp_path / name
    path.write_bytes(SEEDS[name].encode() + b" " * 2048)
    with pytest.raises(ImportFailed) as caught:
        import_release(path, dataset_name="big")
    assert "IMPORT_MAX_FILE_BYTES" in str(caught.value)
    assert name in str(caught.value)
    assert not Dataset.objects.filter(name="big").exists()


def test_a_bad_file_anywhere_in_a_release_stores_nothing(tmp_path: Path) -> None:
    for name, text in SEEDS.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "ehrs").mkdir()
    (tmp_path / "ehrs" / "EHR_9.xml").write_bytes(SEEDS["EHR_1000002.xml"].encode()[:-40])
    with pytest.raises(ImportFailed) as caught:
        import_release(tmp_path, dataset_name="partial")
    assert "EHR_9.xml" in str(caught.value)
    assert all(m.objects.count() == 0 for m in MODELS)
