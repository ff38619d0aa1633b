"""The release's own clinician judgements as a report source, kept apart from the app's
reviews, and the MedAlign paper's tables rebuilt from them."""

from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from review.demo.release import DemoSpec, write_release
from review.models import (
    AuditEvent,
    Dataset,
    Instruction,
    ModelResponse,
    Patient,
    ReferenceResponse,
    Role,
)
from review.services.imports import dataset_import
from scoring.models import CorrelationReport, MetricConfig, MetricScore, ModelVariant
from scoring.reports import compute, paper, services
from tests import factories

pytestmark = pytest.mark.django_db

RELEASE_MODELS = ["gpt4-32k", "gpt4-32k-vicuna-context", "vicuna_13B", "mpt_7B_instruct"]


@pytest.fixture
def release():
    """A MedAlign-shaped release: 24 instructions over 12 patients, four of the paper's
    models, judged by the release's clinician; a COMET and a BLEU score per response."""
    rng = np.random.default_rng(3)
    dataset = Dataset.objects.create(name="medalign-like", is_synthetic=True)
    comet = MetricConfig.objects.create(
        backend="comet", identity={"backend": "comet"}, identity_hash="c", label="COMET"
    )
    bleu = MetricConfig.objects.create(
        backend="bleu", identity={"backend": "bleu"}, identity_hash="b", label="BLEU"
    )
    skill = {"gpt4-32k": 0.8, "gpt4-32k-vicuna-context": 0.55, "vicuna_13B": 0.3,
             "mpt_7B_instruct": 0.2}  # fmt: skip
    for i in range(24):
        patient, _ = Patient.objects.get_or_create(dataset=dataset, person_id=f"P{i // 2:03d}")
        instruction = Instruction.objects.create(
            dataset=dataset,
            instruction_id=f"I{i:03d}",
            question="?",
            patient=patient,
            person_id=patient.person_id,
        )
        ReferenceResponse.objects.create(instruction=instruction, annotator="A1", text="Ref.")
        quality = {m: skill[m] + rng.normal(0, 0.3) for m in RELEASE_MODELS}
        order = sorted(RELEASE_MODELS, key=lambda m: -quality[m])
        for model in RELEASE_MODELS:
            response = ModelResponse.objects.create(
                instruction=instruction,
                model_name=model,
                text=f"{model} answer",
                release_binary_correct=bool(quality[model] > 0.45),
                release_rank=float(order.index(model) + 1),
            )
            MetricScore.objects.create(
                response=response, config=comet, value=quality[model] + rng.normal(0, 0.1)
            )
            MetricScore.objects.create(response=response, config=bleu, value=rng.normal())
    factories.put_in_study(*dataset.instructions.all())
    return dataset


def test_a_report_can_analyse_the_releases_own_judgements(release):
    researcher = factories.make_user("r@example.edu", roles=[Role.RESEARCHER])
    report = services.report_create(
        dataset=release, actor=researcher, n_resamples=300, seed=1, source="release",
        enqueue=False,
    )  # fmt: skip
    report = compute.report_compute(report_id=report.pk)
    assert report.status == CorrelationReport.Status.DONE, report.error
    results = report.results
    assert results["source"]["name"] == "release"
    assert results["counts"]["reviews"] == 24 and results["counts"]["clinicians"] == 1
    assert results["clustering"] == {
        "unit": "patient",
        "interval_method": "studentized cluster bootstrap",
        "n_clusters": 12,
        "min_clusters": 10,
    }
    # One judgement per response and no shown order: no ceiling, no position bias.
    assert results["human_ceiling"]["n_pairs"] == 0 and results["position_bias"]["n_reviews"] == 0
    comet = next(r for r in results["correlation"] if r["metric"].startswith("comet"))
    assert comet["mean_tau"] > 0.5


