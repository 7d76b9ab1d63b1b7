"""A real S3-protocol server on loopback for the storage tests: moto's ``ThreadedMotoServer``.

The server runs in a thread of the test process, listens on ``127.0.0.1`` on a free
port, and is reached with s3fs exactly as a user reaches S3: an ``s3://`` URL plus
``storage_options`` naming the endpoint (or the ``AWS_ENDPOINT_URL`` environment variable,
which botocore honours). Credentials are fake; moto accepts any.

``tests/conftest.py`` starts one server per test session (fixture ``s3``) and hands each
test its own bucket (fixture ``s3_url``), so tests share the server but no state.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

#: environment variables every client of the test server gets (fake credentials)
FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """moto's S3 server on ``127.0.0.1``, with helpers to make buckets and clients.

    Use it as::

        server = S3Server().start()
        url = server.bucket()                  # s3://recprep-test-...
        server.filesystem().pipe(url + "/k", b"x")
        server.stop()
    """

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint_url = ""

    def start(self) -> S3Server:
        """Start the server thread; returns ``self`` once it accepts connections."""
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        """Stop the server thread."""
        self._server.stop()

    @property
    def storage_options(self) -> dict[str, Any]:
        """What to pass as ``storage_options`` so that s3fs talks to this server."""
        return {"endpoint_url": self.endpoint_url}

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment for a subprocess: ``base`` (default ``os.environ``), the fake
        credentials, and ``AWS_ENDPOINT_URL`` pointing at this server."""
        env = dict(os.environ if base is None else base)
        env.update(FAKE_ENV)
        env["AWS_ENDPOINT_URL"] = self.endpoint_url
        return env

    def filesystem(self) -> Any:
        """A fresh ``S3FileSystem`` for this server (no instance cache, no stale listings)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def bucket(self) -> str:
        """Create a new, empty bucket; returns its URL (``s3://recprep-test-...``)."""
        import boto3

        name = f"recprep-test-{uuid.uuid4().hex[:16]}"
        client = boto3.client("s3", endpoint_url=self.endpoint_url, region_name="us-east-1")
        client.create_bucket(Bucket=name)
        return f"s3://{name}"


def clear_s3fs_cache() -> None:
    """Forget cached s3fs instances (and so their directory listings)."""
    try:
        import s3fs
    except ImportError:  # pragma: no cover - s3fs is a test dependency
        return
    s3fs.S3FileSystem.clear_instance_cache()


@contextmanager
def running_server() -> Iterator[S3Server]:
    """Start a server and stop it on exit."""
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()
