"""An S3 store that checks ``x-amz-checksum-crc32c`` on upload, as S3 does: a proxy on
loopback in front of moto's server (moto stores the header's value without checking it).

Every request is forwarded as it is; a ``PUT`` (``PutObject``, ``UploadPart``) that carries
``x-amz-checksum-crc32c`` is first checked, and a body whose CRC-32C differs is refused
the way S3 refuses it: ``400 BadDigest``, nothing stored. ``refused`` counts refusals.

``VerifyingStore(upstream, check_crc=False, rewrite_etags=True)`` is instead a store whose
ETags aren't the MD5 of the object (as S3's for SSE-KMS objects, or some S3-compatible
stores'): the ETag a ``PutObject`` or ``CompleteMultipartUpload`` answers is replaced by
one of the same shape that isn't the MD5 (an ``UploadPart``'s is kept: the
``CompleteMultipartUpload`` request lists it back), and the CRC-32C isn't checked.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import re
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

    def __init__(self, upstream: str, *, check_crc: bool = True,
                 rewrite_etags: bool = False) -> None:
        self.upstream = urlsplit(upstream)
        self.refused = 0
        self.rewritten = 0  # ETags replaced
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                sent = self.headers.get("x-amz-checksum-crc32c")
                if check_crc and self.command == "PUT" and sent is not None:
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
                    if rewrite_etags and reply.status == 200:
                        data = store._rewrite(self.command, self.path, kept, data)
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

    def _rewrite(self, method: str, path: str, headers: dict[str, str], data: bytes) -> bytes:
        """A ``PutObject``'s ETag header, a ``CompleteMultipartUpload``'s ETag element:
        replaced by the MD5 of themselves (same shape, not the object's MD5)."""
        def other(etag: str) -> str:
            self.rewritten += 1
            digest = hashlib.md5(etag.encode()).hexdigest()
            return digest + ("-" + etag.rsplit("-", 1)[1] if "-" in etag else "")

        if method == "PUT" and "uploadId=" not in path:
            for key in [k for k in headers if k.lower() == "etag"]:
                headers[key] = '"' + other(headers[key].strip('"')) + '"'
        elif method == "POST" and "uploadId=" in path:
            data = re.sub(rb"<ETag>(&quot;|\")?([0-9a-f-]+)(&quot;|\")?</ETag>",
                          lambda m: b"<ETag>&quot;" + other(m[2].decode()).encode()
                          + b"&quot;</ETag>", data)
        return data

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint_url}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
