"""moto's S3 server answering range GETs in time proportional to the range, as a real
store does.

moto 5 builds every GET's body from the whole object (``FakeKey.value`` reads and copies
it) and only then cuts out the range asked for. A GET of 8 MiB of a 20 MB object costs
moto a 20 MB copy, and sixteen such GETs at once keep a core busy for a quarter of a
second before the first byte leaves: a cost of the emulator that no real store has, and
one that falls on readers that fetch ranges (recprep, mosaic streaming) but not on those
that GET whole objects. :func:`patch` makes a GET that carries a ``Range`` header
hand moto's range handling a stand-in for the body that reads only the bytes asked for
(under the key's lock, from its buffer). Everything else — the status, the headers,
``Content-Range``, 416 for a range past the end, conditional requests — is moto's own
code, unchanged.

Used by the storage benchmark's server process::

    python -m tests.support.motoranges -H 127.0.0.1 -p 5000

(the arguments are ``moto.server``'s).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class _RangeReader:
    """A stand-in for an object's bytes that reads only the slice taken of it."""

    def __init__(self, key: Any) -> None:
        self._key = key

    def __len__(self) -> int:
        return int(self._key.size)

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        with self._key.lock:
            buffer = self._key._value_buffer
            buffer.seek(start)
            return bytes(buffer.read(max(0, stop - start)))

    def __iter__(self) -> Iterator[bytes]:  # a body moto sends whole (a range it ignores)
        for start in range(0, len(self), 1 << 20):
            yield self[start:start + (1 << 20)]


_local = threading.local()


def patch() -> None:
    """Make moto's S3 GETs with a ``Range`` header read only the range (see above)."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    original = S3Response.get_object
    if getattr(original, "_reads_ranges", False):
        return
    value = FakeKey.value

    def lazy_value(key: Any) -> Any:
        if getattr(_local, "ranged", False):
            return _RangeReader(key)
        return value.fget(key)

    def get_object(self: Any) -> Any:
        ranged = self.headers.get("range", "")
        _local.ranged = (ranged.startswith("bytes=") and "," not in ranged
                         and "partNumber" not in self.querystring)
        try:
            return original(self)
        finally:
            _local.ranged = False

    get_object._reads_ranges = True  # type: ignore[attr-defined]
    FakeKey.value = property(lazy_value, value.fset)  # type: ignore[method-assign,assignment]
    S3Response.get_object = get_object  # type: ignore[method-assign]


def serve(module: str = "tests.support.motoranges") -> tuple[subprocess.Popen, str]:
    """``python -m module`` (this one, or ``moto.server`` itself) on a free port of
    127.0.0.1, in a child process; returns it and its endpoint once it accepts
    connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)],
                            cwd=Path(__file__).resolve().parents[2],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{module} did not start")


def main() -> None:
    """``moto.server``'s command line, with :func:`patch` applied."""
    patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
