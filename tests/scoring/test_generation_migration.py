"""Migration 0008 moves generation runs onto the shared run machinery and keeps existing rows."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("scoring", "0007_generation")]
AFTER = [("scoring", "0008_generation_run_machinery")]


def test_existing_generation_runs_survive_and_in_flight_batches_get_their_queue(settings):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    dataset = old.get_model("review", "Dataset").objects.create(name="m", is_synthetic=True)
    run_model, batch_model = (
        old.get_model("scoring", "GenerationRun"),
        old.get_model("scoring", "GenerationBatch"),
    )
    common = {"dataset": dataset, "label": "m", "template_text": "{ehr}{question}"}
    local = run_model.objects.create(
        backend_spec={"kind": "transformers", "path": "/m"}, status="running", **common
    )
    endpoint = run_model.objects.create(backend_spec={"kind": "openai-http"}, **common)
    finished = run_model.objects.create(
        backend_spec={"kind": "transformers"}, status="done", **common
    )
    pending_local = batch_model.objects.create(run=local, context_length=128, item_ids=[1, 2])
    done_local = batch_model.objects.create(
        run=local, context_length=128, item_ids=[3], status="done", attempts=1
    )
    pending_endpoint = batch_model.objects.create(run=endpoint, context_length=128, item_ids=[4])
    old_done_run = batch_model.objects.create(run=finished, context_length=128, item_ids=[5])

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("scoring", "GenerationBatch")
    rows = {b.pk: b for b in new.objects.all()}
    assert rows[pending_local.pk].queue == settings.SCORING_MODEL_QUEUE
    assert rows[pending_local.pk].queued_at is not None and rows[pending_local.pk].item_ids == [
        1,
        2,
    ]
    assert rows[pending_endpoint.pk].queue == settings.SCORING_LEXICAL_QUEUE
    assert rows[done_local.pk].status == "done" and rows[done_local.pk].attempts == 1
    assert rows[done_local.pk].queue == "" and rows[old_done_run.pk].queue == ""
    assert rows[pending_local.pk].heartbeat_at is None and rows[pending_local.pk].claimed_by == ""
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect
