"""``STORAGE_URL``: where private files (training certificates) live when several hosts serve.

    s3://BUCKET[/PREFIX][?endpoint_url=https://...&region_name=...&addressing_style=path|virtual
                          &signature_version=s3v4&ca_bundle=/etc/ssl/certs/storage-ca.pem
                          &server_side_encryption=AES256|aws:kms]
    s3://ACCESS_KEY:SECRET_KEY@BUCKET/PREFIX?...      (keys in the URL, URL-encoded)

Without keys in the URL, boto3 finds them itself: ``AWS_ACCESS_KEY_ID`` and
``AWS_SECRET_ACCESS_KEY`` in the environment, a profile, or the instance's role. Any S3-compatible
store works (AWS S3, MinIO, Ceph RGW, NetApp StorageGRID): ``endpoint_url`` names it.

Read by settings.py before Django is set up, so nothing here imports Django but its exception.
"""

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_OPTIONS = {
    "endpoint_url",
    "region_name",
    "addressing_style",
    "signature_version",
    "ca_bundle",
    "server_side_encryption",
}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def storage_from_url(url: str, *, debug: bool) -> dict[str, Any]:
    """The ``STORAGES["default"]`` entry for ``url``; ImproperlyConfigured naming what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ImproperlyConfigured(
            "STORAGE_URL must be an s3:// URL (any S3-compatible store), e.g. "
            "s3://medalign-private?endpoint_url=https://objects.hospital.internal"
        )
    if not parts.hostname:
        raise ImproperlyConfigured("STORAGE_URL names no bucket: s3://BUCKET[/PREFIX]")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(query) - _OPTIONS)
    if unknown:
        raise ImproperlyConfigured(
            f"STORAGE_URL has unknown options {unknown}: use {sorted(_OPTIONS)}"
        )
    values = {key: query[key][-1] for key in query}
    options: dict[str, Any] = {
        # Django's storage for the private folder refuses nothing the bucket would not: every
        # object is private to the bucket's owner (no ACL is sent: the bucket's own setting,
        # "block public access" and owner-enforced ownership, decides), names are never reused.
        "bucket_name": parts.hostname,
        "location": parts.path.strip("/"),
        "default_acl": None,
        "file_overwrite": False,
        "querystring_auth": True,
        "signature_version": values.get("signature_version", "s3v4"),
    }
    if parts.username:
        options["access_key"] = unquote(parts.username)
        options["secret_key"] = unquote(parts.password or "")
    endpoint = values.get("endpoint_url")
    if endpoint:
        endpoint_parts = urlsplit(endpoint)
        # DUA data crosses the network only encrypted: plain HTTP is for a store on this host.
        if (
            endpoint_parts.scheme != "https"
            and endpoint_parts.hostname not in _LOOPBACK
            and not debug
        ):
            raise ImproperlyConfigured(
                "STORAGE_URL's endpoint_url must use https for a store on another host "
                f"(got {endpoint_parts.scheme}://{endpoint_parts.hostname})"
            )
        options["endpoint_url"] = endpoint
        # Stores other than AWS are usually reached by path (a bucket is not a host name).
        options["addressing_style"] = values.get("addressing_style", "path")
    elif "addressing_style" in values:
        options["addressing_style"] = values["addressing_style"]
    if values.get("addressing_style", "path") not in {"path", "virtual", "auto"}:
        raise ImproperlyConfigured("STORAGE_URL's addressing_style must be path or virtual")
    if "region_name" in values:
        options["region_name"] = values["region_name"]
    if "ca_bundle" in values:
        options["verify"] = values["ca_bundle"]
    if "server_side_encryption" in values:
        options["object_parameters"] = {"ServerSideEncryption": values["server_side_encryption"]}
    return {"BACKEND": "medalign_site.private_storage.PrivateS3Storage", "OPTIONS": options}
