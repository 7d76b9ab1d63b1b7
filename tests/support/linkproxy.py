"""A TCP proxy that behaves like a network link, in front of an S3-protocol server.

moto's server on loopback answers in well under a millisecond with no bandwidth limit, so
it hides what makes object stores slow. :class:`LinkProxy` sits between a client and it:

* each direction of each connection is a pipe: bytes that arrive at ``t`` leave at
  ``t + delay``, no faster than ``conn_rate``; all downloads together share ``link_rate``
  (and all uploads, in their own direction). Rates are bytes per second, ``None`` for no
  limit. The schedule is a token bucket kept while busy and reset only after an idle gap,
  and bytes move in parts of 64 KiB, so asyncio's timer granularity costs little rate;
* it speaks enough HTTP/1.1 to see each request and response (heads; ``Content-Length``
  or chunked bodies; keep-alive; ``Expect: 100-continue``), so it counts requests by kind
  and injects faults (:class:`Faults`): a connection cut mid-body, one request held for
  seconds, a real S3 ``503 SlowDown``, a ``429``, a store that never answers.

In a test, it runs its loop in a thread::

    with LinkProxy(s3.endpoint_url, delay=0.025, conn_rate=10e6, link_rate=80e6) as proxy:
        fs = s3fs.S3FileSystem(endpoint_url=proxy.endpoint_url)
        proxy.faults.update(slowdown={"p": 0.1, "seed": 1})
        ...
        proxy.stats()["requests"]["GET"]

As a process (so it doesn't share a benchmark's GIL), it prints its endpoint on the first
line of stdout and runs until SIGTERM/SIGINT::

    python -m tests.support.linkproxy --upstream http://127.0.0.1:5000 --delay 0.025 \\
        --conn-rate 10e6 --link-rate 80e6 --port 0

and answers, itself and at once, ``GET /__proxy__/stats`` (the counters as JSON),
``POST /__proxy__/reset`` (zero them, answering the counts they had),
``POST /__proxy__/faults`` (a JSON object of fault specs, as :meth:`Faults.update` takes)
and ``DELETE /__proxy__/faults``. Standard library only, so any interpreter can run it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import sys
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

PART = 64 * 1024  #: bytes forwarded per scheduling step
IDLE = 0.02  #: a gap (s) after which the link's schedule restarts from "now"
#: a gap (s) within one message after which a connection's schedule restarts from "now"
#: (a new message always restarts it: the time between messages is not credit)
STALL = 0.25
HEAD_LIMIT = 1 << 20
LIST_PARAMS = {"list-type", "prefix", "delimiter", "continuation-token", "marker",
               "max-keys", "start-after", "encoding-type", "fetch-owner"}
KINDS = ("GET", "HEAD", "PUT", "POST", "DELETE", "LIST")
_STOP = object()  # a pipe's last entry
FAULTS = ("drop_mid_body", "delay_one", "slowdown", "throttle_429", "blackhole")


@dataclass
class Request:
    """What the proxy saw of one request: its kind (one of ``KINDS``), whether it asked for
    a byte range, its method, target and headers (names lower-cased)."""

    kind: str
    ranged: bool
    method: str
    target: str
    headers: dict[str, str]


@dataclass
class Fault:
    """One fault and when it fires.

    ``kinds`` (request kinds it applies to; empty: all) and ``ranged`` (``True``: only
    range GETs, ``False``: only the others, ``None``: both) select the requests; of those,
    it fires on every ``every``-th, or with probability ``p`` (``random.Random(seed)``), at
    most ``times`` times (``None``: no limit). ``after`` is the body bytes let through
    before a cut (``drop_mid_body``), ``seconds`` how long a request is held
    (``delay_one``, which fires once unless ``times`` says otherwise).
    """

    kinds: tuple[str, ...] = ()
    ranged: bool | None = None
    every: int = 1
    p: float | None = None
    seed: int = 0
    times: int | None = None
    after: int = 0
    seconds: float = 0.0
    seen: int = field(default=0, repr=False)
    fired: int = field(default=0, repr=False)
    rng: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        self.kinds = tuple(k.upper() for k in self.kinds)
        self.rng = random.Random(self.seed)

    def fires(self, request: Request) -> bool:
        """Whether this fault fires on ``request`` (and count it if so)."""
        if self.kinds and request.kind not in self.kinds:
            return False
        if self.ranged is not None and request.ranged != self.ranged:
            return False
        if self.times is not None and self.fired >= self.times:
            return False
        self.seen += 1
        hit = self.rng.random() < self.p if self.p is not None else self.seen % self.every == 0
        self.fired += hit
        return hit


_DEFAULTS: dict[str, dict[str, Any]] = {
    "drop_mid_body": {"kinds": ("GET",)},
    "delay_one": {"times": 1},
}


class Faults:
    """The faults a :class:`LinkProxy` injects, settable from any thread while it runs.

    ``update(name=spec, ...)`` sets faults: ``spec`` is a :class:`Fault`, a dict of its
    fields, ``True`` (defaults) or ``None``/``False`` (off). Names: ``drop_mid_body``
    (cut the connection after ``after`` bytes of a GET response's body; GET only by
    default), ``delay_one`` (hold the next matching request ``seconds`` before it goes on),
    ``slowdown`` (answer S3's ``503 SlowDown`` instead of forwarding), ``throttle_429``
    (answer ``429 TooManyRequests``), ``blackhole`` (read requests, never answer).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[str, Fault] = {}
        self.counts = dict.fromkeys(FAULTS, 0)

    def update(self, specs: dict[str, Any] | None = None, **more: Any) -> None:
        """Set (or with ``None``/``False`` clear) the named faults; the others stay."""
        with self._lock:
            for name, spec in {**(specs or {}), **more}.items():
                if name not in FAULTS:
                    raise ValueError(f"unknown fault {name!r}: expected one of {FAULTS}")
                if spec is None or spec is False:
                    self._active.pop(name, None)
                    continue
                if not isinstance(spec, Fault):
                    fields = {} if spec is True else dict(spec)
                    spec = Fault(**{**_DEFAULTS.get(name, {}), **fields})
                self._active[name] = spec

    def clear(self) -> None:
        """Turn every fault off (counts stay)."""
        with self._lock:
            self._active.clear()

    def active(self) -> list[str]:
        """The names of the faults that are on."""
        with self._lock:
            return sorted(self._active)

    def check(self, name: str, request: Request) -> Fault | None:
        """The fault ``name`` if it fires on ``request`` (counted), else ``None``."""
        with self._lock:
            fault = self._active.get(name)
            if fault is None or not fault.fires(request):
                return None
            self.counts[name] += 1
            return fault


class Link:
    """One direction of the shared link: a rate schedule all connections draw from."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.free = 0.0

    def reserve(self, now: float, size: int) -> float:
        """Book ``size`` bytes; returns when their last byte has gone."""
        if not self.rate:
            return now
        start = self.free if now - self.free < IDLE else now
        self.free = start + size / self.rate
        return self.free


class Pipe:
    """One direction of one client connection: bytes leave ``delay`` after they are sent,
    paced by the connection's rate and the shared :class:`Link`. :meth:`send` returns once
    the bytes are "on the wire" (backpressure: about rate x delay bytes are held). The far
    end is ``writer``, which may change between messages (the server's side of a client
    connection is a new TCP connection whenever the server closed the last one)."""

    def __init__(self, writer: asyncio.StreamWriter | None, link: Link, rate: float | None,
                 delay: float, on_sent: Any) -> None:
        self.writer, self.link, self.rate, self.delay = writer, link, rate, delay
        self.on_sent = on_sent
        self.free = 0.0
        self.broken = False
        self.queue: asyncio.Queue[tuple[float, Any, bytes | None]] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._deliver())

    async def send(self, data: bytes, first: bool = False) -> None:
        """Put ``data`` on the wire (raises ``ConnectionResetError`` if the far end went);
        ``first``: it starts a message (a head), so the schedule restarts."""
        loop = asyncio.get_running_loop()
        if first:
            self.free = 0.0
        for offset in range(0, len(data), PART):
            if self.broken:
                raise ConnectionResetError("the far end of the pipe has gone")
            part = data[offset:offset + PART]
            now = loop.time()
            done = now
            if self.rate:
                start = self.free if now - self.free < STALL else now
                done = start + len(part) / self.rate
            done = max(done, self.link.reserve(now, len(part)))
            self.free = done
            self.queue.put_nowait((done + self.delay, self.writer, part))
            if done > now:
                await asyncio.sleep(done - now)

    def close(self, final: bool = True) -> None:
        """Close the far end once everything sent before has been delivered; ``final``:
        and stop this pipe."""
        now = asyncio.get_running_loop().time()
        self.queue.put_nowait((now + self.delay, self.writer, None))
        if final:
            self.queue.put_nowait((now + self.delay, _STOP, None))

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            release, writer, data = await self.queue.get()
            if release > loop.time():
                await asyncio.sleep(release - loop.time())
            if writer is _STOP:
                return
            if data is None:
                if writer is not None:
                    writer.close()
                continue
            try:
                writer.write(data)
                self.on_sent(len(data))
                await writer.drain()
            except (ConnectionError, OSError):
                self.broken = writer is self.writer


def _drop_header(head: bytes, name: bytes) -> bytes:
    """``head`` without its header ``name`` (lower case)."""
    lines = head.split(b"\r\n")
    return b"\r\n".join(x for x in lines if x.split(b":", 1)[0].strip().lower() != name)


def _headers(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def classify(method: str, target: str, headers: dict[str, str]) -> Request:
    """The :class:`Request` for a request line's method and target (path-style S3)."""
    split = urlsplit(target)
    query = {name for name, _ in parse_qsl(split.query, keep_blank_values=True)}
    no_key = "/" not in split.path.strip("/")
    kind = method if method in KINDS else "GET"
    if method == "GET" and no_key and split.path.strip("/") and query <= LIST_PARAMS:
        kind = "LIST"
    return Request(kind, method == "GET" and "range" in headers, method, target, headers)


def s3_error(status: int, code: str, message: str, *, body: bool = True) -> bytes:
    """A whole HTTP response as S3 sends an error: XML body, request id headers."""
    reason = {503: "Slow Down", 429: "Too Many Requests"}.get(status, "Error")
    request_id = uuid.uuid4().hex[:16].upper()
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
           f"<Message>{message}</Message><RequestId>{request_id}</RequestId>"
           f"<HostId>linkproxy</HostId></Error>").encode()
    head = (f"HTTP/1.1 {status} {reason}\r\nx-amz-request-id: {request_id}\r\n"
            f"x-amz-id-2: linkproxy\r\nContent-Type: application/xml\r\n"
            f"Content-Length: {len(xml)}\r\nServer: AmazonS3\r\n\r\n").encode()
    return head + (xml if body else b"")


