"""Bounded waits for a cluster's address, before an engine is asked to join it.

``ray.init(address=...)`` and a Spark ``spark://`` master retry an address where nothing
listens for many minutes (Ray) or fail late with an unrelated message (Spark). A TCP
connect, retried until a deadline, tells the user within ``connect_timeout`` seconds, naming
the address.

Example
-------
>>> host_ports("spark://10.0.0.1:7077,10.0.0.2:7077")
[('10.0.0.1', 7077), ('10.0.0.2', 7077)]
>>> host_ports("ray://[::1]:10001"), host_ports("auto")
([('::1', 10001)], [])
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from ..errors import ClusterUnreachableError, InvalidArgumentError

log = logging.getLogger("recprep")

#: seconds to wait for a cluster address unless ``connect_timeout`` says otherwise
DEFAULT_CONNECT_TIMEOUT = 60.0


def take_timeout(options: dict[str, Any]) -> float:
    """Take ``connect_timeout`` out of an engine's ``options``: a positive number of
    seconds, :data:`DEFAULT_CONNECT_TIMEOUT` when absent.

    >>> options = {"connect_timeout": 5, "master": "local"}
    >>> take_timeout(options), options
    (5.0, {'master': 'local'})
    """
    value = options.pop("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgumentError(
            f"connect_timeout must be a positive number of seconds, got {value!r}"
        )
    return float(value)


def host_ports(address: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` pairs of ``scheme://h1:p1,h2:p2`` (none for ``auto``...)."""
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    pairs = []
    for item in filter(None, rest.split(",")):
        host, sep, port = item.rpartition(":")
        if sep and port.isdigit() and host:
            pairs.append((host.strip("[]"), int(port)))
    return pairs


def wait_for(address: str, timeout: float, what: str) -> None:
    """Return once a TCP connection to ``address`` (any of its hosts) opens; raise
    :class:`~recprep.errors.ClusterUnreachableError` after ``timeout`` seconds."""
    pairs = host_ports(address)
    if not pairs:
        return
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        for host, port in pairs:
            remaining = deadline - time.monotonic()
            try:
                with socket.create_connection((host, port), timeout=max(0.1, min(5, remaining))):
                    return
            except OSError as err:
                last = f"{host}:{port}: {err.strerror or type(err).__name__}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClusterUnreachableError(what, address, timeout, last)
        log.info("recprep: waiting for the %s at %s (%s)", what, address, last)
        time.sleep(min(1.0, remaining))
