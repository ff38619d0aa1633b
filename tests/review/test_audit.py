"""The audit trail: sign-in events, append-only storage, the admin's log page and CSV export."""

import csv
import io
from datetime import timedelta

import pytest
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from review.models import AuditEvent, Role
from review.services import audit
from review.services.audit import audit_record
from tests import factories

pytestmark = pytest.mark.django_db
Action = AuditEvent.Action


@pytest.fixture
def admin(db):
    return factories.make_user("admin@example.edu", roles=[Role.ADMIN])


def test_sign_in_and_sign_out_are_audited(client):
    user = factories.make_user("r@example.edu", totp=False)
    response = client.post(
        reverse("account_login"),
        {"login": "r@example.edu", "password": factories.PASSWORD},
        REMOTE_ADDR="10.0.0.7",
        HTTP_USER_AGENT="pytest-browser",
    )
    assert response.status_code == 302
    login = AuditEvent.objects.get(action=Action.LOGIN)
    assert login.actor == user and login.ip_address == "10.0.0.7"
    assert login.user_agent == "pytest-browser"
    client.post(reverse("account_logout"))
    logout = AuditEvent.objects.get(action=Action.LOGOUT)
    assert logout.actor == user


def test_sign_in_with_totp_is_audited_after_the_second_step(client):
    user = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    client.post(reverse("account_login"), {"login": user.email, "password": factories.PASSWORD})
    assert not AuditEvent.objects.filter(action=Action.LOGIN).exists()
    response = client.post(reverse("mfa_authenticate"), {"code": factories.totp_code_fresh()})
    assert response.status_code == 302
    assert AuditEvent.objects.get(action=Action.LOGIN).actor == user


def test_a_failed_sign_in_records_the_attempted_email(client):
    factories.make_user("r@example.edu", totp=False)
    response = client.post(
        reverse("account_login"),
        {"login": "r@example.edu", "password": "wrong-password"},
        REMOTE_ADDR="10.0.0.9",
    )
    assert response.status_code == 200
    failed = AuditEvent.objects.get(action=Action.LOGIN_FAILED)
    assert failed.actor is None
    assert failed.actor_email == "r@example.edu"
    assert failed.ip_address == "10.0.0.9"
    assert "password" not in str(failed.details).lower()


def test_the_audit_trail_cannot_be_updated_or_deleted_through_the_orm():
    event = audit_record(action=Action.EXPORT, actor_email="x@example.edu")
    event.actor_email = "changed@example.edu"
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()
    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(pk=event.pk).update(actor_email="y")
    with pytest.raises(PermissionError):
        AuditEvent.objects.all().delete()
    event.refresh_from_db()
    assert event.actor_email == "x@example.edu"


def test_the_audit_trail_is_read_only_in_djangos_admin_even_for_superusers(client, admin):
    admin.refresh_from_db()
    assert admin.is_superuser
    event = audit_record(action=Action.EXPORT, actor_email="x@example.edu")
    client.force_login(admin)
    change_url = reverse("admin:review_auditevent_change", args=[event.pk])
    assert client.get(change_url).status_code == 200  # viewable
    posted = client.post(change_url, {"actor_email": "tampered@example.edu", "action": "export"})
    assert posted.status_code == 403
    assert client.get(reverse("admin:review_auditevent_add")).status_code == 403
    delete_url = reverse("admin:review_auditevent_delete", args=[event.pk])
    assert client.post(delete_url, {"post": "yes"}).status_code == 403
    changelist = client.get(reverse("admin:review_auditevent_changelist"))
    assert changelist.status_code == 200
    assert b"delete_selected" not in changelist.content
    event.refresh_from_db()
    assert event.actor_email == "x@example.edu"


def test_the_audit_log_page_filters(client, admin):
    audit_record(action=Action.RECORD_VIEWED, actor_email="a@example.edu", person_id="P1")
    audit_record(action=Action.RECORD_VIEWED, actor_email="b@example.edu", person_id="P2")
    audit_record(action=Action.EXPORT, actor_email="a@example.edu")
    client.force_login(admin)

    def rows(**params):
        response = client.get(reverse("audit_log"), params)
        assert response.status_code == 200
        return [(e.actor_email, e.action, e.person_id) for e in response.context["page"]]

    assert rows(person_id="P1") == [("a@example.edu", "record_viewed", "P1")]
    assert {r[0] for r in rows(action="record_viewed")} == {"a@example.edu", "b@example.edu"}
    assert {r[1] for r in rows(actor="a@example")} == {"record_viewed", "export"}
    tomorrow = (timezone.localdate() + timedelta(days=1)).isoformat()
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    assert rows(date_from=tomorrow) == []
    assert len(rows(date_from=yesterday, date_to=tomorrow, action="record_viewed")) == 2