def test_an_app_report_sets_the_release_beside_its_reviews_and_never_pools_them(release):
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    from review.services.reviews import review_get_or_start, review_submit

    for instruction in release.instructions.order_by("pk")[:12]:
        assignment = factories.assign(instruction, clinician)
        review = review_get_or_start(assignment=assignment)
        names = dict(instruction.responses.values_list("id", "model_name"))
        edits = []
        for handle, rid in zip(review.handles, review.shown_order, strict=True):
            rank = RELEASE_MODELS.index(names[int(rid)]) + 1  # the truth, in order of skill
            edits += [
                {"handle": handle, "field": "rank", "value": rank, "at": 1},
                {"handle": handle, "field": "is_correct", "value": rank <= 2, "at": 1},
            ]
        review_submit(
            review_id=review.pk,
            clinician=clinician,
            payload={"edits": edits, "tab": "t", "seq": 1, "active_seconds": 5},
        )
    report = services.report_create(dataset=release, actor=None, n_resamples=200, enqueue=False)
    report = compute.report_compute(report_id=report.pk)
    assert report.status == CorrelationReport.Status.DONE, report.error
    assert report.results["source"]["name"] == "app"
    assert report.results["counts"]["reviews"] == 12  # the app's reviews only
    comparison = report.results["release_comparison"]
    rows = {r["model"]: r for r in comparison["models"]}
    assert rows["gpt4-32k"]["app_n"] == 12 and rows["gpt4-32k"]["release_n"] == 24
    assert comparison["agreement"]["n_reviews"] == 12
    assert -1 <= comparison["agreement"]["mean_tau"] <= 1


def test_the_papers_tables_stand_beside_the_papers_figures(release, client, capsys):
    tables = paper.paper_tables_for(release, n_resamples=300)
    models = {m["model"]: m for m in tables["models"]}
    assert models["gpt4-32k"]["paper_label"] == "GPT-4 (32k)"
    assert models["gpt4-32k"]["paper_correct"] == pytest.approx(0.601)
    assert models["vicuna_13B"]["paper_win_rate"] == pytest.approx(0.401)
    # Win rate as Table 3 defines it, from plain counts: GPT-4 32k against each opponent.
    ranks = {(r.instruction_id, r.model_name): r.release_rank for r in ModelResponse.objects.all()}
    shares = []
    for other in RELEASE_MODELS[1:]:
        won = sum(ranks[(i, "gpt4-32k")] < ranks[(i, other)] for i, _ in ranks if _ == "gpt4-32k")
        lost = sum(ranks[(i, "gpt4-32k")] > ranks[(i, other)] for i, _ in ranks if _ == "gpt4-32k")
        shares.append(won / (won + lost))
    assert models["gpt4-32k"]["win_rate"] == pytest.approx(np.mean(shares))
    (context,) = tables["context_length"]["comparisons"]
    assert (context["base_model"], context["long"], context["short"]) == ("GPT-4", 32768, 2048)
    assert context["paper_difference"] == pytest.approx(0.083)
    metrics = {m["metric"]: m for m in tables["metrics"]}
    comet = next(m for k, m in metrics.items() if k.startswith("comet"))
    assert comet["paper_tau"] == 0.37 and comet["mean_tau"] > 0.5
    bleu = next(m for k, m in metrics.items() if k.startswith("bleu"))
    assert bleu["paper_tau"] is None  # the paper's GoogleBLEU is not BLEU
    # The page and the command.
    client.force_login(factories.make_user("r@example.edu", roles=[Role.RESEARCHER]))
    page = client.get(reverse("scoring_paper_tables", args=[release.pk]))
    html = page.content.decode()
    assert page.status_code == 200 and 'data-testid="paper-models"' in html
    assert "60.1%" in html and "GPT-4 (32k)" in html
    call_command("paper_tables", "--dataset", release.name, "--resamples", "200")
    out = capsys.readouterr().out
    assert "Table 3" in out and "60.1%" in out and "Table 4" in out


