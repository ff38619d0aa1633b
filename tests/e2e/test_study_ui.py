"""A researcher's generation runs change nothing a clinician ranks until an admin adds a
completed run to a study, and never under a started instruction; the report names the
response set it analysed. In Chromium, as a clinician, an admin and a researcher."""

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from review.demo.reviews import demo_simulated_reviews
from review.models import ModelResponse, Role, Study, StudyResponse
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams
from scoring.models import GenerationBatch, GenerationRun
from scoring.reports import compute
from scoring.reports import services as reports
from tests import factories
from tests.scoring.generation_data import make_generation_dataset
from tests.scoring.tiny_lm import build_tiny_lm

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sign_in(page, live_server, user) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([factories.session_cookie(user, live_server.url)])


def _responses_on_page(page, live_server, instruction, study=None) -> int:
    url = reverse("clinician_review", args=[instruction.pk])
    page.goto(live_server.url + url + (f"?study={study.pk}" if study else ""))
    expect(page.get_by_test_id("instruction")).to_be_visible()
    data = page.evaluate("JSON.parse(document.getElementById('review-data').textContent)")
    return len(data["responses"])


def _run(dataset, model, label, settings_dir) -> GenerationRun:
    run = generation.generation_run_create(
        dataset=dataset,
        model=model,
        label=label,
        context_lengths=[256],
        params=GenerationParams(max_new_tokens=3),
        enqueue=False,
    )
    for batch in GenerationBatch.objects.filter(run=run):
        generation.generation_batch_execute(batch_id=batch.pk)
    run.refresh_from_db()
    return run


def test_generation_runs_change_nothing_until_an_admin_adds_a_completed_one(
    live_server, page, settings, tmp_path
):
    factories.active_dua()
    settings.GENERATION_MODEL_DIR = tmp_path / "models"
    build_tiny_lm(tmp_path / "models" / "tiny-lm")
    dataset = make_generation_dataset("e2e-study", n_instructions=4)
    instructions = list(dataset.instructions.exclude(patient=None).order_by("pk"))
    for instruction in instructions:
        for name in ("release-a", "release-b"):
            ModelResponse.objects.create(instruction=instruction, model_name=name, text="Text.")
    round1 = factories.put_in_study(*instructions)
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    admin = factories.make_user("a@example.edu", roles=[Role.ADMIN])
    researcher = factories.make_user("r@example.edu", roles=[Role.RESEARCHER])
    for instruction in instructions:
        factories.assign(instruction, clinician, study=round1)

    page.set_viewport_size({"width": 1440, "height": 900})
    _sign_in(page, live_server, clinician)
    assert _responses_on_page(page, live_server, instructions[0]) == 2  # started now

    # A researcher's three runs: completed, failed, partial (a batch never finished).
    done = _run(dataset, "local:tiny-lm", "done-lm", settings)
    failed = _run(dataset, "local:tiny-lm", "failed-lm", settings)
    partial = _run(dataset, "local:tiny-lm", "partial-lm", settings)
    assert done.status == failed.status == partial.status == GenerationRun.Status.DONE
    GenerationRun.objects.filter(pk=failed.pk).update(status=GenerationRun.Status.FAILED)
    GenerationBatch.objects.filter(run=partial).update(status="pending")
    assert ModelResponse.objects.filter(model_name__endswith="@256").count() == 12

    # Nothing changed for the clinician: the started instruction and a fresh one show two.
    assert _responses_on_page(page, live_server, instructions[0]) == 2
    assert _responses_on_page(page, live_server, instructions[1]) == 2

    # The admin: round 1 has started, so adding is refused; a new round takes the completed run.
    _sign_in(page, live_server, admin)
    page.goto(live_server.url + reverse("admin_studies", args=[dataset.pk]))
    row = page.locator("tr[data-model='done-lm@256']")
    row.get_by_role("button", name="Add to round 1").click()
    expect(page.get_by_text("a started instruction's response set never changes")).to_be_visible()
    page.get_by_label("Name").fill("Round 2: with done-lm")
    page.get_by_label("Start from the response set of").select_option(label="1. Round 1")
    page.get_by_role("button", name="Create the round").click()
    expect(page.get_by_text("Created Round 2: with done-lm (round 2)")).to_be_visible()
    page.locator("tr[data-model='done-lm@256']").get_by_role(
        "button", name="Add to round 2"
    ).click()
    expect(page.get_by_text("Added 4 responses of done-lm@256")).to_be_visible()
    for label, run in (("failed-lm@256", failed), ("partial-lm@256", partial)):
        page.locator(f"tr[data-model='{label}']").get_by_role(
            "button", name="Add to round 2"
        ).click()
        expect(page.locator("li.error")).to_contain_text(f"run #{run.pk}")
    round2 = Study.objects.get(dataset=dataset, round=2)
    assert set(
        StudyResponse.objects.filter(study=round2).values_list("response__model_name", flat=True)
    ) == {"release-a", "release-b", "done-lm@256"}
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(tmp_path / "studies-phone.png"), full_page=True)

    # Round 2 has its own assignments: the clinician now sees three; round 1 still two.
    for instruction in instructions:
        factories.assign(instruction, clinician, study=round2, fill=False)
    _sign_in(page, live_server, clinician)
    assert _responses_on_page(page, live_server, instructions[2]) == 3
    assert _responses_on_page(page, live_server, instructions[0], study=round1) == 2

    # The report names the set it analysed.
    demo_simulated_reviews(dataset_name=dataset.name, n_clinicians=2)  # the latest round
    report = reports.report_create(
        dataset=dataset, actor=researcher, n_resamples=100, seed=1, enqueue=False
    )
    report = compute.report_compute(report_id=report.pk)
    assert report.status == "done", report.error
    _sign_in(page, live_server, researcher)
    page.goto(live_server.url + reverse("scoring_report_detail", args=[report.pk]))
    expect(page.get_by_test_id("response-set")).to_contain_text("Round 2: with done-lm")
    expect(page.get_by_test_id("response-set")).to_contain_text("3 models")
