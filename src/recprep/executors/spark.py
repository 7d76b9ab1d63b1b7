"""``executor="spark"``: tasks as a Spark job, one Spark task per recprep task.

Uses the active SparkSession when there is one; otherwise builds one from
``executor_options``: ``master`` (default ``local[num_workers]`` or ``local[*]``),
``conf`` (a dict of Spark settings), ``app_name`` and ``connect_timeout`` (seconds to wait
for a ``spark://`` master to answer, default 60). For a session recprep starts, the
Python workers are pointed at the driver's interpreter (``PYSPARK_PYTHON``), so they import
the same recprep and packages; on a cluster of other machines, install recprep (and what
your readers import) into that same interpreter path on every worker.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import InvalidArgumentError, MissingDependencyError, TaskFailedError
from ._connect import DEFAULT_CONNECT_TIMEOUT, check_timeout, wait_for
from .base import Backend, Outcome, execute

log = logging.getLogger("recprep")

_OPTIONS = {"master", "conf", "app_name", "connect_timeout"}


def _import_pyspark() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingDependencyError("pyspark", "spark", "executor='spark'") from None
    return SparkSession


def _run_one(item: tuple[int, bytes]) -> tuple[int, Outcome]:
    index, payload = item
    return index, execute(payload)


class SparkBackend(Backend):
    """Runs tasks on Spark (local mode or a cluster)."""

    name = "spark"

    def __init__(
        self, num_workers: int | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(num_workers, options)
        unknown = set(self.options) - _OPTIONS
        if unknown:
            raise InvalidArgumentError(
                f"executor 'spark' takes executor_options {sorted(_OPTIONS)}, "
                f"got {sorted(unknown)}"
            )
        self.connect_timeout = check_timeout(
            self.options.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
        )
        self._session_class = _import_pyspark()

    def session(self) -> Any:
        """The active SparkSession, or one built from the options."""
        SparkSession = self._session_class
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        workers = self.num_workers or "*"
        master = str(self.options.get("master", f"local[{workers}]"))
        if master.startswith("spark://"):  # else Spark gives up after ~90 s, saying little
            wait_for(master, self.connect_timeout, "Spark master")
        builder = (
            SparkSession.builder.appName(self.options.get("app_name", "recprep"))
            .master(master)
            .config("spark.pyspark.python", sys.executable)
        )
        for key, value in dict(self.options.get("conf") or {}).items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        log.info("recprep: started Spark session %s", session.sparkContext.master)
        return session

    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        context = self.session().sparkContext
        rdd = context.parallelize(list(enumerate(payloads)), max(1, len(payloads)))
        context.setJobDescription(f"recprep: {len(payloads)} task(s)")
        try:
            results = rdd.map(_run_one).collect()
        except Exception as err:  # Py4JJavaError and friends: an executor or the job died
            message = str(err).strip().splitlines()
            raise TaskFailedError(
                "the Spark job", type(err).__name__, message[0] if message else "", str(err)
            ) from err
        yield from results
