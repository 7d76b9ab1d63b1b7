"""An S3 store that checks ``x-amz-checksum-crc32c`` on upload, as S3 does: a proxy on
loopback in front of moto's server (moto stores the header's value without checking it).

Every request is forwarded as it is; a ``PUT`` (``PutObject``, ``UploadPart``) that carries
``x-amz-checksum-crc32c`` is first checked, and a body whose CRC-32C differs is refused
the way S3 refuses it: ``400 BadDigest``, nothing stored. ``refused`` counts refusals.
"""

from __future__ import annotations

import base64
import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import google_crc32c

BAD_DIGEST = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>BadDigest</Code>'
              b"<Message>The CRC32C you specified did not match the calculated checksum."
              b"</Message></Error>")
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class VerifyingStore:
    """The proxy: ``endpoint_url`` to give s3fs; ``stop()`` when done."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urlsplit(upstream)
        self.refused = 0
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                sent = self.headers.get("x-amz-checksum-crc32c")
                if self.command == "PUT" and sent is not None:
                    crc = google_crc32c.value(body).to_bytes(4, "big")
                    if base64.b64encode(crc).decode() != sent:
                        store.refused += 1
                        self._answer(400, {"Content-Type": "application/xml"}, BAD_DIGEST)
                        return
                conn = http.client.HTTPConnection(store.upstream.hostname, store.upstream.port,
                                                  timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                    kept = {k: v for k, v in reply.getheaders() if k.lower() not in _HOP}
                    length = reply.getheader("Content-Length")
                    self._answer(reply.status, kept, data,
                                 length if self.command == "HEAD" else None)
                finally:
                    conn.close()

            def _answer(self, status: int, headers: dict[str, str], data: bytes,
                        length: str | None = None) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint_url}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
