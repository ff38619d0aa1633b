"""Every account that can read model names or shown orders is flagged as able to unblind.

An outside attack: an admin+clinician account reviewed with ``reviewer_could_unblind`` false,
then read its own shown order and each response's model name in the Django admin. Only
researcher access was counted. Researchers (reports and exports name models), admins (the
studies pages, the Django admin) and staff (the Django admin) can all tell which model wrote
what: their reviews are flagged at page load and at submit, left out of reports by default,
and warned about on the page; ``FORBID_CLINICIAN_RESEARCHER`` forbids every such combination;
reviews made before are flagged by a data migration; ``manage.py assign`` leaves such accounts
out unless named, as the assign page marks them.
"""

import importlib
import json
import re

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from review.access import can_unblind, clear_cached_access, unblinding_roles, user_access
from review.models import AccessApplication, Assignment, Review, Role, User
from review.services.accounts import AccountsError, application_set_roles
from review.services.reviews import review_get_or_start
from tests import factories
from tests.review import review_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    dataset = review_data.make_dataset("unblind")
    patient = review_data.make_record(dataset, "P-UNBLIND", n_events=10)
    instructions = [
        review_data.make_instruction(dataset, patient, f"U-{i}", n_responses=3) for i in range(3)
    ]
    return dataset, instructions


def _edits(review: Review) -> list[dict]:
    return [
        e
        for position, handle in enumerate(review.handles)
        for e in (
            {"handle": handle, "field": "rank", "value": position + 1, "at": 1},
            {"handle": handle, "field": "is_correct", "value": True, "at": 1},
        )
    ]


def _submit(client, review: Review):
    return client.post(
        reverse("review_submit", args=[review.pk]),
        data=json.dumps({"tab": "t", "edits": _edits(review)}),
        content_type="application/json",
    )


@pytest.mark.parametrize(
    ("roles", "staff", "expected"),
    [
        ([Role.CLINICIAN], False, []),
        ([Role.CLINICIAN, Role.RESEARCHER], False, ["researcher"]),
        ([Role.CLINICIAN, Role.ADMIN], False, ["admin", "staff"]),  # approval makes admins staff
        ([Role.CLINICIAN], True, ["staff"]),
        ([Role.ADMIN, Role.CLINICIAN, Role.RESEARCHER], False, ["researcher", "admin", "staff"]),
    ],
)
def test_an_account_that_can_read_model_names_is_flagged_and_warned(
    client, world, roles, staff, expected
):
    _, instructions = world
    user = factories.make_user("u@example.edu", roles=roles)
    if staff:
        User.objects.filter(pk=user.pk).update(is_staff=True)
    user.refresh_from_db()  # approval of admin access made the row staff
    assert unblinding_roles(user) == expected
    assert can_unblind(user) == bool(expected)
    assignment = review_data.assign(instructions[0], user)
    factories.sign_in(client, user)
    html = client.get(reverse("clinician_review", args=[instructions[0].pk])).content.decode()
    review = Review.objects.get(assignment=assignment)
    assert review.reviewer_could_unblind == bool(expected)
    warning = re.search(r'data-testid="dual-role">(.*?)</div>', html, re.S)
    assert bool(warning) == bool(expected)
    if warning:
        for role in expected:
            assert role in warning.group(1)
        assert "kept out of reports" in warning.group(1)


def test_access_gained_mid_review_is_flagged_at_submit(client, world):
    _, instructions = world
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    assignment = review_data.assign(instructions[0], clinician)
    factories.sign_in(client, clinician)
    client.get(reverse("clinician_review", args=[instructions[0].pk]))
    review = Review.objects.get(assignment=assignment)
    assert not review.reviewer_could_unblind
    # Made an admin while the review is open: the Django admin now shows its shown order.
    admin = factories.make_user("boss@example.edu", roles=[Role.ADMIN])
    application = AccessApplication.objects.get(user=clinician, status="approved")
    application_set_roles(
        application=application,
        reviewer=admin,
        roles=[Role.CLINICIAN, Role.ADMIN],
        expires_on=application.expires_on,
    )
    clinician.refresh_from_db()
    factories.sign_in(client, clinician)
    response = _submit(client, review)
    assert response.status_code == 200, response.content
    review.refresh_from_db()
    assert review.status == "submitted" and review.reviewer_could_unblind


def test_an_admin_clinicians_review_is_left_out_of_reports_by_default(client, world):
    from scoring.reports.selectors import report_inputs

    dataset, instructions = world
    both = factories.make_user("both@example.edu", roles=[Role.ADMIN, Role.CLINICIAN])
    plain = factories.make_user("plain@example.edu", roles=[Role.CLINICIAN])
    reviews = {}
    for user in (both, plain):
        assignment = review_data.assign(instructions[0], user)
        factories.sign_in(client, user)
        client.get(reverse("clinician_review", args=[instructions[0].pk]))
        reviews[user.email] = Review.objects.get(assignment=assignment)
        assert _submit(client, reviews[user.email]).status_code == 200
    inputs = report_inputs(dataset=dataset)
    left_out = {r["review_id"]: r["excluded"] for r in inputs.other_reviews}
    assert reviews["both@example.edu"].pk in left_out
    assert "model names" in left_out[reviews["both@example.edu"].pk]
    assert reviews["plain@example.edu"].pk not in left_out
    kept = report_inputs(dataset=dataset, include_unblindable=True)
    assert not {r["review_id"] for r in kept.other_reviews}


# --- FORBID_CLINICIAN_RESEARCHER covers every combination -------------------------------------
@pytest.mark.parametrize("other", [Role.RESEARCHER, Role.ADMIN])
def test_the_forbid_setting_refuses_clinician_with_any_unblinding_role(settings, world, other):
    settings.FORBID_CLINICIAN_RESEARCHER = True
    applicant = factories.make_user("new@example.edu")
    with pytest.raises(AccountsError, match="FORBID_CLINICIAN_RESEARCHER"):
        factories.make_approved(applicant, [Role.CLINICIAN, other])


