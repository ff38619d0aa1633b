"""Adaptive assignment: the design is recorded with the study and in every report, each wave's
probabilities are kept with a floor, drawn instructions keep the overlap, and the stopping rule
tells the admin when the ranking is settled."""

from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from review.models import Assignment, AuditEvent, SamplingDraw, Study
from review.selectors.adaptive import adaptive_state
from review.selectors.studies import response_set_summary
from review.services.adaptive import adaptive_assign_wave, study_set_adaptive
from review.services.studies import StudyError
from tests import factories
from tests.review.adaptive_data import make_adaptive_world, submit_all

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_adaptive_world()


def test_uniform_stays_the_default(world):
    _, study, *_ = world
    assert study.assignment_mode == Study.AssignmentMode.UNIFORM
    with pytest.raises(StudyError):
        adaptive_assign_wave(study=study, clinicians=[], actor=None)


def test_the_design_is_recorded_with_the_study_and_in_every_report(world):
    _, study, config, _, admin = world
    study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, predictor="Test jury", seed=7
    )
    study.refresh_from_db()
    assert study.assignment_mode == "adaptive"
    assert study.assignment_params["min_probability"] == 0.1
    assert study.assignment_params["seed"] == 7
    summary = response_set_summary(study).as_dict()
    assert summary["assignment_mode"] == "adaptive"
    assert summary["assignment_params"]["predictor_config_id"] == config.pk
    assert AuditEvent.objects.filter(
        action=AuditEvent.Action.STUDY_CHANGED, details__change="adaptive design"
    ).exists()


def test_a_study_with_assignments_cannot_turn_adaptive(world):
    _, study, config, clinicians, admin = world
    factories.assign(study.responses.first().instruction, clinicians[0], study=study)
    with pytest.raises(StudyError, match="already has assignments"):
        study_set_adaptive(study=study, actor=admin, predictor_config_id=config.pk)


def test_waves_record_every_probability_keep_the_floor_and_the_overlap(world):
    _, study, config, clinicians, admin = world
    study = study_set_adaptive(
        study=study,
        actor=admin,
        predictor_config_id=config.pk,
        min_probability=0.2,
        budget=0.5,
        waves=2,
        seed=3,
    )
    result, state = adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    draws = list(SamplingDraw.objects.filter(study=study, wave=1))
    assert len(draws) == result.walked == 10
    assert all(d.probability == pytest.approx(0.5) for d in draws)  # wave 1: uniform
    drawn = {d.instruction_id for d in draws if d.drawn}
    assert all(d.drawn == (d.draw < d.probability) for d in draws)
    per_instruction = {
        i: Assignment.objects.filter(study=study, instruction_id=i).count() for i in drawn
    }
    assert set(per_instruction.values()) == {2}  # the overlap, for agreement statistics
    assert Assignment.objects.filter(study=study).count() == 2 * len(drawn)

    submit_all(study)
    state = adaptive_state(study)
    assert state.waves_complete == 1 and state.shares
    probabilities = [r.probability for r in state.plan]
    assert min(probabilities) >= 0.2 - 1e-9
    assert sum(probabilities) == pytest.approx(0.5 * 10, abs=1e-6)
    result, _ = adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    assert SamplingDraw.objects.filter(study=study, wave=2).count() == 10
    with pytest.raises(StudyError, match="Every wave|settled"):
        submit_all(study)
        adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)


def test_the_stopping_message_says_settled_and_the_reviews_saved(db):
    # 60 instructions, half in the first wave: the rule needs MIN_REVIEWED_TO_STOP (30)
    # reviewed instructions before it may say "settled".
    _, study, config, clinicians, admin = make_adaptive_world(n_instructions=60)
    study = study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, budget=1.0, waves=2, seed=1
    )
    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    submit_all(study)
    state = adaptive_state(study)
    assert state.settled, state.message
    assert state.reviews_assigned == 60 and state.reviews_uniform == 120
    assert "The ranking is settled at 95%; 60 reviews saved against uniform" in state.message
    with pytest.raises(StudyError, match="settled"):
        adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)


