"""Every matcher over a judge's, a grader's or a model's output answers as ``re`` did, and in
linear time on hostile input (100 kB, runs of "{", spaces and blank lines, NUL, surrogates).

``re`` was quadratic on these (a run of "{" in a judge's answer, of spaces in a grader's, of
blank lines in a response); they now run in RE2. The ``re`` patterns below are the old ones,
the reference for what each must still answer on ordinary input.
"""

import json
import re

import pytest

from scoring.grading.grader import parse_grade
from scoring.metrics.jury import parse_verdict
from scoring.reports.selectors import _BOLD, _HEADER, _LIST_ITEM

OLD_LIST_ITEM = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s+", re.MULTILINE)
OLD_HEADER = re.compile(r"^\s*#{1,6}\s+\S", re.MULTILINE)
OLD_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")

VERDICT = {c: {"score": 4, "explanation": "ok"} for c in ("accuracy", "completeness", "clarity")}
RESPONSES = [
    "# Plan\n\n1. Hold the statin.\n2) Recheck CK.\n- **Why**: myalgia\n  * __note__\n",
    "\n\n   ## Heading\n\u2022 item\n\u0661. arabic-indic item\n#no-space\n####### seven",
    "plain text with ** unbalanced and __ marks",
    "\u00a0- nbsp item\n\u2003# em-space header\n",
]


@pytest.mark.parametrize("text", RESPONSES)
def test_style_counts_match_re(text):
    for ours, theirs in ((_LIST_ITEM, OLD_LIST_ITEM), (_HEADER, OLD_HEADER), (_BOLD, OLD_BOLD)):
        assert len(ours.findall(text)) == len(theirs.findall(text))


@pytest.mark.parametrize(
    ("text", "items", "headers"),
    [
        ("\n" * 100_000 + "x", 0, 0),  # re: quadratic in the blank lines
        (" \n" * 50_000 + "- x", 1, 0),
        ("\n# h" * 25_000, 0, 25_000),
        ("1." * 50_000, 0, 0),
        ("\x00\ud800- a\n" * 10_000, 0, 0),
        ("- a\ud800\n" * 10_000, 10_000, 0),
    ],
)
def test_style_counts_read_hostile_text(text, items, headers):
    assert len(_LIST_ITEM.findall(text)) == items
    assert len(_HEADER.findall(text)) == headers
    assert len(_BOLD.findall("**a" * 30_000 + text[:1000])) == 15_000


def test_verdicts_are_read_as_before():
    answer = "Here is my verdict: " + json.dumps(VERDICT) + " Thanks."
    assert parse_verdict(answer) == {c: 4.0 for c in VERDICT}
    assert parse_verdict(json.dumps(VERDICT)[:-1]) == {c: 4.0 for c in VERDICT}  # cut off


# json.loads refuses a number past int's 4,300 digits with a plain ValueError and nesting past
# the recursion limit with RecursionError, not JSONDecodeError: both are no verdict.
_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "answer",
    [
        "{" * 100_000,
        "}" * 100_000,
        "{" + " " * 100_000,
        "\x00{\ud800}",
        "",
        "9" * 100_000,
        '{"relevance": ' + "9" * 5000 + "}",
        '{"a": ' + _DEEP + "}",
        '{"a": ' + "[" * 100_000,  # cut off: read again with a closing brace
    ],
    ids=range(9),
)
def test_a_hostile_judge_answer_is_no_verdict(answer):
    assert parse_verdict(answer) is None


def test_grades_are_read_as_before():
    body = json.dumps({"criteria_met": True, "explanation": "mentions K+"})
    assert parse_grade(f"```json\n{body}\n```") == (True, "mentions K+")
    assert parse_grade(f"Sure: {body} done") == (True, "mentions K+")
    lone = json.dumps({"criteria_met": False, "explanation": "x\ud800"}, ensure_ascii=False)
    assert parse_grade(lone) == (False, "x\ud800")  # a group is read as written


@pytest.mark.parametrize(
    "answer",
    [
        "```" + " " * 100_000 + "x",  # re: quadratic in the spaces
        " " * 100_000 + "```",
        "{" * 100_000,
        "```json" + "\n" * 100_000 + "```",
        "\x00\ud800" * 50_000,
        '{"criteria_met": true, "n": ' + "9" * 5000 + "}",
        '{"criteria_met": true, "n": ' + _DEEP + "}",
    ],
    ids=range(7),
)
def test_a_hostile_grader_answer_is_no_grade(answer):
    assert parse_grade(answer) is None
