"""``review.linear``: RE2 for hostile text, with ``re``'s answers where a caller relies on them."""

import re

import pytest

from review import linear

HOSTILE = [
    "",
    "plain words, 12 digits",
    "a" * 100_000,
    "1" * 100_000 + "x",
    "-. _" * 25_000,
    "\x00" * 1000 + "word\x00",
    "lone \ud800 surrogate \udfff end",
    "accents: café naïve Ωmega 東京 ½",
    " \t\n\r\x0b\x0c\x1c\x85\u00a0\u2003\u3000" * 100,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_unicode_classes_match_what_re_matches(text):
    for ours, theirs in ((linear.WORD + "+", r"\w+"), (linear.DIGIT + "+", r"\d+")):
        spans = [m.span() for m in linear.Pattern(ours).finditer(text)]
        assert spans == [m.span() for m in re.finditer(theirs, text)]
    space = [m.span() for m in linear.Pattern(linear.SPACE + "+").finditer(text)]
    assert space == [m.span() for m in re.finditer(r"\s+", text)]


def test_lone_surrogates_keep_every_offset():
    text = "ab\ud800cd\udfffef"
    pattern = linear.Pattern(r"[a-z]+")
    assert [m.span() for m in pattern.finditer(text)] == [(0, 2), (3, 5), (6, 8)]
    assert pattern.sub("X", text) == "X\ud800X\udfffX"
    assert pattern.findall(text) == ["ab", "cd", "ef"]
    assert linear.Pattern(r"b.c").search(text).group(0) == "b\ud800c"  # as written


def test_sub_takes_a_string_literally_and_a_function_per_match():
    pattern = linear.Pattern(r"(\d+)")
    assert pattern.sub(r"\1", "a1b22") == r"a\1b\1"
    assert pattern.sub(lambda m: "<" + m.group(1) + ">", "a1b22", count=1) == "a<1>b22"
    assert pattern.sub(lambda m: "<" + m.group(1) + ">", "a1b22") == "a<1>b<22>"


def test_lookaround_does_not_compile():
    with pytest.raises(Exception):  # noqa: B017 - RE2's error type is its own
        linear.Pattern(r"(?<=a)b")


def test_bytes_patterns_read_one_byte_as_one_character_and_see_the_context():
    pattern = linear.BytesPattern(rb"\bam\b")
    assert pattern.search(b"I am", 0) == (2, 4)
    assert pattern.search(b"Iam", 1) is None  # "I" before the window still counts
    assert linear.BytesPattern(rb"\xff+").search(b"a\xff\xffb") == (1, 3)
    assert list(linear.BytesPattern(rb"a").spans(b"aXa")) == [(0, 1), (2, 3)]
    assert linear.BytesPattern(rb"x*").fullmatch(b"axxb", 1, 3)
