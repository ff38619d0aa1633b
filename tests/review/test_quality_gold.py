"""Gold items: their reference (the release's labels, or a senior clinician's with a reason),
mixed into queues at the admin's rate beside new work, never ordinary work themselves, and each
clinician's agreement with them on the admin's quality page."""

import pytest
from django.urls import reverse

from review.models import Assignment, AuditEvent, GoldItem
from review.selectors.quality import study_quality
from review.services import quality as services
from review.services.assignments import assignments_create
from tests import factories
from tests.review.quality_data import RELEASE, make_world, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def w():
    return make_world(n_instructions=14, n_clinicians=2, prefix="G")


def test_release_labels_become_gold_references(w):
    # One instruction lacks a verdict on a response: it cannot be gold.
    lacking = w.instructions[-1].responses.first()
    lacking.release_binary_correct = None
    lacking.save()
    result = services.gold_items_from_release(
        study=w.study, instructions=w.instructions[-3:], use="gold", actor=w.admin
    )
    assert (result.created, result.without_labels) == (2, 1)
    item = GoldItem.objects.get(study=w.study, instruction=w.instructions[-3])
    got = {j.response.model_name: (j.rank, j.is_correct) for j in item.judgements.all()}
    assert got == RELEASE
    assert item.source == "release" and "binary_correct" in item.reason
    assert AuditEvent.objects.filter(action="gold_changed").count() == 2


def test_a_senior_reference_needs_a_reason_and_a_senior(w):
    instruction = w.instructions[0]
    ids = list(instruction.responses.values_list("id", flat=True))
    judgements = {rid: (k + 1, k < 2) for k, rid in enumerate(ids)}
    common = {"study": w.study, "instruction": instruction, "use": "calibration", "actor": w.admin}
    with pytest.raises(services.QualityError, match="reason"):
        services.gold_item_set(**common, source="senior", judgements=judgements, reason=" ")
    with pytest.raises(services.QualityError, match="senior clinician"):
        services.gold_item_set(**common, source="senior", judgements=judgements, reason="Why.")
    with pytest.raises(services.QualityError, match="every response"):
        services.gold_item_set(
            **common, source="senior", judgements=dict(list(judgements.items())[:2]),
            reason="Why.", senior=w.clinicians[0],
        )  # fmt: skip
    item = services.gold_item_set(
        **common, source="senior", judgements=judgements, reason="The creatinine was 1.2.",
        senior=w.clinicians[0],
    )  # fmt: skip
    assert item.senior == w.clinicians[0] and item.judgements.count() == 4


def _gold(w, n):
    services.gold_items_from_release(
        study=w.study, instructions=w.instructions[:n], use="gold", actor=w.admin
    )


def test_gold_is_mixed_in_at_the_rate_beside_new_work(w):
    _gold(w, 4)
    services.quality_policy_set(
        study=w.study, gold_rate=0.25, adjudication_tau=0.0, drift_window=10, actor=w.admin
    )
    plan = assignments_create(
        instructions=w.instructions, clinicians=w.clinicians, overlap=1, actor=w.admin
    )
    # 10 ordinary instructions shared by two clinicians (5 each): gold / (gold + 5) = 1/4 gives
    # 5/3, rounded to 2 each. Gold instructions are never ordinary work.
    assert plan.known_items == 4 and plan.created == 10 and plan.gold == 4
    for clinician in w.clinicians:
        mine = Assignment.objects.filter(clinician=clinician)
        gold = mine.filter(purpose="gold")
        assert gold.count() == 2 and mine.filter(purpose="review").count() == 5
        assert not set(gold.values_list("instruction_id", flat=True)) & set(
            mine.filter(purpose="review").values_list("instruction_id", flat=True)
        )
        # One creation time for the batch: when an assignment arrived sets no gold apart.
        assert mine.values("created_at").distinct().count() == 1
    gold_instructions = {i.pk for i in w.instructions[:4]}
    assert not Assignment.objects.filter(
        purpose="review", instruction_id__in=gold_instructions
    ).exists()
    # Another batch keeps the share: no item is given to a clinician twice.
    services.quality_policy_set(
        study=w.study, gold_rate=0.5, adjudication_tau=0.0, drift_window=10, actor=w.admin
    )
    extra = w.instructions[-1]
    assignments_create(instructions=[extra], clinicians=w.clinicians, overlap=2, actor=w.admin)
    for clinician in w.clinicians:
        held = list(
            Assignment.objects.filter(clinician=clinician).values_list("instruction_id", flat=True)
        )
        assert len(held) == len(set(held))


def test_gold_lands_anywhere_among_the_new_work():
    """The places are drawn with the CSPRNG: over many batches every place occurs, and gold
    is not kept to the end (where ids, hence the queue's order, would show it)."""
    rows = list(range(8))
    places = set()
    for _ in range(300):
        out = services.interleave(rows, ["g"])  # type: ignore[list-item]
        places.add(out.index("g"))
    assert places == set(range(9))


def test_no_gold_is_mixed_in_at_rate_zero(w):
    _gold(w, 4)
    plan = assignments_create(
        instructions=w.instructions, clinicians=w.clinicians, overlap=1, actor=w.admin
    )
    assert plan.gold == 0 and not Assignment.objects.filter(purpose="gold").exists()


