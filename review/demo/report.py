"""The demo's first report, so `load_demo` leaves a populated report page behind.

Lexical metrics only (ROUGE-L, BLEU, chrF++: seconds on a CPU, no model download), scored inline,
then one report computed inline. Model-based metrics remain a click away on the runs page.
"""

from review.models import Dataset
from scoring.models import CorrelationReport, ScoringBatch
from scoring.reports import compute, services
from scoring.runs import scoring as scoring_runs

DEMO_METRICS = ("rougeL", "bleu", "chrf")
DEMO_RESAMPLES = 2_000  # plenty for a demo, and quick
# The demo's one base model at two context lengths, for the report's context-length section.
DEMO_VARIANTS = {"Dune-32k": ("Dune", 32768), "Dune-2k": ("Dune", 2048)}


def demo_first_report(*, dataset_name: str) -> list[str]:
    dataset = Dataset.objects.filter(name=dataset_name).first()
    if dataset is None:
        return [f"Demo report skipped: no dataset {dataset_name!r}."]
    existing = CorrelationReport.objects.filter(
        dataset=dataset, status=CorrelationReport.Status.DONE
    ).first()
    if existing is not None:
        return [f"Demo report: #{existing.pk} exists (/research/reports/{existing.pk}/)."]
    for name, (base, length) in DEMO_VARIANTS.items():
        services.model_variant_set(
            dataset=dataset, model_name=name, base_model=base, context_length=length
        )
    run = scoring_runs.scoring_run_create(dataset=dataset, metrics=DEMO_METRICS, enqueue=False)
    for batch in run.batches.filter(status=ScoringBatch.Status.PENDING).order_by("id"):
        scoring_runs.scoring_batch_execute(batch_id=batch.pk)
    report = services.report_create(
        dataset=dataset,
        actor=None,
        n_resamples=DEMO_RESAMPLES,
        seed=0,
        title="Demo (simulated reviews, lexical metrics)",
        enqueue=False,
    )
    report = compute.report_compute(report_id=report.pk)
    if report.status != CorrelationReport.Status.DONE:
        return [f"Demo report #{report.pk} failed: {report.error}"]
    return [
        f"Demo report #{report.pk}: {', '.join(DEMO_METRICS)} on simulated reviews "
        f"(/research/reports/{report.pk}/)."
    ]
