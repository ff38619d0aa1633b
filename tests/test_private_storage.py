"""Private files on shared storage: with ``STORAGE_URL`` set, training certificates go to an
S3-compatible bucket (moto's server on loopback here), stored without a public ACL, never given
a URL, and streamed only by the app's audited certificate view. Without it nothing changes."""

import json
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse

from medalign_site.storage_url import storage_from_url
from review.models import AuditEvent, Role
from tests import factories, s3
from tests.test_settings import FERNET_KEY, GOOD_KEY, load_settings


@pytest.fixture(scope="module")
def endpoint():
    with s3.moto_endpoint() as url:
        yield url


@pytest.fixture
def bucket(endpoint, settings):
    """A fresh bucket, the app's private storage pointed at it."""
    name = s3.new_bucket(endpoint)
    settings.STORAGES = {
        **settings.STORAGES,
        "default": storage_from_url(s3.storage_url(endpoint, name, "private"), debug=True),
    }
    return name


def _objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    client = s3.client(endpoint)
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        for item in listed
    }


@pytest.mark.django_db
def test_a_certificate_goes_to_the_bucket_with_no_public_grant(endpoint, bucket) -> None:
    application = factories.make_application(factories.make_user("s3@example.edu"))

    objects = _objects(endpoint, bucket)
    key = f"private/{application.certificate.name}"
    assert objects == {key: factories.PDF_BYTES}
    grants = s3.client(endpoint).get_object_acl(Bucket=bucket, Key=key)["Grants"]
    grantees = {g["Grantee"].get("URI", g["Grantee"].get("ID")) for g in grants}
    assert not any("AllUsers" in str(g) or "AuthenticatedUsers" in str(g) for g in grantees)
    assert [g["Permission"] for g in grants] == ["FULL_CONTROL"]  # the owner alone


@pytest.mark.django_db
def test_a_private_file_has_no_url(bucket) -> None:
    # A presigned URL would let whoever holds it read the file without the app's checks.
    name = default_storage.save("certificates/x/y", ContentFile(b"%PDF-1.4"))

    with pytest.raises(NotImplementedError, match="served only by the app"):
        default_storage.url(name)


@pytest.mark.django_db
def test_the_admin_streams_a_certificate_from_the_bucket_and_audits_it(bucket) -> None:
    admin = factories.make_user("admin-s3@example.edu", roles=[Role.ADMIN])
    application = factories.make_application(factories.make_user("cert-s3@example.edu"))
    client = Client()
    client.force_login(admin)

    response = client.get(reverse("admin_application_certificate", args=[application.pk]))

    assert response.status_code == 200
    assert b"".join(response.streaming_content) == factories.PDF_BYTES
    viewed = AuditEvent.objects.get(
        action=AuditEvent.Action.CERTIFICATE_VIEWED, object_id=str(application.pk)
    )
    assert viewed.details["sha256"] == application.certificate_sha256


@pytest.mark.django_db
def test_a_clinician_cannot_stream_a_certificate_from_the_bucket(bucket) -> None:
    application = factories.make_application(factories.make_user("cert2-s3@example.edu"))
    client = Client()
    client.force_login(factories.make_user("nosy-s3@example.edu", roles=[Role.CLINICIAN]))

    response = client.get(reverse("admin_application_certificate", args=[application.pk]))

    assert response.status_code in (403, 404)


@pytest.mark.django_db
def test_a_certificate_missing_from_the_bucket_is_a_404(endpoint, bucket) -> None:
    admin = factories.make_user("admin2-s3@example.edu", roles=[Role.ADMIN])
    application = factories.make_application(factories.make_user("gone-s3@example.edu"))
    s3.client(endpoint).delete_object(Bucket=bucket, Key=f"private/{application.certificate.name}")
    client = Client()
    client.force_login(admin)

    response = client.get(reverse("admin_application_certificate", args=[application.pk]))

    assert response.status_code == 404


# --- settings -------------------------------------------------------------------------------------
_STORAGE = (
    "import json, medalign_site.settings as s; "
    "print(json.dumps({'default': s.STORAGES['default'], 'root': str(s.PRIVATE_STORAGE_ROOT)}))"
)
_PRODUCTION = {"SECRET_KEY": GOOD_KEY, "MFA_ENCRYPTION_KEY": FERNET_KEY}


def test_without_storage_url_private_files_stay_on_local_disk(tmp_path) -> None:
    result = load_settings(tmp_path, _STORAGE, DEBUG="true")

    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout)
    assert loaded["default"] == {"BACKEND": "django.core.files.storage.FileSystemStorage"}
    assert Path(loaded["root"]) == tmp_path / "private"


def test_storage_url_selects_the_private_bucket(tmp_path) -> None:
    result = load_settings(
        tmp_path,
        _STORAGE,
        **_PRODUCTION,
        STORAGE_URL="s3://medalign-certs/site-a?region_name=eu-west-1",
    )

    assert result.returncode == 0, result.stderr[-2000:]
    default = json.loads(result.stdout)["default"]
    assert default["BACKEND"] == "medalign_site.private_storage.PrivateS3Storage"
    options = default["OPTIONS"]
    assert options["bucket_name"] == "medalign-certs"
    assert options["location"] == "site-a"
    assert options["region_name"] == "eu-west-1"
    assert options["default_acl"] is None and options["file_overwrite"] is False
    assert "access_key" not in options  # boto3's own chain: environment, instance role


@pytest.mark.parametrize(
    "url, message",
    [
        ("s3://", "names no bucket"),
        ("gs://bucket", "s3://"),
        ("s3://bucket?colour=blue", "colour"),
        ("s3://bucket?endpoint_url=http://storage.internal:9000", "https"),
    ],
)
def test_a_bad_storage_url_stops_start_up(tmp_path, url, message) -> None:
    result = load_settings(tmp_path, _STORAGE, **_PRODUCTION, STORAGE_URL=url)

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_a_loopback_endpoint_may_use_plain_http(tmp_path) -> None:
    result = load_settings(
        tmp_path, _STORAGE, **_PRODUCTION, STORAGE_URL="s3://b?endpoint_url=http://127.0.0.1:9000"
    )

    assert result.returncode == 0, result.stderr[-2000:]
    options = json.loads(result.stdout)["default"]["OPTIONS"]
    assert options["endpoint_url"] == "http://127.0.0.1:9000"
    assert options["addressing_style"] == "path"


@pytest.mark.django_db
def test_djangos_admin_shows_an_application_without_a_link_to_the_bucket(endpoint, bucket) -> None:
    # The admin's change page lists the application's fields read-only: the certificate must
    # appear as the audited view's link, never as the storage's URL (it has none).
    admin = factories.make_user("admin3-s3@example.edu", roles=[Role.ADMIN])
    application = factories.make_application(factories.make_user("page-s3@example.edu"))
    client = Client()
    client.force_login(admin)

    response = client.get(f"/admin/review/accessapplication/{application.pk}/change/")

    assert response.status_code == 200
    page = response.content.decode()
    assert reverse("admin_application_certificate", args=[application.pk]) in page
    assert endpoint not in page and bucket not in page