async def _body(reader: asyncio.StreamReader, headers: dict[str, str], sink: Any,
                limit: int | None = None) -> bool:
    """Move one message body (Content-Length or chunked) from ``reader`` to ``await
    sink(bytes)`` in parts; with ``limit``, stop after that many body bytes and return
    False (the message was cut)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";")[0], 16)
            await sink(line)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    await sink(trailer)
                await sink(b"\r\n")
                return True
            await _exact(reader, size + 2, sink)
    remaining = int(headers.get("content-length", "0") or 0)
    if limit is not None and remaining > 0:
        await _exact(reader, min(limit, remaining - 1), sink)
        return False
    await _exact(reader, remaining, sink)
    return True


async def _exact(reader: asyncio.StreamReader, size: int, sink: Any) -> None:
    while size > 0:
        part = await reader.readexactly(min(size, PART))
        size -= len(part)
        await sink(part)


class LinkProxy:
    """An emulated network link in front of an S3-protocol server (see the module doc).

    ``LinkProxy(upstream_url, delay=..., conn_rate=..., link_rate=...)``: ``delay`` is the
    one-way delay in seconds (each direction), ``conn_rate`` the bytes/s of one TCP
    connection, ``link_rate`` the bytes/s all connections share per direction (``None``:
    no limit). ``start()`` (or ``with``) runs it in a thread; ``endpoint_url`` and
    ``storage_options`` say how to reach it; ``faults`` sets faults; ``stats()``.
    """

    def __init__(self, upstream_url: str, *, delay: float = 0.025,
                 conn_rate: float | None = 10e6, link_rate: float | None = 80e6,
                 port: int = 0, handshake_rtts: float = 1.0) -> None:
        split = urlsplit(upstream_url)
        self.upstream = (split.hostname or "127.0.0.1", split.port or 80)
        self.delay, self.conn_rate, self.link_rate = delay, conn_rate, link_rate
        self.port, self.handshake_rtts = port, handshake_rtts
        self.faults = Faults()
        self.endpoint_url = ""
        self._down, self._up = Link(link_rate), Link(link_rate)
        self._lock = threading.Lock()
        self._counts: dict[str, Any] = {}
        self.reset_stats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    # -- counters ------------------------------------------------------------------------

    def reset_stats(self) -> None:
        """Zero the counters (fault counts too)."""
        with self._lock:
            self._counts = {"requests": dict.fromkeys(KINDS, 0), "range_gets": 0,
                            "bytes_down": 0, "bytes_up": 0, "connections": 0}
            self.faults.counts = dict.fromkeys(FAULTS, 0)

    def stats(self) -> dict[str, Any]:
        """A snapshot: ``requests`` by kind (GET, HEAD, PUT, POST, DELETE, LIST: a GET of
        a bucket's listing), ``range_gets``, ``bytes_down``/``bytes_up`` (all bytes the
        proxy delivered to clients / to the server), ``connections`` accepted, ``faults``
        (how often each fired)."""
        with self._lock:
            counts = {**self._counts, "requests": dict(self._counts["requests"])}
        counts["faults"] = dict(self.faults.counts)
        return counts

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counts[name] += amount

    def _count_request(self, request: Request) -> None:
        with self._lock:
            self._counts["requests"][request.kind] += 1
            self._counts["range_gets"] += request.ranged

    @property
    def storage_options(self) -> dict[str, Any]:
        """What to pass as s3fs ``storage_options`` to go through the proxy."""
        return {"endpoint_url": self.endpoint_url}

    # -- running -------------------------------------------------------------------------

    async def serve(self) -> None:
        """Listen (on ``127.0.0.1:port``) and set ``endpoint_url``; returns once listening."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port,
                                                  limit=HEAD_LIMIT)
        port = self._server.sockets[0].getsockname()[1]
        self.endpoint_url = f"http://127.0.0.1:{port}"

    def start(self) -> LinkProxy:
        """Run the proxy's loop in a daemon thread; returns ``self`` once it accepts."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.serve())
            except BaseException as error:  # noqa: BLE001 - handed to start()
                failure.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="linkproxy", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the listener and every connection; stop the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = None

    async def aclose(self) -> None:
        """Close the listener and cancel every connection (in the proxy's loop)."""
        self._closing = True
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> LinkProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one connection ------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._count("connections")
        down = Pipe(writer, self._down, self.conn_rate, self.delay,
                    lambda n: self._count("bytes_down", n))
        up = Pipe(None, self._up, self.conn_rate, self.delay,
                  lambda n: self._count("bytes_up", n))
        upstream: list[Any] = [None, None]  # the server's side: reader, writer
        try:
            await asyncio.sleep(2 * self.delay * self.handshake_rtts)  # TCP's handshake
            while await self._exchange(reader, down, up, upstream):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                OSError, ValueError, IndexError):
            pass
        except asyncio.CancelledError:
            if not self._closing:
                raise
        finally:
            up.close()
            down.close()
            for pipe in (up, down):
                if self._closing:
                    pipe.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                    await asyncio.wait_for(pipe.task, timeout=30)
            self._tasks.discard(task)

    async def _exchange(self, reader: asyncio.StreamReader, down: Pipe, up: Pipe,
                        upstream: list[Any]) -> bool:
        """One request and its answer; False when the client connection is over."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        line, headers = _headers(head)
        method, target, _ = line.split(" ", 2)
        if target.startswith("/__proxy__/"):
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            down.writer.write(self._control(method, target, body))  # type: ignore[union-attr]
            return True
        request = classify(method, target, headers)
        self._count_request(request)
        answer = self._answer(request)
        if answer is not None:
            await self._refuse(reader, down, request, answer)
            return answer != b"" and "100-continue" not in headers.get("expect", "").lower()
        held = self.faults.check("delay_one", request)
        if held is not None:
            await asyncio.sleep(held.seconds)
        if upstream[1] is None or upstream[1].is_closing() or upstream[0].at_eof():
            upstream[:] = await asyncio.open_connection(*self.upstream, limit=HEAD_LIMIT)
            up.writer, up.broken = upstream[1], False
        if "expect" in headers:  # answer "100 Continue" here, so the server never waits
            await down.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            head = _drop_header(head, b"expect")
        await up.send(head, first=True)
        await _body(reader, headers, up.send)
        return await self._respond(upstream, down, up, request)

    async def _respond(self, upstream: list[Any], down: Pipe, up: Pipe,
                       request: Request) -> bool:
        """Move the server's response to the client (cut mid-body where asked); the
        client's connection stays open unless the response can't be framed or was cut."""
        ureader = upstream[0]
        while True:
            head = await ureader.readuntil(b"\r\n\r\n")
            line, headers = _headers(head)
            status = int(line.split(" ", 2)[1])
            if status >= 200:
                break
        closes = "close" in headers.get("connection", "").lower()
        if closes:  # the server closes; the client's connection stays (as S3's would)
            head = _drop_header(head, b"connection")
        await down.send(head, first=True)
        whole = True
        if request.method == "HEAD" or status in (204, 304):
            pass
        elif "content-length" not in headers and "chunked" not in headers.get(
                "transfer-encoding", ""):
            while part := await ureader.read(PART):
                await down.send(part)
            whole = False  # framed by the close: the client's connection ends too
        else:
            cut = None
            if status in (200, 206) and int(headers.get("content-length", "0") or 0):
                fault = self.faults.check("drop_mid_body", request)
                cut = None if fault is None else fault.after
            whole = await _body(ureader, headers, down.send, cut)
        if closes or not whole:
            up.close(final=False)
            upstream[:] = [None, None]  # the next request connects anew
        return whole

    def _answer(self, request: Request) -> bytes | None:
        """What to answer instead of forwarding: an error response, ``b""`` (never
        answer), or ``None`` (forward)."""
        if self.faults.check("blackhole", request):
            return b""
        body = request.method != "HEAD"
        if self.faults.check("slowdown", request):
            return s3_error(503, "SlowDown", "Please reduce your request rate.", body=body)
        if self.faults.check("throttle_429", request):
            return s3_error(429, "TooManyRequests", "Please reduce your request rate.",
                            body=body)
        return None

    async def _refuse(self, reader: asyncio.StreamReader, down: Pipe, request: Request,
                      answer: bytes) -> None:
        if answer == b"":  # a black hole: swallow everything, answer nothing
            while await reader.read(PART):
                pass
            return
        if "100-continue" in request.headers.get("expect", "").lower():
            answer = answer.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
        else:
            async def discard(_: bytes) -> None:
                return None
            await _body(reader, request.headers, discard)
        await down.send(answer)

    def _control(self, method: str, target: str, body: bytes) -> bytes:
        """Answer a ``/__proxy__/`` request (the process form's control)."""
        path = urlsplit(target).path
        status, before = "200 OK", self.stats()
        if path == "/__proxy__/faults" and method == "POST":
            try:
                self.faults.update(json.loads(body or b"{}"))
            except (ValueError, TypeError) as error:
                status, body = "400 Bad Request", str(error).encode()
        elif path == "/__proxy__/faults" and method == "DELETE":
            self.faults.clear()
        elif path == "/__proxy__/reset" and method == "POST":
            self.reset_stats()
        elif not (path == "/__proxy__/stats" and method == "GET"):
            status = "404 Not Found"
        after = before if path == "/__proxy__/reset" else self.stats()
        payload = json.dumps(after).encode() if status == "200 OK" else body
        return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


def control(endpoint_url: str, action: str = "stats", faults: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """Talk to a proxy running as a process: ``action`` is ``"stats"``, ``"reset"``,
    ``"faults"`` (set ``faults``) or ``"clear"``; returns its counters after the action
    (for ``"reset"``: as they were just before it, so a reset reads and zeroes at once)."""
    import urllib.request

    method, path = {"stats": ("GET", "stats"), "reset": ("POST", "reset"),
                    "faults": ("POST", "faults"), "clear": ("DELETE", "faults")}[action]
    data = json.dumps(faults or {}).encode() if action == "faults" else None
    request = urllib.request.Request(f"{endpoint_url}/__proxy__/{path}", data=data,
                                     method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _rate(text: str) -> float | None:
    return None if text.lower() in ("none", "0", "inf") else float(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the server's URL")
    parser.add_argument("--delay", type=float, default=0.025, help="one-way delay, s")
    parser.add_argument("--conn-rate", type=_rate, default=10e6, help="bytes/s per connection")
    parser.add_argument("--link-rate", type=_rate, default=80e6, help="bytes/s shared")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    proxy = LinkProxy(args.upstream, delay=args.delay, conn_rate=args.conn_rate,
                      link_rate=args.link_rate, port=args.port)

    async def run() -> None:
        await proxy.serve()
        print(proxy.endpoint_url, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        await proxy.aclose()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
