"""Shared fixtures. Test data is generated here or by review.demo: never real MedAlign data."""

import os

import pytest

# The identity providers of the SSO tests, started once per session when a test asks for them.
from tests.sso.fixtures import oidc_idp, saml_idp  # noqa: F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _force_login_passes_the_second_factor(monkeypatch):
    """``client.force_login(user)`` stands for a complete sign-in: password, then the TOTP step
    when the user has TOTP. Tests of password-only sessions use
    ``factories.sign_in(client, user, second_factor=False)``."""
    from django.test import Client

    original = Client.force_login

    def force_login(self, user, backend=None):
        original(self, user, backend)
        from allauth.mfa.models import Authenticator

        from tests.factories import record_second_factor

        if Authenticator.objects.filter(user=user, type=Authenticator.Type.TOTP).exists():
            record_second_factor(self, user)

    monkeypatch.setattr(Client, "force_login", force_login)


@pytest.fixture(autouse=True)
def _eager_celery(request):
    """Unit tests run Celery tasks inline; tests marked `worker` use a real worker process."""
    if request.node.get_closest_marker("worker"):
        yield
        return
    from medalign_site.celery import set_always_eager

    set_always_eager(True)
    yield
    set_always_eager(False)


@pytest.fixture(autouse=True)
def _fresh_process_copies():
    """Each process keeps the error tags (review.selectors.reviews) and each dataset's model
    names (review.selectors.datasets) for half a minute; a test's rolled-back rows must not
    reach the next test."""
    from review.selectors.datasets import dataset_model_names_forget
    from review.selectors.reviews import error_tags_forget

    error_tags_forget()
    dataset_model_names_forget()
    yield
    error_tags_forget()
    dataset_model_names_forget()