@pytest.mark.parametrize(
    ("roles", "staff"), [([Role.ADMIN, Role.CLINICIAN], False), ([Role.CLINICIAN], True)]
)
def test_the_forbid_setting_takes_clinician_access_from_an_account_approved_before(
    client, settings, world, roles, staff
):
    _, instructions = world
    user = factories.make_user("before@example.edu", roles=roles)
    if staff:
        User.objects.filter(pk=user.pk).update(is_staff=True)
    assignment = review_data.assign(instructions[0], user)
    settings.FORBID_CLINICIAN_RESEARCHER = True
    clear_cached_access(user)
    user.refresh_from_db()
    access = user_access(user)
    assert not access.is_clinician
    # An assignment made before is not a way round it: the page, saves and submits refuse
    # (403 naming the setting for an admin, who still reaches clinician pages; a staff
    # account left with no role at all goes to its access page).
    factories.sign_in(client, user)
    page = client.get(reverse("clinician_review", args=[instructions[0].pk]))
    assert page.status_code == (302 if staff else 403)
    if not staff:
        assert "FORBID_CLINICIAN_RESEARCHER" in page.content.decode()
    assert not Review.objects.filter(assignment=assignment).exists()
    review = review_get_or_start(assignment=assignment)
    response = _submit(client, review)
    assert response.status_code == 403
    if not staff:
        assert "FORBID_CLINICIAN_RESEARCHER" in response.json()["message"]
    review.refresh_from_db()
    assert review.status == "draft"


# --- the data migration flags reviews made before -----------------------------------------------
def test_the_data_migration_flags_existing_reviews_by_every_unblinding_account(world):
    _, instructions = world
    people = {
        "admin": factories.make_user("a@example.edu", roles=[Role.ADMIN, Role.CLINICIAN]),
        "researcher": factories.make_user("r@example.edu", roles=[Role.RESEARCHER, Role.CLINICIAN]),
        "staff": factories.make_user("s@example.edu", roles=[Role.CLINICIAN]),
        "lapsed": factories.make_user("l@example.edu", roles=[Role.CLINICIAN]),
        "plain": factories.make_user("p@example.edu", roles=[Role.CLINICIAN]),
    }
    User.objects.filter(pk=people["staff"].pk).update(is_staff=True)
    # Admin while reviewing, admin no longer: the review was made by an account that could
    # read model names, and stays flagged.
    lapsed_admin = AccessApplication.objects.get(user=people["lapsed"])
    AccessApplication.objects.filter(pk=lapsed_admin.pk).update(is_admin=True, status="revoked")
    reviews = {}
    for key, user in people.items():
        assignment = review_data.assign(instructions[0], user)
        reviews[key] = review_get_or_start(assignment=assignment)
    Review.objects.update(reviewer_could_unblind=False)  # as the old code left them
    migration = importlib.import_module("review.migrations.0022_flag_every_unblinding_reviewer")
    migration.flag_every_unblinding_reviewer(apps, None)
    flagged = {
        key for key, review in reviews.items()
        if Review.objects.get(pk=review.pk).reviewer_could_unblind
    }  # fmt: skip
    assert flagged == {"admin", "researcher", "staff", "lapsed"}


# --- assignment leaves them out, or says so ---------------------------------------------------------
def test_the_assign_command_skips_accounts_that_can_unblind_unless_named(world, capsys):
    dataset, instructions = world
    both = factories.make_user("both@example.edu", roles=[Role.ADMIN, Role.CLINICIAN])
    plain = factories.make_user("plain@example.edu", roles=[Role.CLINICIAN])
    call_command("assign", "--dataset", dataset.name, "--overlap", "1")
    out = capsys.readouterr().out
    assert set(Assignment.objects.values_list("clinician_id", flat=True)) == {plain.pk}
    assert "both@example.edu" in out and "skipped" in out and "admin" in out
    # Named on purpose: assigned, with a warning.
    call_command("assign", "--dataset", dataset.name, "--overlap", "2", "--clinicians", both.email)
    out = capsys.readouterr().out
    assert Assignment.objects.filter(clinician=both).count() == 3
    assert "warning" in out.lower() and "both@example.edu" in out and "left out of reports" in out
    # Nobody else to choose: the command says why rather than assigning the admin.
    Assignment.objects.all().delete()
    AccessApplication.objects.filter(user=plain).update(status="revoked")
    clear_cached_access(plain)
    with pytest.raises(CommandError, match="can read model names"):
        call_command("assign", "--dataset", dataset.name, "--overlap", "1")
    assert not Assignment.objects.exists()


def test_the_assign_page_marks_and_warns_about_accounts_that_can_unblind(client, world):
    dataset, instructions = world
    admin = factories.make_user("both@example.edu", roles=[Role.ADMIN, Role.CLINICIAN])
    plain = factories.make_user("plain@example.edu", roles=[Role.CLINICIAN])
    factories.sign_in(client, admin)
    html = client.get(reverse("admin_assign")).content.decode()
    assert "both@example.edu (also an admin and staff: can see model names" in html
    assert "plain@example.edu (" not in html
    html = client.post(
        reverse("admin_assign"),
        {
            "dataset": dataset.pk,
            "overlap": 2,
            "clinicians": [admin.pk, plain.pk],
            "action": "preview",
        },
    ).content.decode()
    warning = re.search(r'data-testid="assign-unblind"[^>]*>(.*?)</p>', html, re.S).group(1)
    assert "both@example.edu" in warning and "left out of reports" in warning
