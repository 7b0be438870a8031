"""An S3 server for tests: moto's server mode on loopback, with a bucket and the AWS variables
that point Sleuth (obstore) and the Temporal SDK's S3 clients (boto) at it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.helpers.ports import free_ports

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def environment(self) -> dict[str, str]:
        """The standard AWS variables a process needs to reach this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
        }

    def create_bucket(self) -> str:
        """A new empty bucket's name."""
        name = f"sleuth-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def client(self):  # type: ignore[no-untyped-def]
        env = self.environment()
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=REGION,
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1, for the whole session; stopped at its end."""
    port = free_ports()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture
def s3_artifacts(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """This test's `SLEUTH_ARTIFACTS` URL: a fresh bucket on the session's S3 server."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{s3_server.create_bucket()}/artifacts"
    monkeypatch.setenv("SLEUTH_ARTIFACTS", url)
    return url
