"""An S3-compatible endpoint on loopback for tests and drills: moto's server mode.

``moto_endpoint()`` runs moto's server in a thread of this process (it serves real HTTP: the
storage under test reaches it with boto3 like any S3 endpoint); the drills start the
``moto_server`` program instead, so that several processes share one endpoint. Nothing here
reaches beyond 127.0.0.1.
"""

import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

ACCESS_KEY = "medalign-test"
SECRET_KEY = "medalign-test-secret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def moto_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    )


def new_bucket(endpoint: str, prefix: str = "medalign-test") -> str:
    name = f"{prefix}-{secrets.token_hex(4)}"
    client(endpoint).create_bucket(Bucket=name)
    return name


def storage_url(endpoint: str, bucket: str, location: str = "") -> str:
    path = f"/{location}" if location else ""
    return f"s3://{ACCESS_KEY}:{SECRET_KEY}@{bucket}{path}?endpoint_url={endpoint}&region_name={REGION}"