def test_the_papers_tables_build_from_the_demo_release(tmp_path: Path, capsys):
    write_release(tmp_path, DemoSpec(n_patients=4, n_instructions=12, big_record_events=100))
    dataset_import(path=tmp_path, dataset_name="demo", is_synthetic=True)
    dataset = Dataset.objects.get(name="demo")
    ModelVariant.objects.create(
        dataset=dataset, model_name="Dune-32k", base_model="Dune", context_length=32768
    )
    ModelVariant.objects.create(
        dataset=dataset, model_name="Dune-2k", base_model="Dune", context_length=2048
    )
    assert ModelResponse.objects.filter(release_rank__isnull=False).count() == 12 * 6
    call_command("paper_tables", "--dataset", "demo", "--resamples", "200")
    out = capsys.readouterr().out
    assert "Dune 32768 vs 2048" in out and "Atlas-70B" in out


def test_no_release_judgements_say_so(client):
    dataset = Dataset.objects.create(name="empty")
    assert "no release judgements" in paper.paper_tables_for(dataset)["empty"]


def test_names_spelled_otherwise_are_said_and_can_be_mapped(release, client, capsys):
    """A release whose model names are spelled differently from the paper's code matched
    nothing: every published figure and the context-length comparison became a dash, silently.
    Now the names that did not match are printed, and an admin maps them (page or --map)."""
    renamed = {"gpt4-32k": "GPT-4-32K", "gpt4-32k-vicuna-context": "gpt-4 (2k context)"}
    for old, new in renamed.items():
        ModelResponse.objects.filter(model_name=old).update(model_name=new)
    tables = paper.paper_tables_for(release, n_resamples=200)
    assert set(tables["matching"]["unmatched_models"]) == set(renamed.values())
    assert "GPT-4 (32k)" in tables["matching"]["paper_models_absent"]
    assert tables["context_length"]["comparisons"] == []
    call_command("paper_tables", "--dataset", release.name, "--resamples", "200")
    out = capsys.readouterr().out
    assert "Not matched to any of the paper's models" in out and "GPT-4-32K" in out

    # The command maps one, the page the other; both audited, and an unknown label refused.
    with pytest.raises(CommandError, match="the paper has no model 'GPT-5'"):
        call_command("paper_tables", "--dataset", release.name, "--map", "GPT-4-32K=GPT-5")
    call_command(
        "paper_tables", "--dataset", release.name, "--resamples", "200",
        "--map", "GPT-4-32K=GPT-4 (32k)",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "mapped: GPT-4-32K = GPT-4 (32k)" in out
    assert "Model GPT-4-32K is the paper's GPT-4 (32k) (declared)" in out
    admin = factories.make_user("a@example.edu", roles=[Role.ADMIN])
    factories.sign_in(client, admin)
    page = client.get(reverse("scoring_paper_tables", args=[release.pk])).content.decode()
    assert 'data-testid="paper-unmatched"' in page and "gpt-4 (2k context)" in page
    assert 'name="map:gpt-4 (2k context)"' in page
    response = client.post(
        reverse("scoring_paper_map", args=[release.pk]),
        {"map:gpt-4 (2k context)": "GPT-4 (2k)"},
    )
    assert response.status_code == 302
    assert (
        AuditEvent.objects.filter(
            action=AuditEvent.Action.ADMIN_CHANGED, details__change="paper model names"
        ).count()
        == 2
    )
    tables = paper.paper_tables_for(release, n_resamples=200)
    models = {m["model"]: m for m in tables["models"]}
    assert models["GPT-4-32K"]["paper_correct"] == pytest.approx(0.601)
    assert models["gpt-4 (2k context)"]["paper_label"] == "GPT-4 (2k)"
    (context,) = tables["context_length"]["comparisons"]
    assert context["paper_difference"] == pytest.approx(0.083)
    assert tables["matching"]["unmatched_models"] == []
    # A researcher reads the page but cannot map.
    factories.sign_in(client, factories.make_user("r@example.edu", roles=[Role.RESEARCHER]))
    assert (
        "Save the mapping"
        not in client.get(reverse("scoring_paper_tables", args=[release.pk])).content.decode()
    )
    refused = client.post(reverse("scoring_paper_map", args=[release.pk]), {})
    assert refused.status_code == 403 and "not available to your role" in refused.content.decode()