def test_the_assign_command_makes_the_study_adaptive_and_draws_a_wave(world):
    dataset, study, config, _, _ = world
    out = StringIO()
    call_command(
        "assign",
        "--dataset",
        dataset.name,
        "--mode",
        "adaptive",
        "--predictor",
        str(config.pk),
        "--waves",
        "4",
        "--seed",
        "5",
        stdout=out,
    )
    study.refresh_from_db()
    assert study.assignment_mode == "adaptive"
    assert "Wave 1:" in out.getvalue()
    assert SamplingDraw.objects.filter(study=study).count() == 5
    out = StringIO()
    call_command("assign", "--dataset", dataset.name, "--study", "1", "--dry-run", stdout=out)
    assert "Next: wave 2" in out.getvalue()
    # The next wave is drawn from the last one's reviews: not before they are in (the final
    # walk-through found wave 2 offered at once, its probabilities still uniform).
    with pytest.raises(CommandError, match="not all submitted"):
        call_command("assign", "--dataset", dataset.name, stdout=StringIO())
    assert not SamplingDraw.objects.filter(study=study, wave=2).exists()
    submit_all(study)
    # An adaptive study draws its next wave without --mode.
    call_command("assign", "--dataset", dataset.name, stdout=StringIO())
    assert SamplingDraw.objects.filter(study=study, wave=2).count() == 5
    with pytest.raises(CommandError, match="between 1 and"):
        call_command("assign", "--dataset", dataset.name, "--overlap", "0", stdout=StringIO())


def test_the_studies_page_shows_the_form_then_the_next_wave(client, world):
    dataset, study, config, clinicians, admin = world
    factories.sign_in(client, admin)
    url = reverse("admin_studies", args=[dataset.pk])
    html = client.get(url).content.decode()
    assert "Assign round 1 adaptively" in html and "Test jury" in html
    response = client.post(
        reverse("admin_study_adaptive_design", args=[study.pk]),
        {"predictor": config.pk, "min_probability": 0.1, "budget": 0.4, "waves": 4, "overlap": 2},
    )
    assert response.status_code == 302
    html = client.get(url).content.decode()
    assert "Next assignments: wave 1 of 4" in html
    assert 'data-testid="stopping-message"' in html
    client.post(reverse("admin_study_adaptive_wave", args=[study.pk]))
    assert SamplingDraw.objects.filter(study=study, wave=1).count() == 5


def test_an_adaptive_study_is_never_assigned_outside_its_waves(world):
    dataset, study, config, clinicians, admin = world
    study_set_adaptive(study=study, actor=admin, predictor_config_id=config.pk)
    from review.services.assignments import AssignmentError, assignments_create

    with pytest.raises(AssignmentError, match="assigned adaptively"):
        assignments_create(
            instructions=dataset.instructions.all(), clinicians=clinicians, overlap=2, actor=admin
        )
    with pytest.raises(CommandError, match="is adaptive"):
        call_command("assign", "--dataset", dataset.name, "--mode", "uniform", stdout=StringIO())
    assert not Assignment.objects.filter(study=study).exists()


def test_a_report_of_an_adaptive_round_names_its_design(client, world):
    from scoring.reports import compute
    from scoring.reports import services as reports

    dataset, study, config, clinicians, admin = world
    study = study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, budget=1.0, waves=2, seed=2
    )
    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    submit_all(study)
    report = reports.report_create(
        dataset=dataset, actor=admin, n_resamples=100, seed=1, enqueue=False
    )
    report = compute.report_compute(report_id=report.pk)
    assert report.status == "done", report.error
    design = report.provenance["response_set"]
    assert design["assignment_mode"] == "adaptive"
    assert design["assignment_params"]["min_probability"] == 0.1
    factories.sign_in(client, admin)
    html = client.get(reverse("scoring_report_detail", args=[report.pk])).content.decode()
    assert "over-represent the instructions chosen for doubt" in html


def test_djangos_admin_shows_the_draws_read_only(client, world):
    _, study, config, clinicians, admin = world
    study = study_set_adaptive(study=study, actor=admin, predictor_config_id=config.pk, seed=4)
    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    admin.refresh_from_db()
    client.force_login(admin)
    changelist = client.get(reverse("admin:review_samplingdraw_changelist"))
    assert changelist.status_code == 200 and b"AD-" in changelist.content
    assert client.get(reverse("admin:review_samplingdraw_add")).status_code == 403


