"""``executor="ray"``: tasks as Ray remote functions, one per recprep task.

Joins the running Ray instance if ``ray.init`` was already called; otherwise calls
``ray.init(**executor_options)`` — e.g. ``{"address": "auto"}`` to join a cluster started
with ``ray start``, or ``{"num_cpus": 4}`` for a local one. Workers run the interpreter
the cluster was started with: recprep (and what your readers import) must be installed
there, or shipped with ``{"runtime_env": {...}}``.

``connect_timeout`` (seconds, default 60) bounds the wait for an ``address``: where
nothing answers, :class:`~recprep.errors.ClusterUnreachableError` names it, instead of
``ray.init`` retrying for many minutes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import MissingDependencyError, RecprepWarning, TaskFailedError, warn
from ._connect import take_timeout, wait_for
from .base import Backend, Outcome, execute

log = logging.getLogger("recprep")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MissingDependencyError("ray", "ray", "executor='ray'") from None
    return ray


class RayBackend(Backend):
    """Runs tasks on Ray (a local instance or a cluster)."""

    name = "ray"

    def __init__(
        self, num_workers: int | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(num_workers, options)
        self.connect_timeout = take_timeout(self.options)
        self._ray = _import_ray()

    def _address(self) -> str | None:
        """The address ``ray.init`` will join (``auto`` resolved), or None for a new one."""
        address = self.options.get("address") or os.environ.get("RAY_ADDRESS")
        if address in (None, "", "local"):
            return None
        if address == "auto":
            try:
                from ray._private.services import canonicalize_bootstrap_address

                return canonicalize_bootstrap_address("auto")
            except Exception:  # no running cluster (ray.init says so), or a private API gone
                return None
        return str(address)

    def _connect(self) -> None:
        ray = self._ray
        address = self._address()
        if address is not None:
            wait_for(address, self.connect_timeout, "Ray cluster")
        if ray.is_initialized():
            self._joined(address)
            return
        options = dict(self.options)
        if self.num_workers and "address" not in options:
            options.setdefault("num_cpus", self.num_workers)
        options.setdefault("log_to_driver", False)
        ray.init(**options)
        log.info("recprep: connected to Ray (%s)", options.get("address", "local"))

    def _joined(self, address: str | None) -> None:
        """Ray is already initialized in this process: its tasks run there. Say so when the
        options named another cluster (ray.init can't join a second one)."""
        if address is None:
            return
        try:
            current = str(self._ray.get_runtime_context().gcs_address)
        except Exception:  # an older Ray, or a client session: nothing to compare
            return
        if current.split("://")[-1] != address.split("://")[-1]:
            warn(RecprepWarning(
                f"Ray is already initialized in this process (cluster at {current}): tasks "
                f"run there, not at address={address!r}; call ray.shutdown() first to join "
                "that one"
            ))

    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        ray = self._ray
        self._connect()
        remote = ray.remote(num_cpus=1, max_retries=3)(execute)
        pending = {remote.remote(p): i for i, p in enumerate(payloads)}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                ref = done[0]
                index = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as err:  # the worker died, or Ray lost the task
                    raise TaskFailedError(
                        f"task {index} (Ray worker)", type(err).__name__, str(err)
                    ) from err
                yield index, outcome
        finally:
            for ref in pending:
                ray.cancel(ref)
            if pending:
                ray.wait(list(pending), num_returns=len(pending), timeout=60)