def test_agreement_with_gold_is_on_the_quality_page_with_a_wilson_interval(w, client):
    _gold(w, 6)
    good, sloppy = w.clinicians
    wrong = {name: (5 - rank, not correct) for name, (rank, correct) in RELEASE.items()}
    for instruction in w.instructions[:6]:
        submit(factories.assign(instruction, good), RELEASE)
        a = Assignment.objects.create(
            study=w.study, instruction=instruction, clinician=sloppy, purpose="gold"
        )
        submit(a, wrong if instruction.instruction_id < "G-04" else RELEASE)
    data = study_quality(w.study)
    rows = {c.email: c for c in data.clinicians}
    g = rows[good.email].quality.gold_correct
    assert (g.estimate, g.n, g.units) == (1.0, 24, 6)
    assert 0.8 < g.ci_low < 0.9 and g.ci_high == 1.0  # Wilson, 24 of 24
    s = rows[sloppy.email].quality.gold_correct
    assert s.estimate == pytest.approx(8 / 24)
    # (Position may be flagged too, by chance: the shown orders are random.)
    assert "gold" in [f.kind for f in rows[sloppy.email].quality.flags]
    assert "gold" not in [f.kind for f in rows[good.email].quality.flags]
    factories.sign_in(client, w.admin)
    page = client.get(reverse("admin_quality", args=[w.dataset.pk])).content.decode()
    assert "33%" in page and "Agrees with gold on 33% of verdicts" in page
    # Nobody is left out by a figure.
    assert "Left out of reports</span>" not in page


def test_too_few_gold_items_say_so(w):
    _gold(w, 2)
    for instruction in w.instructions[:2]:
        submit(factories.assign(instruction, w.clinicians[0]), RELEASE)
    q = {c.clinician_id: c for c in study_quality(w.study).clinicians}[w.clinicians[0].pk]
    assert not q.quality.gold_correct.known
    assert q.quality.gold_correct.note == "too few: 2 gold items, 5 needed"


def test_a_retired_item_gets_no_new_assignment(w):
    _gold(w, 1)
    item = GoldItem.objects.get()
    services.gold_item_retire(item=item, actor=w.admin)
    services.quality_policy_set(
        study=w.study, gold_rate=0.5, adjudication_tau=0.0, drift_window=10, actor=w.admin
    )
    plan = assignments_create(
        instructions=w.instructions[1:3], clinicians=w.clinicians[:1], overlap=1, actor=w.admin
    )
    assert plan.gold == 0


def test_the_rate_is_bounded(w):
    with pytest.raises(services.QualityError, match="share from 0 to 0.5"):
        services.quality_policy_set(
            study=w.study, gold_rate=0.8, adjudication_tau=0.0, drift_window=10, actor=w.admin
        )


def test_admin_pages_set_a_senior_reference(w, client):
    factories.sign_in(client, w.admin)
    instruction = w.instructions[0]
    url = reverse("admin_quality_gold_item", args=[w.study.pk, instruction.pk])
    page = client.get(url)
    assert page.status_code == 200 and instruction.question in page.content.decode()
    assert AuditEvent.objects.filter(action="instruction_viewed", instruction_id="G-00").exists()
    ids = sorted(instruction.responses.values_list("id", flat=True))
    data = {"use": "gold", "senior": w.clinicians[1].pk, "reason": "Renal function is stable."}
    for k, rid in enumerate(ids):
        data[f"rank_{rid}"] = str(k + 1)
        data[f"correct_{rid}"] = "true" if k == 0 else "false"
    assert client.post(url, data).status_code == 302
    item = GoldItem.objects.get(instruction=instruction)
    assert item.source == "senior" and item.senior == w.clinicians[1]
    # The quality page's reference box opens an instruction by its id.
    found = client.get(reverse("admin_quality", args=[w.dataset.pk]) + "?reference=G-01")
    assert found.status_code == 302 and found["Location"].endswith(
        reverse("admin_quality_gold_item", args=[w.study.pk, w.instructions[1].pk])
    )


def test_a_clinician_cannot_be_a_senior_without_access(w):
    stranger = factories.make_user("stranger@example.edu")
    instruction = w.instructions[0]
    judgements = {rid: (None, True) for rid in instruction.responses.values_list("id", flat=True)}
    with pytest.raises(services.QualityError, match="senior clinician"):
        services.gold_item_set(
            study=w.study, instruction=instruction, use="gold", source="senior",
            judgements=judgements, reason="Because.", actor=w.admin, senior=stranger,
        )  # fmt: skip


def test_an_adaptive_round_takes_no_gold(w):
    """Its instructions are reviewed with recorded probabilities: an item reviewed outside
    them would bias its weighted estimates."""
    w.study.assignment_mode = "adaptive"
    w.study.save(update_fields=["assignment_mode"])
    with pytest.raises(services.QualityError, match="assigned adaptively"):
        services.gold_items_from_release(
            study=w.study, instructions=w.instructions[:1], use="gold", actor=w.admin
        )
    assert not GoldItem.objects.exists()
