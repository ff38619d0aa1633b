"""Who is simulated is a field of the account, set by the demo and backfilled by migration."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("review", "0022_flag_every_unblinding_reviewer")]
AFTER = [("review", "0023_user_is_simulated")]


def test_the_demos_existing_simulated_accounts_are_marked_and_no_one_else():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps.get_model("review", "User")
    for email in (
        "simulated-1@demo.medalign.local",
        "simulated-12@demo.medalign.local",
        "clinician1@demo.medalign.local",
        "simulated-1@hospital.example.org",
    ):
        old.objects.create(email=email, pseudonym=email[:16])

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("review", "User")
    marked = set(new.objects.filter(is_simulated=True).values_list("email", flat=True))
    assert marked == {"simulated-1@demo.medalign.local", "simulated-12@demo.medalign.local"}
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())  # the schema the other tests expect
