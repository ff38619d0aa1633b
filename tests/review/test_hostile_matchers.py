"""Every matcher over imported record text answers as ``re`` did, and in linear time on hostile
input (100 kB, long digit and separator runs, NUL, lone surrogates).

``re`` took seconds on some of these (a code line of spaces, a prolog of unclosed comments:
quadratic); they now run in RE2 (``review.linear``). The ``re`` patterns below are the old ones,
the reference for what each must still answer on ordinary input.
"""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from review.importers.ehr_xml import (
    _strip_prolog_noise,
    parse_person_text,
    person_fields,
    sniff_format,
    split_code_line,
)
from review.search import _WORD as SEARCH_WORD
from review.services.rubrics import RubricError, criterion_input
from review.vocabulary import WORD

OLD_CODE_LINE = re.compile(r"^\s*\[([^\]]*)\]\s*(.*?)\s*$", re.S)
OLD_VALUE_TAIL = re.compile(
    r"^(.*?)\s+(-?\d+(?:\.\d+)?)(?:\s+([^\s\d][^\s]*(?:\s[^\s\d][^\s]*)?))?$"
)

ORDINARY_LINES = [
    "[LOINC/8867-4] Heart rate 104 bpm",
    "  [LOINC/2160-0] Creatinine [Mass/volume] in Serum 1.1 mg/dL  ",
    "[SNOMED/44054006] Diabetes mellitus type 2",
    "[LOINC/4548-4] Hemoglobin A1c -7.25 % of total Hb",
    "[X] value 12 a b c",
    "[X] value \u0661\u0662 units",  # Arabic-Indic digits: re's \d reads them
    "[X]\u00a0value\u2003 5\u00a0mg\n",
    "no code here 5 mg",
    "[unclosed 5 mg",
    "[] 7",
    "[A]\n\nmulti\nline 5 mg\n",
]


def _old_split(text: str, event_type: str) -> tuple[str, str, str, float | None, str]:
    match = OLD_CODE_LINE.match(text or "")
    if not match:
        return "", (text or "").strip(), "", None, ""
    code, description = match.group(1).strip(), match.group(2)
    if event_type in ("measurement", "observation"):
        tail = OLD_VALUE_TAIL.match(description)
        if tail:
            return code, tail.group(1), tail.group(2), float(tail.group(2)), tail.group(3) or ""
    return code, description, "", None, ""


@pytest.mark.parametrize("line", ORDINARY_LINES)
@pytest.mark.parametrize("event_type", ["measurement", "condition_occurrence"])
def test_code_lines_split_as_re_split_them(line, event_type):
    assert split_code_line(line, event_type) == _old_split(line, event_type)


HOSTILE_LINES = [
    "[a]y" + " " * 100_000 + "x",  # re: quadratic in the spaces
    "[a]" + "a" + " " * 100_000 + "x",
    "[a] " + "1 " * 50_000 + "mg",
    "[" + "]" * 100_000,
    "[a] " + "9" * 100_000,
    "[a] x\x00 5 m\x00g",
    "[a] x\ud800 5 \udfffmg",
    "[a] " + "-." * 50_000 + " 5",
]


@pytest.mark.parametrize("line", HOSTILE_LINES, ids=range(len(HOSTILE_LINES)))
def test_hostile_code_lines_split(line):
    code, name, value, number, unit = split_code_line(line, "measurement")
    assert isinstance(name, str) and len(name) <= len(line)
    if value:
        assert float(value) == number


def test_a_line_of_spaces_splits_into_its_code_and_text():
    assert split_code_line("[a]y" + " " * 100_000 + "x", "measurement")[:2] == (
        "a",
        "y" + " " * 100_000 + "x",
    )
    assert split_code_line("[a] x\ud800 5 \udfffmg", "measurement") == (
        "a",
        "x\ud800",
        "5",
        5.0,
        "\udfffmg",
    )


