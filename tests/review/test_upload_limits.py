"""Oversized uploads are refused before their body is read (medalign_site/uploads.py).

An anonymous 400 MB multipart POST, with nothing but a CSRF cookie, wrote 302 MB to the server's
temporary directory before its answer: the CSRF check parses a multipart body to find its token,
Django bounds the form's fields but not its files, and the 5 MB certificate limit was checked
only once the whole file had arrived. The rubric JSONL upload had no limit at all.

The first two tests run gunicorn on the test database with its own TMPDIR, send a real
streaming request over a socket, and measure what reaches that folder while they send.
"""

import contextlib
import re
import select
import socket
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from review.models import Role
from tests import factories
from tests.review import review_data
from tests.review.test_multiprocess_limits import _gunicorn, _password_step

MB = 1024 * 1024
BOUNDARY = "----medalign-upload-test"


@pytest.fixture
def _hashers_the_server_knows(settings):
    from django.conf import global_settings

    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS


class TempWatch:
    """The largest total size of Django's upload files (``*.upload*``) seen in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _now(self) -> int:
        total = 0
        for path in self.folder.glob("*.upload*"):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._now())
            time.sleep(0.01)

    def __enter__(self) -> "TempWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._now())

    def left(self) -> list[str]:
        return [p.name for p in self.folder.glob("*.upload*")]


def _multipart_head(token: str, declared_file_bytes: int) -> tuple[bytes, bytes, int]:
    """(the body's start, its end, the whole body's length for a file of that size)."""
    head = (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
        f"{token}\r\n"
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="certificate"; filename="certificate.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    return head, tail, len(head) + declared_file_bytes + len(tail)


def _stream_post(
    base: str, path: str, cookies: dict[str, str], token: str, file_bytes: int, *, send_at_most: int
) -> tuple[bytes, int]:
    """POST a multipart body declaring a file of ``file_bytes``, over a raw socket: the headers,
    then (unless the server has answered within 10 s) the file 1 MB at a time, up to
    ``send_at_most`` bytes of it. Returns (the answer's first bytes, file bytes sent)."""
    url = urlsplit(base)
    head, tail, length = _multipart_head(token, file_bytes)
    cookie = "; ".join(f"{k}={v}" for k, v in cookies.items())
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nCookie: {cookie}\r\n"
        f"Referer: {base}{path}\r\nContent-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {length}\r\nConnection: close\r\n\r\n"
    ).encode() + head
    sock = socket.create_connection((url.hostname, url.port), timeout=60)
    sent = 0
    answer = b""
    try:
        sock.sendall(request)
        readable, _, _ = select.select([sock], [], [], 10)
        chunk = b"%PDF-" + b"x" * (MB - 5)
        while not readable and sent < min(send_at_most, file_bytes):
            piece = chunk[: min(MB, file_bytes - sent)]
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
            readable, _, _ = select.select([sock], [], [], 0)
        if sent == file_bytes:
            sock.sendall(tail)
        deadline = time.monotonic() + 60
        while len(answer) < 65536 and time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 1)
            if not readable:
                continue
            try:
                data = sock.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            answer += data
    finally:
        sock.close()
    return answer, sent