def test_a_wave_never_goes_to_an_account_that_can_see_model_names_or_to_a_second_look(world):
    # Final walk-through findings: wave 1 gave the admin (also a researcher, whose reviews
    # reports leave out) one review of each drawn instruction, and gave clinicians instructions
    # they already ranked in the round this one was copied from (the same responses).
    from review.models import Assignment, Role
    from review.services.adaptive import adaptive_assign_wave, study_set_adaptive
    from review.services.studies import study_create
    from tests import factories

    dataset, first, config, clinicians, admin = world
    both = factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.RESEARCHER])
    second = study_create(dataset=dataset, name="Round 2", actor=admin, copy_responses_from=first)
    instruction = dataset.instructions.order_by("pk").first()
    veteran = clinicians[0]
    factories.assign(instruction, veteran, study=first)
    study_set_adaptive(
        study=second,
        actor=admin,
        predictor_config_id=config.pk,
        min_probability=1.0,
        budget=1.0,
        waves=1,
    )
    adaptive_assign_wave(study=second, clinicians=[*clinicians, both], actor=admin)
    in_wave = Assignment.objects.filter(study=second)
    assert in_wave.exists()
    assert not in_wave.filter(clinician=both).exists()
    assert not in_wave.filter(clinician=veteran, instruction=instruction).exists()


def test_a_wave_of_a_handful_never_settles_the_ranking(world):
    # The same design on 20 instructions: one wave of 10 reviewed is too few to stop on.
    _, study, config, clinicians, admin = world
    study = study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, budget=1.0, waves=2, seed=1
    )
    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    submit_all(study)
    assert not adaptive_state(study).settled


def test_the_weighted_estimates_count_patients_not_instructions(db):
    """Instructions about one patient share its record's quirks: the studies page's intervals
    take each patient as one draw (an outside statistical review found them treating every
    instruction as independent). Instructions with no linked record stand alone."""
    from review.models import Instruction
    from review.selectors.adaptive import AdaptiveDesign, study_arrays
    from tests.review import review_data

    dataset, study, config, clinicians, admin = make_adaptive_world(n_instructions=60)
    study = study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, budget=1.0, waves=2, seed=1
    )
    instructions = list(Instruction.objects.filter(dataset=dataset).order_by("pk"))
    records = [review_data.make_record(dataset, f"P-{k}", n_events=1) for k in range(12)]
    for i, instruction in enumerate(instructions[:-1]):
        instruction.patient = records[i % 12]
        instruction.save(update_fields=["patient"])
    loner = instructions[-1]
    Instruction.objects.filter(pk=loner.pk).update(patient=None)
    arrays = study_arrays(study, AdaptiveDesign.of(study))
    by_pk = {i.pk: i for i in Instruction.objects.filter(dataset=dataset)}
    for pk, patient in zip(arrays.instruction_ids, arrays.patients, strict=True):
        expected = by_pk[pk].patient_id
        assert patient == (expected if expected is not None else -pk)
    assert len(set(arrays.patients.tolist())) == 13

    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    submit_all(study)
    clustered = adaptive_state(study)
    Instruction.objects.filter(dataset=dataset).update(patient=None)
    alone = adaptive_state(study)
    assert clustered.shares and alone.shares
    widths = [[r.upper - r.lower for r in sorted(state.shares, key=lambda r: r.model)]
              for state in (clustered, alone)]  # fmt: skip
    assert not np.allclose(*widths)


def test_a_study_about_one_patient_never_settles(db):
    """Sixty reviewed instructions about one patient are one draw: before the patient floor the
    clustered variance was zero up to rounding, and the rule declared the ranking settled."""
    from review.models import Instruction

    dataset, study, config, clinicians, admin = make_adaptive_world(n_instructions=60)
    study = study_set_adaptive(
        study=study, actor=admin, predictor_config_id=config.pk, budget=1.0, waves=2, seed=1
    )
    adaptive_assign_wave(study=study, clinicians=clinicians, actor=admin)
    submit_all(study)
    assert adaptive_state(study).settled  # 30 patients
    one = Instruction.objects.filter(dataset=dataset).first().patient
    Instruction.objects.filter(dataset=dataset).update(patient=one)
    state = adaptive_state(study)
    assert not state.settled
    assert state.message.startswith("Not settled")
