"""A report page says each fact once, or the same way everywhere it says it.

An outside walk through the report found its table saying "significance cluster 1" for every
metric while the section below said "not placed, too few clusters", a resampling unit that
read "instructions" while the report was computing and "patients" when done, "33th" and "0th
percentile". This renders every section of a report and compares the statements."""

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from review.demo.reviews import demo_simulated_reviews
from review.models import (
    Dataset,
    Instruction,
    ModelResponse,
    ReferenceResponse,
    Role,
)
from scoring.models import CorrelationReport, MetricConfig, MetricScore
from scoring.reports import compute, services, wording
from tests import factories

pytestmark = pytest.mark.django_db

N_PATIENTS = 14


@pytest.fixture(autouse=True)
def _settings(settings, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.MEDIA_ROOT = tmp_path


def _study():
    dataset = Dataset.objects.create(name="statements", is_synthetic=True)
    configs = [
        MetricConfig.objects.create(
            backend=b, identity={"backend": b}, identity_hash=f"h-{b}", label=b.upper()
        )
        for b in ("bleu", "chrf", "rougeL")
    ]
    for p in range(N_PATIENTS):
        for j in range(2):  # two instructions per patient: patients are the clusters
            instruction = Instruction.objects.create(
                dataset=dataset,
                instruction_id=f"I{p:03d}-{j}",
                question="Synthetic?",
                category=("triage", "diagnosis")[j],
                person_id=f"P{p:03d}",
            )
            ReferenceResponse.objects.create(instruction=instruction, annotator="A1", text="R.")
            for k, model in enumerate(("north", "south", "east", "west")):
                response = ModelResponse.objects.create(
                    instruction=instruction, model_name=model, text=f"Answer {k} {p} {j}."
                )
                for c, config in enumerate(configs):
                    value = (4 - k) * (c + 1) + ((p * 7 + j * 3 + k * 5 + c) % 6)
                    if c == 2 and p < N_PATIENTS - 4:
                        continue  # ROUGE-L scored four patients only: not placed
                    MetricScore.objects.create(response=response, config=config, value=value)
    factories.put_in_study(*dataset.instructions.all())
    demo_simulated_reviews(dataset_name=dataset.name, n_clinicians=3)
    return dataset


class _Text(HTMLParser):
    """Every element's text by data-testid, and the rows of every table by data-testid."""

    def __init__(self):
        super().__init__()
        self.stack, self.by_id, self.tables, self.text = [], {}, {}, []
        self._table, self._row, self._cell = None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.stack.append((tag, attrs.get("data-testid")))
        if tag == "table":
            self._table = attrs.get("data-testid") or ""
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        for _, testid in self.stack:
            if testid:
                self.by_id[testid] = self.by_id.get(testid, "") + data


def _page(client, report):
    response = client.get(reverse("scoring_report_detail", args=[report.pk]))
    assert response.status_code == 200
    parsed = _Text()
    parsed.feed(response.content.decode())
    return parsed, " ".join("".join(parsed.text).split())


def test_every_section_states_each_fact_the_same_way(client):
    dataset = _study()
    factories.sign_in(client, factories.make_user("r@example.edu", roles=[Role.RESEARCHER]))
    pending = services.report_create(
        dataset=dataset, actor=None, n_resamples=300, seed=3, enqueue=False
    )
    _, pending_text = _page(client, pending)
    report = compute.report_compute(report_id=pending.pk)
    assert report.status == CorrelationReport.Status.DONE, report.error
    page, text = _page(client, report)

    # The resampling unit: the same words while computing and when done, and everywhere.
    assert report.results["clustering"]["unit"] == "patient"
    assert "bootstrap resamples over patients" in text
    assert "resamples over patients where instructions share records" in pending_text
    assert "over instructions" not in text and "over instructions" not in pending_text
    # The method is named, the one the statistics used.
    assert "studentized cluster bootstrap intervals over patients" in text

    # Significance clusters: the table's column and the section's chips say the same.
    labels = {m["key"]: m["label"] for m in report.results["metrics"]}
    table = {row[0]: row[2] for row in page.tables["correlation-table"][1:]}
    chips = page.by_id["significance-clusters"]
    placed = {c["metric"]: c["cluster"] for c in report.results["significance"]["clusters"]}
    assert placed["rougeL"] is None and placed["bleu"] is not None  # both cases occur
    for key, cluster in placed.items():
        label = labels[key]
        if cluster is None:
            assert table[label] == "not placed"
            assert f"{label} (" in chips and "not placed, too few clusters" in chips
        else:
            assert table[label] == str(cluster)
            assert f"{cluster}. {label} (" in chips
    # The better metric of each tested pair comes first in the clusters' order.
    order = [c["metric"] for c in report.results["significance"]["clusters"]]
    for pair in report.results["significance"]["pairs"]:
        if pair.get("better") and pair.get("p_two_sided") is not None:
            worse = pair["metric_b"] if pair["better"] == pair["metric_a"] else pair["metric_a"]
            assert order.index(pair["better"]) < order.index(worse)

    # Responses left out of each pair: the permutation test and the paired bootstrap agree.
    perm = {(r[0], r[1]): r[5] for r in page.tables["significance-table"][1:]}
    paired = {(r[0], r[1]): r[5] for r in page.tables["paired-table"][1:]}
    assert perm == paired and set(perm.values()) != {"0"}
    # The place among clinicians: the correlation table and the leave-one-out table agree.
    loo = {row[0]: row[2] for row in page.tables["loo-table"][1:]}
    among = {row[0]: row[3] for row in page.tables["correlation-table"][1:]}
    for label, place in among.items():
        assert loo[label].startswith(place), (label, place, loo[label])
    # No interval for a metric whose own reviews span too few patients (ROUGE-L: four).
    assert "interval" not in among["ROUGEL"]
    # Ordinals are English ones, and no "0th percentile" stands in for "below every clinician".
    for number, suffix in re.findall(r"\b(\d+)(st|nd|rd|th)\b", text):
        assert f"{number}{suffix}" == wording.ordinal(int(number))
    assert "0th percentile" not in text
    # Two columns that would say the same (every answer here is four words, no lists): one
    # column, and the reason.
    style = page.tables["style-table"]
    assert len(style[0]) == 2 and "the same here" in style[0][1]
    assert "no style feature (bold, headers, length words, list items) differed" in text
    _counts_agree(page, text, report)


def _number(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found, pattern
    return int(found.group(1).replace(",", ""))


def _counts_agree(page, text, report):
    """Every count the page states in more than one section: reviews, judgements, responses,
    instructions, clinicians, models, clusters, resamples."""
    reviews = _number(r"Reviews included\s*(\d+) \(", text)
    judgements = _number(r"; (\d+) judgements of \d+ responses", text)
    responses = _number(r"judgements of (\d+) responses", text)
    instructions = _number(r"judgements of \d+ responses, (\d+) instructions", text)
    clinicians = _number(r"instructions, (\d+) clinicians", text)
    models = _number(r"clinicians, (\d+) models", text)
    # The response set at the top and the provenance at the bottom.
    assert f"{responses} responses of {models} models to {instructions} instructions" in text
    assert f"Includes {reviews} SIMULATED reviews of {reviews}" in text
    # Significance compares the placed metrics on every response (all of them scored them).
    assert f"compared on the {responses} responses all of them scored" in text
    # The leaderboard: one row per model, its judgements adding up to the provenance's.
    board = page.tables["leaderboard-table"][1:]
    assert len(board) == models
    assert sum(int(row[1]) for row in board) == judgements
    # Reviews used plus skipped: the correlation table, position bias and the breakdowns.
    used, skipped = (int(v) for v in re.findall(r"\d+", page.tables["correlation-table"][1][-1]))
    assert used + skipped == reviews
    assert f"{used} reviews, {skipped} skipped; {judgements} judgements" in text
    for t in report.results["breakdowns"]:
        rows = page.tables[f"breakdown-{t}"][1:]
        assert sum(int(row[1]) for row in rows) == reviews, t
    # Clinicians: the leave-one-out paragraph, its places and the provenance.
    assert f": {clinicians} clinicians, median" in text
    for row in page.tables["loo-table"][1:]:
        assert f"of {clinicians}" in row[3], row  # "none of 3", "2 of 3; 95% interval..."
        assert re.findall(r"of (\d+)", row[2]) in ([], [str(clinicians)]), row
    # Clusters: the intervals line, the reviews-still-needed rows and the results.
    n_clusters = report.results["clustering"]["n_clusters"]
    assert f"({n_clusters} clusters;" in text
    for study_size in re.findall(r"more than the study's (\d+)", text):
        assert int(study_size) == n_clusters
    # Resamples: the header and the Bradley-Terry refits.
    resamples = _number(r"(\d+) bootstrap resamples over", text)
    assert f"all {resamples} bootstrap refits converged" in text
    # A pair's difference on the common responses: the permutation table and the paired one.
    perm = {(r[0], r[1]): r[2] for r in page.tables["significance-table"][1:]}
    for r in page.tables["paired-table"][1:]:
        if perm[(r[0], r[1])] != "n/a":
            assert r[2].startswith(perm[(r[0], r[1])]), r
    # Every interval is named as the one the statistics drew, wherever it is named.
    for method in re.findall(r"([\w-]+ cluster[- ]bootstrap|[\w-]+-bootstrap)", text):
        assert method in {
            "studentized cluster bootstrap",
            "percentile-bootstrap",  # the place among clinicians: a count, not a mean
        }, method


def test_style_columns_stay_two_when_they_differ():
    from scoring.reports.page import _style

    section = {
        "plain": {"strength": {"a": 0.3, "b": -0.3}, "ci_low": {"a": 0.1, "b": -0.5},
                  "ci_high": {"a": 0.5, "b": -0.1}},
        "controlled": {"strength": {"a": 0.1, "b": -0.1}, "ci_low": {"a": -0.1, "b": -0.3},
                       "ci_high": {"a": 0.3, "b": 0.1}},
        "style_coefficients": {"length_words": {"coefficient": 0.8, "ci_low": 0.2,
                                                "ci_high": 1.4}},
    }  # fmt: skip
    out = _style(section)
    assert not out["same"] and out["same_reason"] == ""
    section["controlled"] = section["plain"]
    assert _style(section)["same_reason"].startswith("controlling for style moved no strength")


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, "0th"), (1, "1st"), (2, "2nd"), (3, "3rd"), (11, "11th"), (12, "12th"),
     (13, "13th"), (21, "21st"), (22, "22nd"), (33, "33rd"), (101, "101st"), (111, "111th")],
)  # fmt: skip
def test_ordinals(n, expected):
    assert wording.ordinal(n) == expected


def test_places_among_few_clinicians_are_counts_with_their_interval():
    assert wording.clinician_place(0.0, 3, [0.0, 0.67]) == (
        "below every clinician; 95% interval 0–2 of 3"
    )
    assert wording.clinician_place(1.0, 3, [0.33, 1.0]) == (
        "as well as every clinician; 95% interval 1–3 of 3"
    )
    assert wording.clinician_place(2 / 3, 3, n_at_most=2) == "as well as 2 of 3 clinicians"
    assert (
        wording.clinician_place(0.0, 3, [0.0, 0.0]) == "below every clinician; 95% interval 0 of 3"
    )
    assert wording.clinician_place(0.33, 15) == "33rd percentile of clinicians"
    assert wording.clinicians_beaten(1.0, 4, [0.5, 1.0]) == "every one of 4; 95% interval 2–4 of 4"
