"""What a caller asked for, and what the environment lacks: bad arguments,
missing engines and plug-ins, unreachable clusters, indexes and states out of range."""

from __future__ import annotations

from typing import Any

from .base import REMEDY, RecprepError, RecprepWarning, Remedy


class InvalidArgumentError(RecprepError, ValueError):
    """An argument has a value recprep can't use; raised before anything is written."""


class MissingDependencyError(RecprepError, ImportError):
    """An optional engine is not installed; the message names the extra to install.

    Attributes: ``package`` (the module that failed to import), ``extra``.
    """

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs {package!r}, which is not installed: "
            f"pip install 'recprep[{extra}]'"
        )


class WorkerImportError(RecprepError, ImportError):
    """The Python that runs a Spark job's tasks can't import recprep (or a module recprep
    imports): the workers run another interpreter than the driver, one without recprep —
    typically a SparkSession of the user's own, started outside the activated venv.

    Attributes: ``module`` (the module that failed to import), ``python`` (the workers'
    interpreter as Spark was told it, or None), ``original_traceback`` (the worker's).
    """

    def __init__(self, module: str, python: str | None, driver_python: str,
                 original_traceback: str = "") -> None:
        self.module = module
        self.python = python
        self.original_traceback = original_traceback
        lacks = "" if module == "recprep" else f" (it lacks {module!r}, which recprep imports)"
        runs = (f"they run {python}" if python else
                "PYSPARK_PYTHON is not set, so they run the first python3 on their PATH")
        super().__init__(
            f"the Spark workers' Python can't import recprep{lacks}; set PYSPARK_PYTHON (or "
            "the spark.pyspark.python setting) to a Python where recprep is installed before "
            f"the SparkSession is created (on one machine, this driver's: {driver_python}), "
            f"or install recprep into the workers' Python ({runs}). The worker's traceback "
            "is in .original_traceback"
        )


class PluginError(RecprepError, ImportError):
    """A plug-in (an entry point of another distribution) fails to load, or loads something
    that is not a valid entry of its registry.

    Attributes: ``kind`` (``"format"``...), ``plugin`` (its name), ``value`` (the entry point's
    ``module:attr``), ``distribution`` (name and version), ``group``, ``original``.
    """

    def __init__(
        self, kind: str, name: str, value: str, distribution: str, group: str,
        original: BaseException,
    ) -> None:
        self.kind = kind
        self.plugin = name
        self.value = value
        self.distribution = distribution
        self.group = group
        self.original = original
        super().__init__(
            f"the {kind} {name!r} of {distribution} (entry point {value!r} in group "
            f"{group!r}) fails to load: {type(original).__name__}: {original}; upgrade or "
            f"uninstall {distribution.rpartition(' ')[0] or distribution}"
        )


class ClusterUnreachableError(RecprepError, ConnectionError):
    """Nothing answered at a cluster's address within the connect timeout.

    Attributes: ``address`` (as given), ``timeout`` (seconds), ``detail`` (the last error).
    """

    def __init__(self, what: str, address: str, timeout: float, detail: str) -> None:
        self.address = address
        self.timeout = timeout
        self.detail = detail
        super().__init__(
            f"can't reach the {what} at {address} within {timeout:g} s ({detail}); check "
            f"that it is running and the address is right{REMEDY}",
            remedy=Remedy("connect_timeout", effect="to wait longer for one that is starting"),
        )


class InstanceIndexError(InvalidArgumentError, IndexError):
    """A :class:`~recprep.read.dataset.MapDataset` was asked for an instance it doesn't have
    (or an index that is not an int). Attributes: ``where``, ``index``, ``num_instances``."""

    def __init__(self, where: str, index: Any, num_instances: int, detail: str) -> None:
        self.where, self.index, self.num_instances = where, index, num_instances
        super().__init__(
            f"{where}: {detail}: the dataset holds {num_instances} instances, so ask for "
            f"{-num_instances} <= index < {num_instances}"
        )


class RecordRangeError(InvalidArgumentError, IndexError):
    """``read_range`` was asked for records a file doesn't have.

    Attributes: ``path``, ``start``, ``end``, ``num_records``.
    """

    def __init__(self, path: str, start: Any, end: Any, num_records: int, detail: str) -> None:
        self.path = path
        self.start = start
        self.end = end
        self.num_records = num_records
        super().__init__(
            f"{path}: can't read records [{start!r}, {end!r}): {detail}; the file holds "
            f"{num_records} records, so ask for 0 <= start <= end <= {num_records}"
        )


class UnsupportedColumnError(InvalidArgumentError):
    """A column's Spark type can't be written with the chosen codec (or as a partition
    column). Attributes: ``column``, ``type``."""

    def __init__(self, column: str, type: str, detail: str) -> None:
        self.column = column
        self.type = type
        super().__init__(f"column {column!r} ({type}) can't be written: {detail}")


class SchemaConflictError(InvalidArgumentError):
    """Two directories (or shard sets) of one dataset record different columns.

    Attributes: ``first``, ``second`` (the two places).
    """

    def __init__(self, first: str, second: str, detail: str) -> None:
        self.first = first
        self.second = second
        super().__init__(f"{first} and {second} hold different columns ({detail}); read "
                         f"them separately{REMEDY}",
                         remedy=Remedy("schema", effect="to read them with one schema"))


class PluginWarning(RecprepWarning):
    """A plug-in was left out: it fails to load (said while a registry loads every entry,
    e.g. to detect a file's format), it wants a name already taken, or its distribution's
    entry points can't be read. The message names the distribution."""


class MovedModuleWarning(RecprepWarning):
    """An import used a module path from before the package root was regrouped into
    ``read/``, ``write/`` and ``storage/``; it works for one more release."""


class ResumeWarning(RecprepWarning):
    """A loaded reader state was dropped unused: the next pass was of another epoch
    (``set_epoch`` was called with a different one), so it starts that epoch afresh."""


class ResumeMismatchWarning(ResumeWarning):
    """After a training framework resumed from a checkpoint, a reader's stream is not where
    the checkpoint left it (the framework restored no loader state, or a stale one), and
    training goes on from there as asked (``recprep.lightning.RecprepResume(on_missing=
    "warn")``)."""


class ResumeMismatchError(RecprepError):
    """After a training framework resumed from a checkpoint, a reader's stream is not where
    the checkpoint left it: the framework restored no loader state, or a stale one
    (``recprep.lightning.RecprepResume``, ``on_missing="raise"``)."""
