"""``executor="spark"``: tasks as a Spark job, one Spark task per recprep task.

Uses the active SparkSession when there is one; otherwise builds one from
``executor_options``: ``master`` (default ``local[num_workers]`` or ``local[*]``),
``conf`` (a dict of Spark settings), ``app_name`` and ``connect_timeout`` (seconds to wait
for a ``spark://`` master to answer, default 60). For a session recprep starts, the
Python workers are pointed at the driver's interpreter (``PYSPARK_PYTHON``), so they import
the same recprep and packages; on a cluster of other machines, install recprep (and what
your readers import) into that same interpreter path on every worker.

Every Spark job recprep submits goes through :func:`run_job` (a description in the Spark
UI; an engine failure as :class:`~recprep.errors.TaskFailedError`), and every list of
tasks through :func:`run_tasks`: this backend's, and :func:`recprep.spark.write`'s.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..errors import InvalidArgumentError, MissingDependencyError, TaskFailedError
from ._connect import take_timeout, wait_for
from .base import Backend, Outcome, execute

log = logging.getLogger("recprep")

_OPTIONS = {"master", "conf", "app_name", "connect_timeout"}
T = TypeVar("T")


def _import_pyspark() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingDependencyError("pyspark", "spark", "executor='spark'") from None
    return SparkSession


def _run_one(item: tuple[int, bytes]) -> tuple[int, Outcome]:
    index, payload = item
    return index, execute(payload)


def run_job(session: Any, description: str, what: str, job: Callable[[], T]) -> T:
    """Run ``job()``, which submits one Spark job of ``session``, under ``description``
    (what the Spark UI shows); a failure of the job itself (a ``Py4JJavaError``, a lost
    executor) is raised as :class:`~recprep.errors.TaskFailedError` naming ``what``."""
    session.sparkContext.setJobDescription(description)
    try:
        return job()
    except Exception as err:  # Py4JJavaError and friends: an executor or the job died
        message = str(err).strip().splitlines()
        raise TaskFailedError(
            what, type(err).__name__, message[0] if message else "", str(err)
        ) from err


def run_tasks(
    session: Any, payloads: list[bytes], description: str, what: str = "the Spark job", *,
    slices: int | None = None,
) -> list[tuple[int, Outcome]]:
    """Run serialized tasks (:func:`~recprep.executors.base.serialize`) as one Spark job
    of ``session``, in ``slices`` Spark tasks (default: one per task); ``(index, outcome)``
    of each, in order. See :func:`run_job` for ``description`` and ``what``."""
    context = session.sparkContext
    rdd = context.parallelize(list(enumerate(payloads)), slices or max(1, len(payloads)))
    return run_job(session, description, what, rdd.map(_run_one).collect)


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
        self.connect_timeout = take_timeout(self.options)
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
        yield from run_tasks(self.session(), payloads, f"recprep: {len(payloads)} task(s)")
