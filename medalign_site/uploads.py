"""Uploads refused before their body is read: a limit per endpoint, by Content-Length and by an
upload handler that stores nothing of a file past its limit.

Django bounds every request body except multipart files (``DATA_UPLOAD_MAX_MEMORY_SIZE`` counts
the other fields only), and the CSRF check parses a multipart body to find its token: without
this, an anonymous POST of any size, with nothing but a CSRF cookie, is written to the temporary
directory before it is answered. Here, before anything reads a multipart body
(``UploadLimitMiddleware`` comes before the CSRF middleware), the endpoint's limit is looked
up: the view's ``upload_limit`` (``@upload_limit(setting, allowed=...)``) when the request may
upload there, else no file at all. The limit on the whole body is the file's plus Django's own
limit for the other fields. A body declared larger is answered 413 unread; a smaller one is
parsed at once, through ``LimitedUploadHandler``, which keeps nothing of a file past its limit
(and Django reads no more than Content-Length, whatever a file part claims). Behind a proxy,
its own limit comes first (nginx ``client_max_body_size``: deploy/nginx/medalign-proxy.conf).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.template.defaultfilters import filesizeformat

from medalign_site.errors import _wants_json as wants_json

V = TypeVar("V", bound=Callable[..., Any])


@dataclass(frozen=True)
class UploadLimit:
    setting: str  # the setting holding the largest file this endpoint takes, in bytes
    allowed: Callable[[HttpRequest], bool]  # who may upload here (others may send no file)

    def file_bytes(self, request: HttpRequest) -> int:
        return int(getattr(settings, self.setting)) if self.allowed(request) else 0


def upload_limit(setting: str, *, allowed: Callable[[HttpRequest], bool]) -> Callable[[V], V]:
    """Let ``view`` take files of up to ``settings.<setting>`` bytes from requests ``allowed``
    says may upload; every other endpoint and request takes no file. Read by
    ``UploadLimitMiddleware`` (Django's decorators copy the attribute onto their wrappers)."""

    def decorate(view: V) -> V:
        view.upload_limit = UploadLimit(setting, allowed)  # type: ignore[attr-defined]
        return view

    return decorate


class OversizedUpload(UploadedFile):
    """What the view gets for a file that passed its limit: its name and the size it reached,
    none of its bytes (the form says it is too large, as for any file over the limit)."""

    def __init__(self, name: str, size: int, content_type: str) -> None:
        super().__init__(io.BytesIO(), name=name, content_type=content_type, size=size)


class LimitedUploadHandler(FileUploadHandler):
    """First of the request's upload handlers: passes file data on to Django's own (memory, then
    a temporary file) until the request's files together pass ``limit`` bytes. Past it, nothing
    more reaches them: what they wrote of that file is deleted, and the view gets an
    ``OversizedUpload`` in its place (its form then says the file is too large, and the form's
    other fields are kept). The rest of the body, no larger than the endpoint's limit on form
    fields (checked before), is read and dropped, so the client gets an answer, not a reset."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.received = 0  # every file of the request
        self.file_received = 0
        self.over = False  # the current file
        self.refused = False  # any file

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.file_received = 0
        self.over = False

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        self.file_received += len(raw_data)
        if self.received > self.limit:
            self.over = self.refused = True
            return None  # the handlers after this one never see it
        return raw_data

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if not self.over:
            return None  # Django's handlers make the file
        for handler in self.request.upload_handlers if self.request else ():
            partial = getattr(handler, "file", None)
            if handler is not self and partial is not None:
                partial.close()  # a temporary file is deleted as it closes
        return OversizedUpload(
            str(self.file_name or "upload"), self.file_received, str(self.content_type or "")
        )


def _too_large(request: HttpRequest, file_bytes: int) -> HttpResponse:
    if file_bytes:
        message = (
            f"The upload is larger than {filesizeformat(file_bytes)}, the most this page takes: "
            "nothing was saved. Choose a smaller file."
        )
    else:
        message = "This page takes no upload of that size from this account: nothing was saved."
    if wants_json(request):
        return JsonResponse({"error": "too_large", "message": message}, status=413)
    return HttpResponse(
        "<!doctype html><title>Upload too large · MedAlign Review</title>"
        f"<h1>Upload too large</h1><p>{message}</p>",
        status=413,
    )


class UploadLimitMiddleware:
    """The endpoint's upload limit, applied before anything reads a multipart body."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., Any],
        view_args: Any,
        view_kwargs: Any,
    ) -> HttpResponse | None:
        if not (request.content_type or "").startswith("multipart/"):
            return None  # every other body is bounded by Django (DATA_UPLOAD_MAX_MEMORY_SIZE)
        limit: UploadLimit | None = getattr(view_func, "upload_limit", None)
        file_bytes = limit.file_bytes(request) if limit is not None else 0
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django reads nothing of a body whose length it cannot parse
        if declared > file_bytes + settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return _too_large(request, file_bytes)
        handler = LimitedUploadHandler(request, file_bytes)
        request.upload_handlers = [handler, *request.upload_handlers]
        try:
            request.POST  # noqa: B018 - parsed now, under the limit (the CSRF check would anyway)
        except RequestDataTooBig:
            return _too_large(request, file_bytes)
        except MultiPartParserError:
            return HttpResponse("The upload could not be read.", status=400)
        if handler.refused and not file_bytes:
            return _too_large(request, file_bytes)
        return None  # a file over a positive limit is the form's to refuse (OversizedUpload)
