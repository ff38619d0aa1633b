"""Private files (training certificates) in an S3-compatible bucket (``STORAGE_URL``).

The files are DUA data: they are read only through the app's views, which check who asks and
audit the view (``review.views.accounts.admin_application_certificate``). A URL to the object,
presigned or not, would skip both, so this storage has none: ``url()`` refuses. Objects are
written without an ACL (the bucket's owner-only policy applies) and never overwritten.
"""

from typing import Any

from storages.backends.s3 import S3Storage


class PrivateS3Storage(S3Storage):  # type: ignore[misc]  # django-storages is untyped
    def url(
        self,
        name: str | None,
        parameters: Any = None,
        expire: Any = None,
        http_method: Any = None,
    ) -> str:
        raise NotImplementedError(
            "private files have no URL: they are served only by the app's own views, "
            "which check access and audit every view"
        )