OLD_PERSON_FIELD = re.compile(
    r"(Birth|Race|Gender|Ethnicity|Age in Days|Age in Years)\s*:\s*(.*?)"
    r"(?=\s+(?:Birth|Race|Gender|Ethnicity|Age in Days|Age in Years)\s*:|\s*$)",
    re.S,
)


def _old_person_fields(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in OLD_PERSON_FIELD.findall(" ".join(text.split()))}


PERSON_TEXTS = [
    "Birth: 1970-01-02 Gender: F Race: White Ethnicity: Not Hispanic",
    "Age in Days: 20000\nAge in Years: 54\tGender :M",
    "Birth: Gender: F",  # an empty value: re took the next label as Birth's value
    "Birth:Gender: F",
    "Race: whiteBirth: 1970 Ethnicity: none",  # a label glued to a value starts no field
    "XBirth: 1970 Race: Asian",
    "Gender: F Gender: M",  # the last one wins
    "Race: Birth Birth Ethnicity : none",
    "no fields at all",
    "",
    "  Birth:   1950-01-01   ",
    "Age in  Days : 3\u00a0Race:\u2003Black",  # Unicode spaces fold to one
    "Birth: 1970 \x00\ud800 Gender: \udfff",
]


@pytest.mark.parametrize("text", PERSON_TEXTS)
def test_person_fields_are_read_as_re_read_them(text):
    assert person_fields(text) == _old_person_fields(text)


_PERSON_PIECES = st.sampled_from(
    ["Birth", "Race", "Gender", "Ethnicity", "Age in Days", "Age in Years", "Age in", ":", " ",
     "  ", "\n", "x", "F", "1970", "Birth:", "Race :", "\u00a0", "\x00", "\ud800"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(_PERSON_PIECES, max_size=14).map("".join))
def test_any_person_text_is_read_as_re_read_it(text):
    assert person_fields(text) == _old_person_fields(text)


def test_the_root_element_is_found_as_before(tmp_path):
    for root, body in (("record", b"<record/>"), ("eventstream", b"<eventstream a='1'/>")):
        path = tmp_path / f"{root}.xml"
        path.write_bytes(b'<?xml version="1.0"?>\n<!-- <fake> -->\n' + body)
        assert sniff_format(path) == root


def test_person_text_reads_hostile_input():
    assert parse_person_text("Birth: 1970-01-02 Gender: F " + "x " * 50_000).gender
    fields = parse_person_text("Race: " + "Birth " * 20_000 + "\x00\ud800 Ethnicity: none")
    assert fields.ethnicity == "none"


def test_the_prolog_is_blanked_as_before_and_in_linear_time():
    head = b'<?xml version="1.0"?><!-- a --><record><!-- open'
    assert _strip_prolog_noise(head) == b" " * 21 + b" " * 10 + b"<record>" + b" " * 9
    for hostile in (b"<!--" * 65_536, b"<?" * 131_072, b"<!-- -->" * 32_768 + b"\x00\xff"):
        blanked = _strip_prolog_noise(hostile)
        assert len(blanked) == len(hostile) and b"<record" not in blanked


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("x" * 100_000, 1),
        ("1-" * 50_000, 50_000),
        ("-_" * 50_000, 50_000),  # "_" is a word character
        ("\x00\ud800 w\u00f6rd \udfff" * 10_000, 10_000),
        ("\u0661\u0662 " * 30_000, 30_000),
    ],
)
def test_word_tokenisers_read_hostile_text(text, words):
    # One character class: linear with re, left as re (see the comments at each pattern).
    for pattern in (WORD, SEARCH_WORD):
        assert sum(1 for _ in pattern.finditer(text)) == words


@pytest.mark.parametrize("tag", ["x" * 100_000, "a" * 101, "ok\x00", "ok\ud800", "a\nb"])
def test_a_hostile_rubric_tag_is_refused(tag):
    with pytest.raises(RubricError, match="tags"):
        criterion_input(
            {"text": "Mentions the potassium.", "points": 5, "tags": [tag]}, where="row 1"
        )
