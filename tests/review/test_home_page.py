"""What a new admin reads first: the home page points to the study work (progress, each
dataset's studies, assigning), the certificate opens beside the decision, and a server that
prints its emails says so where an applicant waits for the link."""

import re

import pytest
from django.urls import reverse

from review.models import Dataset, Role
from tests import factories

pytestmark = pytest.mark.django_db

CONSOLE = "django.core.mail.backends.console.EmailBackend"


def _main(response) -> str:
    return response.content.decode().split("<main", 1)[1].split("</main>", 1)[0]


def test_the_admin_home_points_to_progress_studies_and_assign(client):
    demo = Dataset.objects.create(name="demo", is_synthetic=True)
    other = Dataset.objects.create(name="cohort-b", is_synthetic=True)
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    factories.sign_in(client, admin)
    page = _main(client.get(reverse("home")))
    assert f'href="{reverse("progress_index")}"' in page
    assert f'href="{reverse("admin_assign")}"' in page
    for dataset in (demo, other):
        assert f'href="{reverse("admin_studies", args=[dataset.pk])}"' in page
        assert dataset.name in page


def test_a_clinician_home_has_no_admin_links(client):
    Dataset.objects.create(name="demo", is_synthetic=True)
    user = factories.make_user("both@example.edu", roles=[Role.CLINICIAN, Role.ADMIN])
    clinician = factories.make_user("c@example.edu", roles=[Role.CLINICIAN])
    factories.sign_in(client, user)
    assert reverse("admin_assign") in _main(client.get(reverse("home")))
    factories.sign_in(client, clinician)
    response = client.get(reverse("home"))
    assert response.status_code == 302  # a clinician alone goes straight to the queue


def test_the_certificate_opens_in_a_new_tab(client):
    admin = factories.make_user("admin@example.edu", roles=[Role.ADMIN])
    applicant = factories.make_user("applicant@example.edu")
    application = factories.make_application(applicant)
    factories.sign_in(client, admin)
    page = _main(client.get(reverse("admin_application_detail", args=[application.pk])))
    url = reverse("admin_application_certificate", args=[application.pk])
    link = re.search(rf'<a [^>]*href="{re.escape(url)}"[^>]*>', page).group(0)
    assert 'target="_blank"' in link
    assert 'rel="noopener"' in link
    assert "opens in a new tab" in page


@pytest.mark.parametrize("name", ["account_signup"])
def test_a_server_that_prints_emails_says_the_link_is_in_its_output(client, settings, name):
    settings.EMAIL_BACKEND = CONSOLE
    page = _main(client.get(reverse(name)))
    assert "server's output" in page
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    assert "server's output" not in _main(client.get(reverse(name)))


def test_the_verification_page_says_where_the_printed_link_is(client, settings):
    settings.EMAIL_BACKEND = CONSOLE
    factories.active_dua()
    response = client.post(
        reverse("account_signup"),
        {
            "email": "new@hospital.example.edu",
            "password1": "Violet-Harbor-Lantern-42",
            "password2": "Violet-Harbor-Lantern-42",
        },
        follow=True,
    )
    assert "server's output" in _main(response)
