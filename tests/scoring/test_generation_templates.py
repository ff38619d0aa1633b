"""No record inference through generation runs (scoring.generation.runs.template_check).

Researchers wrote prompt templates freely and saw, per instruction, the completion tokens and
finish reason of each run: a template such as "if the record mentions HIV, write 200 words,
else stop" reads a record through those numbers. On data that is not synthetic a template now
runs only once an admin (not the one who asked) approved it; HELM's template needs nothing, nor
synthetic data; every run's template is in its audit event.
"""

import pytest
from django.test import Client
from django.urls import reverse

from review.models import AuditEvent, Role
from scoring.generation import runs as generation
from scoring.llm.backends import GenerationParams
from scoring.llm.prompts import HELM_TEMPLATE
from scoring.models import GenerationRun, GenerationTemplate
from tests import factories
from tests.scoring.generation_data import make_generation_dataset

pytestmark = pytest.mark.django_db

PROBE = (
    "{ehr}\nIf the record above mentions HIV, write a long essay about it; otherwise reply "
    "with one word.\nQ: {question}\nA:"
)


@pytest.fixture
def local_model(tiny_lm, settings) -> str:
    settings.GENERATION_MODEL_DIR = tiny_lm.parent
    return f"local:{tiny_lm.name}"


@pytest.fixture
def real_dataset(db):
    dataset = make_generation_dataset(n_instructions=2)
    dataset.is_synthetic = False
    dataset.save(update_fields=["is_synthetic"])
    return dataset


def _create(dataset, model, template, actor):  # noqa: ANN001, ANN202
    return generation.generation_run_create(
        dataset=dataset,
        model=model,
        context_lengths=[256],
        template_text=template,
        template_name="probe",
        params=GenerationParams(max_new_tokens=4),
        actor=actor,
        enqueue=False,
    )


def test_a_researchers_own_template_on_real_data_waits_for_an_admin(real_dataset, local_model):
    researcher = factories.make_user("probe@example.edu", roles=[Role.RESEARCHER])
    with pytest.raises(generation.TemplateNeedsApproval, match="not synthetic"):
        _create(real_dataset, local_model, PROBE, researcher)
    assert not GenerationRun.objects.exists()
    asked = GenerationTemplate.objects.get()  # the request outlives the refused run
    assert (asked.text, asked.requested_by, asked.approved_at) == (PROBE, researcher, None)
    with pytest.raises(generation.TemplateNeedsApproval):
        _create(real_dataset, local_model, PROBE, researcher)  # asking again changes nothing
    assert GenerationTemplate.objects.count() == 1

    admin = factories.make_user("template-admin@example.edu", roles=[Role.ADMIN])
    generation.generation_template_approve(template=asked, admin=admin)
    run = _create(real_dataset, local_model, PROBE, researcher)
    event = AuditEvent.objects.get(action=AuditEvent.Action.SCORING_STARTED, object_id=str(run.pk))
    assert event.details["template_text"] == PROBE
    assert event.details["template_sha256"] == asked.sha256
    approval = AuditEvent.objects.get(action=AuditEvent.Action.ADMIN_CHANGED, actor=admin)
    assert approval.details["text"] == PROBE


def test_helms_template_and_synthetic_data_need_no_approval(real_dataset, local_model):
    researcher = factories.make_user("helm@example.edu", roles=[Role.RESEARCHER])
    run = _create(real_dataset, local_model, HELM_TEMPLATE, researcher)
    assert run.template_version.startswith("helm-medalign@")
    synthetic = make_generation_dataset(name="synthetic-gen", n_instructions=1)
    _create(synthetic, local_model, PROBE, researcher)
    assert not GenerationTemplate.objects.exists()
    events = AuditEvent.objects.filter(action=AuditEvent.Action.SCORING_STARTED)
    assert {e.details["template_text"] for e in events} == {HELM_TEMPLATE, PROBE}


def test_the_admin_who_asked_cannot_approve_their_own_template(real_dataset, local_model):
    both = factories.make_user("both@example.edu", roles=[Role.RESEARCHER, Role.ADMIN])
    with pytest.raises(generation.TemplateNeedsApproval):
        _create(real_dataset, local_model, PROBE, both)
    asked = GenerationTemplate.objects.get()
    with pytest.raises(generation.GenerationRunError, match="another admin"):
        generation.generation_template_approve(template=asked, admin=both)
    asked.refresh_from_db()
    assert asked.approved_at is None


def test_the_page_says_why_and_an_admin_approves_in_the_django_admin(real_dataset, local_model):
    researcher = factories.make_user("page-probe@example.edu", roles=[Role.RESEARCHER])
    client = Client()
    client.force_login(researcher)
    response = client.post(
        reverse("generation_runs"),
        {
            "dataset": real_dataset.pk,
            "model": local_model,
            "context_lengths": "256",
            "policy": "recent",
            "template": PROBE,
            "template_label": "probe",
            "label": "",
            "max_new_tokens": 4,
            "temperature": 0,
            "top_p": 1,
            "seed": 0,
        },
        follow=True,
    )
    assert "An admin has been asked to approve it" in response.content.decode()
    assert not GenerationRun.objects.exists()
    admin = factories.make_user("django-admin@example.edu", roles=[Role.ADMIN])
    admin_client = Client()
    admin_client.force_login(admin)
    asked = GenerationTemplate.objects.get()
    page = admin_client.get(reverse("admin:scoring_generationtemplate_change", args=[asked.pk]))
    assert page.status_code == 200 and "write a long essay" in page.content.decode()
    admin_client.post(
        reverse("admin:scoring_generationtemplate_changelist"),
        {"action": "approve", "_selected_action": [asked.pk]},
    )
    asked.refresh_from_db()
    assert asked.approved_by == admin


def test_the_operators_command_needs_no_approval(real_dataset, local_model, tmp_path):
    from django.core.management import call_command

    template = tmp_path / "probe.txt"
    template.write_text(PROBE)
    call_command(
        "generate",
        "--dataset",
        real_dataset.name,
        "--model",
        local_model,
        "--context-lengths",
        "256",
        "--template",
        str(template),
        "--max-new-tokens",
        "2",
        "--no-wait",
    )
    assert GenerationRun.objects.count() == 1
    assert not GenerationTemplate.objects.exists()
