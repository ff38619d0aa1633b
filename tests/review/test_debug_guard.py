"""DEBUG is never a deployment: it signs with keys of its own, and serves only synthetic data.

DEBUG signed with a key printed in settings.py, so an institutional email was verified by a link
anyone could forge; and nothing stopped a DEBUG server (http cookies, the demo's public
accounts) from serving a cohort imported into the only database. After such an import
``make demo`` refused with no hint of what to do instead.
"""

import time

import pytest
import requests
from django.core import signing
from django.core.management import call_command
from django.core.management.base import CommandError

from review.models import Dataset
from review.services import accounts as services
from tests import factories
from tests.review.test_multiprocess_limits import _gunicorn

PUBLIC_DEVELOPMENT_KEY = "django-insecure-local-development-only"


def test_a_link_signed_with_the_public_development_key_is_refused(db):
    user = factories.make_user("forged@example.edu", full_name="Fay Forged")
    application = factories.make_application(user, institutional_email="fay@hospital.example.org")
    genuine = services.institutional_email_token(application)
    assert services.application_email_link_check(user=user, token=genuine) == application
    forged = signing.dumps(
        {"a": application.pk, "e": application.institutional_email},
        key=PUBLIC_DEVELOPMENT_KEY,
        salt=services.INSTITUTIONAL_EMAIL_SALT,
    )
    with pytest.raises(services.AccountsError, match="not valid"):
        services.application_email_link_check(user=user, token=forged)


def _refusal_hints(text: str, name: str) -> None:
    assert f"{name}, which is not synthetic" in text
    assert "DATA_DIR=" in text and "DATABASE_URL=" in text  # how to keep real data apart
    assert "DEBUG=false make run" in text
    assert f"delete_dataset {name}" in text


def test_load_demo_says_how_to_keep_real_data_in_a_database_of_its_own(db, settings):
    settings.DEBUG = True
    Dataset.objects.create(name="mimic-demo", is_synthetic=False)
    with pytest.raises(CommandError) as refused:
        call_command("load_demo", "--small", "--no-progress")
    _refusal_hints(str(refused.value), "mimic-demo")


def test_make_run_refuses_debug_beside_a_real_dataset_before_it_starts(db):
    Dataset.objects.create(name="mimic-demo", is_synthetic=False)
    with pytest.raises(CommandError) as refused:
        call_command("runlocal", "--addr", "127.0.0.1:1")
    _refusal_hints(str(refused.value), "mimic-demo")


@pytest.mark.django_db(transaction=True)
def test_a_debug_server_serves_synthetic_data_then_stops_once_real_data_arrives():
    Dataset.objects.create(name="demo", is_synthetic=True)
    with _gunicorn(DEBUG_ERROR_PAGES="false") as base:
        assert requests.get(base + "/accounts/login/", timeout=30).status_code == 200
        Dataset.objects.create(name="omop-cohort", is_synthetic=False)
        deadline = time.monotonic() + 30
        while True:
            page = requests.get(base + "/accounts/login/", timeout=30)
            if page.status_code == 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert page.status_code == 503
        _refusal_hints(page.text.replace("&#x27;", "'"), "omop-cohort")


def test_without_debug_the_wsgi_app_is_djangos_own(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    from cryptography.fernet import Fernet

    env = {
        **os.environ,
        "DEBUG": "false",
        "SECRET_KEY": "x" * 40 + "-a-long-random-enough-key-9f8e7d6c",
        "MFA_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "DATA_DIR": str(tmp_path),
    }
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", "import medalign_site.wsgi as w; print(type(w.application))"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "WSGIHandler" in result.stdout