@pytest.mark.django_db(transaction=True)
def test_an_anonymous_400_mb_upload_is_refused_before_any_of_it_is_read(tmp_path):
    uploads = tmp_path / "tmp"
    uploads.mkdir()
    with _gunicorn(TMPDIR=str(uploads)) as base:
        session = requests.Session()
        page = session.get(base + "/accounts/login/", timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        with TempWatch(uploads) as watch:
            answer, sent = _stream_post(
                base,
                reverse("application_apply"),
                session.cookies.get_dict(),
                token,
                400 * MB,
                send_at_most=50 * MB,
            )
    assert watch.peak == 0, f"{watch.peak:,} bytes reached the temporary directory"
    assert sent == 0, f"the server waited for {sent:,} bytes of the file before answering"
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"nothing was saved" in answer


@pytest.mark.django_db(transaction=True)
def test_a_certificate_over_its_limit_is_kept_no_further_than_the_limit(
    tmp_path, _hashers_the_server_knows
):
    # Under the whole body's limit (the file's plus the form fields'), so it is read: kept only
    # as far as the file's limit, then deleted; the form says why, and nothing is left behind.
    uploads = tmp_path / "tmp"
    uploads.mkdir()
    factories.active_dua()
    user = factories.make_user("uploader@example.edu", totp=False)
    with _gunicorn(TMPDIR=str(uploads), MAX_UPLOAD_BYTES=str(2 * MB)) as base:
        session, status, _ = _password_step(base, user.email, factories.PASSWORD)
        assert status == 302
        page = session.get(base + reverse("application_apply"), timeout=30)
        assert page.status_code in (200, 302)
        token = session.cookies["csrftoken"]
        with TempWatch(uploads) as watch:
            answer, sent = _stream_post(
                base,
                reverse("application_apply"),
                session.cookies.get_dict(),
                token,
                3 * MB,
                send_at_most=3 * MB,
            )
        time.sleep(0.5)
        left = watch.left()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b"The file is larger than 2.0" in answer  # the form again, the other fields kept
    assert watch.peak <= 2 * MB + 64 * 1024, f"{watch.peak:,} bytes written for a 2 MB limit"
    assert left == []


# --- in process: which endpoint takes what, from whom ----------------------------------------------
@pytest.fixture
def dataset(db):
    return review_data.make_dataset()


def _rubric_upload(client: Client, dataset, content: bytes):  # noqa: ANN001, ANN202
    return client.post(
        reverse("admin_rubrics", args=[dataset.pk]),
        {"action": "upload", "file": SimpleUploadedFile("rubrics.jsonl", content)},
    )


def test_the_rubric_upload_has_a_limit(dataset, settings):
    settings.RUBRIC_UPLOAD_MAX_BYTES = 50_000
    admin = factories.make_user("rubric-admin@example.edu", roles=[Role.ADMIN])
    client = Client()
    client.force_login(admin)
    too_big = _rubric_upload(client, dataset, b'{"prompt_id": "x"}\n' * 10_000)
    assert too_big.status_code == 200
    assert too_big.context["upload_form"].errors["file"] == [
        "The file is larger than 48.8\xa0KB, the most this page takes (RUBRIC_UPLOAD_MAX_BYTES)."
    ]
    # Past the limit nothing was kept: the form was handed the name and the size only.
    kept = too_big.context["upload_form"].files["file"]
    assert type(kept).__name__ == "OversizedUpload" and kept.size > 50_000
    small = _rubric_upload(client, dataset, b"")
    assert small.status_code in (200, 302)


def test_only_an_admin_may_send_the_rubric_page_a_large_file(dataset, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    clinician = factories.make_user("not-admin@example.edu", roles=[Role.CLINICIAN])
    client = Client()
    client.force_login(clinician)
    refused = _rubric_upload(client, dataset, b"x" * 200_000)
    assert refused.status_code == 413
    assert "takes no upload of that size from this account" in refused.content.decode()


def test_a_page_that_takes_no_file_refuses_one(db):
    admin = factories.make_user("dua-admin@example.edu", roles=[Role.ADMIN])
    client = Client()
    client.force_login(admin)
    response = client.post(
        reverse("admin_dua_publish"),
        {"text": "x", "file": SimpleUploadedFile("big.bin", b"x" * 100_000)},
    )
    assert response.status_code == 413


def test_a_json_endpoint_says_so_in_json(db):
    clinician = factories.make_user("json-upload@example.edu", roles=[Role.CLINICIAN])
    client = Client()
    client.force_login(clinician)
    response = client.post(
        reverse("review_save", args=[1]),
        {"file": SimpleUploadedFile("big.bin", b"x" * 100_000)},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 413
    assert response.json()["error"] == "too_large"