def test_the_csv_export_is_audited_and_neutralises_formulas(client, admin):
    audit_record(action=Action.RECORD_VIEWED, actor_email="=HYPERLINK(1)", person_id="P1")
    audit_record(action=Action.RECORD_VIEWED, actor_email="b@example.edu", person_id="P2")
    client.force_login(admin)
    response = client.get(reverse("audit_log_csv"), {"person_id": "P1"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:3] == ["created_at", "actor_email", "action"]
    assert len(rows) == 2
    assert rows[1][1] == "'=HYPERLINK(1)"
    exported = AuditEvent.objects.get(action=Action.AUDIT_EXPORTED)
    assert exported.actor == admin and exported.details == {"person_id": "P1"}


def test_the_audit_log_is_for_admins_only(client):
    client.force_login(factories.make_user("c@example.edu", roles=[Role.CLINICIAN]))
    # Not for their role: a 403 that says so (the page is no object, nothing to hide).
    assert client.get(reverse("audit_log")).status_code == 403
    assert client.get(reverse("audit_log_csv")).status_code == 403
    assert not AuditEvent.objects.filter(action=Action.AUDIT_EXPORTED).exists()


def test_the_audit_log_page_is_a_constant_number_of_queries(
    client, admin, django_assert_max_num_queries
):
    for i in range(30):
        audit_record(action=Action.RECORD_VIEWED, actor=admin, person_id=f"P{i}")
    client.force_login(admin)
    # The first page of a session fills the shared cache (session, access evaluation); pinned is
    # the steady state, which must not grow with the number of events.
    assert client.get(reverse("audit_log")).status_code == 200
    with django_assert_max_num_queries(12):
        assert client.get(reverse("audit_log")).status_code == 200


# --- every page of a record read is audited -----------------------------------------------------
@pytest.fixture
def record_for(db):
    import json as _json

    from tests.review import review_data

    def make(clinician):  # noqa: ANN001, ANN202
        dataset = review_data.make_dataset()
        patient = review_data.make_record(dataset, "P-PAGES", n_events=400)
        instruction = review_data.make_instruction(dataset, patient, "I-PAGES")
        review_data.assign(instruction, clinician)
        return instruction, _json

    return make


def test_every_page_of_the_timeline_is_audited_invented_cursors_included(client, record_for):
    clinician = factories.make_user("pages@example.edu", roles=[Role.CLINICIAN])
    instruction, _ = record_for(clinician)
    client.force_login(clinician)
    url = reverse("record_events", args=[instruction.pk])
    pages, events = 0, 0
    data = client.get(url).json()
    pages, events = pages + 1, events + data["count"]
    while data["next"] and pages < 4:
        data = client.get(url, {"cursor": data["next"]}).json()
        pages, events = pages + 1, events + data["count"]
    # The reported path: a cursor the server never handed out, straight into the record.
    invented = client.get(url, {"cursor": "t99999999999999999.0"}).json()
    pages, events = pages + 1, events + invented["count"]
    assert invented["count"] > 0
    reads = AuditEvent.objects.filter(action=Action.RECORD_VIEWED, actor=clinician)
    assert reads.count() == pages
    assert sum(e.details["events"] for e in reads) == events
    assert {e.person_id for e in reads} == {"P-PAGES"}
    assert {e.details["page"] for e in reads} == {"first", "next"}


def test_every_page_of_a_search_is_audited_without_its_terms(client, record_for):
    clinician = factories.make_user("search-pages@example.edu", roles=[Role.CLINICIAN])
    instruction, json = record_for(clinician)
    client.force_login(clinician)
    url = reverse("record_search", args=[instruction.pk])

    def search(body):  # noqa: ANN001, ANN202
        return client.post(url, json.dumps(body), content_type="application/json").json()

    first = search({"q": "creatinine"})
    assert first["next"], "the fixture's record needs more than one page of matches"
    second = search({"q": "creatinine", "cursor": first["next"]})
    invented = search({"q": "note", "cursor": "t99999999999999999.0"})
    searches = AuditEvent.objects.filter(action=Action.RECORD_SEARCHED, actor=clinician)
    assert searches.count() == 3
    assert sorted(e.details["results"] for e in searches) == sorted(
        [first["count"], second["count"], invented["count"]]
    )
    assert all("creatinine" not in str(e.details) for e in searches)


# --- the client's address: X-Forwarded-For believed only from trusted proxies --------------------
def test_the_audit_trail_ignores_x_forwarded_for_unless_a_proxy_is_trusted(world, client):
    client.post(
        reverse("account_login"),
        {"login": "nobody@example.edu", "password": "wrong"},
        HTTP_X_FORWARDED_FOR="203.0.113.9",
    )
    assert AuditEvent.objects.get(action=Action.LOGIN_FAILED).ip_address == "127.0.0.1"


def test_behind_one_trusted_proxy_the_audit_trail_records_the_client(world, client, settings):
    settings.ALLAUTH_TRUSTED_PROXY_COUNT = 1
    client.post(
        reverse("account_login"),
        {"login": "nobody@example.edu", "password": "wrong"},
        HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.9",  # spoofed first hop, then the client
    )
    assert AuditEvent.objects.get(action=Action.LOGIN_FAILED).ip_address == "203.0.113.9"


def test_events_of_one_request_record_its_origin_read_once(world, monkeypatch):
    # The review page writes two events per request: the proxy settings and the headers are
    # read for the first, and the second records the same address and browser.
    calls = []

    def counting(request):
        calls.append(request)
        return "192.0.2.7"

    monkeypatch.setattr(audit, "get_client_ip", counting)
    before = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    request = RequestFactory().get("/", HTTP_USER_AGENT="Firefox/140")
    request.user = world.clinician
    audit.audit_record_many(
        actions=[Action.INSTRUCTION_VIEWED, Action.RECORD_VIEWED],
        request=request,
        obj=world.clinician,
    )
    audit.audit_record(action=Action.RECORD_VIEWED, request=request)
    events = AuditEvent.objects.filter(id__gt=before).order_by("id")
    assert [(e.ip_address, e.user_agent) for e in events] == [("192.0.2.7", "Firefox/140")] * 3
    assert len(calls) == 1
    # Another request reads its own.
    other = RequestFactory().get("/", HTTP_USER_AGENT="Safari/19")
    other.user = world.clinician
    audit.audit_record(action=Action.RECORD_VIEWED, request=other)
    assert AuditEvent.objects.latest("id").user_agent == "Safari/19" and len(calls) == 2
