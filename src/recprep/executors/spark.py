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
tasks through :func:`run_tasks`: this backend's, and :func:`recprep.spark.write`'s. A job
that fails because the workers' Python can't import recprep (a session of the user's own
whose ``PYSPARK_PYTHON`` is another interpreter) is a
:class:`~recprep.errors.WorkerImportError` saying so; :func:`check_workers` finds that out
up front, once per session, for jobs that run outside recprep (the scans of
:func:`recprep.spark.read`).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..errors import (
    InvalidArgumentError,
    MissingDependencyError,
    TaskFailedError,
    WorkerImportError,
)
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


_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_RECPREP_FRAME = re.compile(r'File "[^"\n]*[/\\]recprep[/\\][^"\n]*"')


def import_failure(session: Any, text: str) -> WorkerImportError | None:
    """The :class:`~recprep.errors.WorkerImportError` a failed job's message ``text``
    shows, or None: a worker's ``ModuleNotFoundError`` for recprep, or for a module that
    recprep's own files import (numpy...). Other missing modules (the user's) are left to
    the error of the task that needs them.

    >>> text = "Traceback (most recent call last):\\n  File \\"worker.py\\", line 9, in x\\n"
    >>> err = import_failure(None, text + "ModuleNotFoundError: No module named 'recprep'")
    >>> err.module, str(err).startswith("the Spark workers' Python can't import recprep; set")
    ('recprep', True)
    >>> import_failure(None, text + "ModuleNotFoundError: No module named 'mine'") is None
    True
    """
    for found in _NO_MODULE.finditer(text):
        module = found.group(1)
        trace = text[text.rfind("Traceback (most recent call last)", 0, found.start()):
                     found.start()]
        if module.partition(".")[0] == "recprep" or _RECPREP_FRAME.search(trace):
            return WorkerImportError(module, _workers_python(session), sys.executable, text)
    return None


def _workers_python(session: Any) -> str | None:
    """The interpreter ``session`` starts Python workers with, as it was told (None when
    nothing says: Spark runs ``python3``)."""
    if session is None:
        return None
    try:
        configured = session.sparkContext.getConf().get("spark.pyspark.python")
    except Exception:  # a session that can't say: the environment's
        configured = None
    return configured or os.environ.get("PYSPARK_PYTHON") or None


def _can_import(_: Any) -> str:
    """Run on a worker: unpickling it imports this module, which is the check; the
    worker's interpreter."""
    return sys.executable


#: the Spark applications whose workers imported recprep (checked once each)
_CHECKED: set[str] = set()


def check_workers(session: Any) -> None:
    """Raise :class:`~recprep.errors.WorkerImportError` if ``session``'s Python workers
    can't import recprep: one tiny job, once per Spark application. For the jobs that run
    outside :func:`run_job` (a DataFrame's own actions)."""
    context = session.sparkContext
    key = str(context.applicationId)
    if key in _CHECKED:
        return
    run_job(session, "recprep: check that the workers' Python imports recprep",
            "the Spark job checking the workers' Python",
            context.parallelize([0], 1).map(_can_import).collect)
    _CHECKED.add(key)


def run_job(session: Any, description: str, what: str, job: Callable[[], T]) -> T:
    """Run ``job()``, which submits one Spark job of ``session``, under ``description``
    (what the Spark UI shows); a failure of the job itself (a ``Py4JJavaError``, a lost
    executor) is raised as :class:`~recprep.errors.TaskFailedError` naming ``what``, or as
    :class:`~recprep.errors.WorkerImportError` when the workers' Python can't import
    recprep."""
    session.sparkContext.setJobDescription(description)
    try:
        return job()
    except Exception as err:  # Py4JJavaError and friends: an executor or the job died
        text = str(err)
        unimportable = import_failure(session, text)
        if unimportable is not None:
            raise unimportable from None
        message = text.strip().splitlines()
        raise TaskFailedError(
            what, type(err).__name__, message[0] if message else "", text
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
