"""The tasks' reports of a DataFrame write, saved for the driver as JSON data.

The tasks of the pieces job (:mod:`recprep.spark.pieces`) send their outcomes to the
data source's commit, through Spark; the commit saves them in the staging directory,
where :func:`recprep.spark.jobs.write_dataframe` loads them. A file in the (shared) output directory
is input: it is saved and read as JSON data, checked, and never unpickled — a failed
task's recprep error comes back as its class (from :mod:`recprep.errors` only) and its
JSON attributes.
"""

from __future__ import annotations

import datetime
import json
import pickle
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from .. import errors
from ..errors import CorruptDataError, InvalidArgumentError, TaskFailedError
from ..executors.base import Outcome
from ..storage.fs import display
from ..storage.staging import FileFacts
from .pieces import PieceFile, TaskReport
from .writing import SparkWriteJob

__all__ = ["load_reports", "save_reports"]


def save_reports(job: SparkWriteJob, outcomes: Sequence[tuple[int, Outcome]]) -> None:
    """Save the tasks' outcomes (what the data source's commit received through Spark)
    for the driver, as JSON data: a file in the shared output directory is input, and
    unpickling it would run whatever it holds."""
    doc = [_outcome_json(task, outcome) for task, outcome in outcomes]
    fs, path = job.plan.fs, job.reports_path
    with fs.open(path + ".tmp", "wb") as out:
        out.write(json.dumps(doc).encode())
    fs.mv(path + ".tmp", path)


def load_reports(job: SparkWriteJob) -> list[TaskReport]:
    """The task reports the data source's commit saved (JSON, checked); a failed task
    raises :class:`~recprep.errors.TaskFailedError` carrying its error."""
    shown = display(job.plan.fs, job.reports_path)
    try:
        doc = json.loads(job.plan.fs.cat_file(job.reports_path))
        outcomes = [_outcome_from_json(item) for item in doc]
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        raise CorruptDataError(f"not the task reports of this write ({type(err).__name__}: "
                               f"{err})", path=shown) from None
    reports = []
    for task, outcome, original in sorted(outcomes, key=lambda item: item[0]):
        try:
            reports.append(outcome.unwrap(f"Spark task {task} (writing rows)"))
        except TaskFailedError as err:
            err.original = original
            raise err from original
    return reports


def _value_json(value: Any) -> list[Any]:
    if value is None:
        return ["n"]
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", value]
    if isinstance(value, float):
        return ["f", value]
    if isinstance(value, str):
        return ["s", value]
    if isinstance(value, datetime.datetime):
        return ["t", value.isoformat()]
    if isinstance(value, datetime.date):
        return ["d", value.isoformat()]
    raise InvalidArgumentError(f"a partition value must be an int, str, bool or date, got "
                               f"{type(value).__name__}")


_DECODE: dict[str, Any] = {"b": bool, "i": int, "f": float, "s": str,
                           "t": datetime.datetime.fromisoformat,
                           "d": datetime.date.fromisoformat}


def _value_from_json(item: list[Any]) -> Any:
    tag, *rest = item
    if tag == "n" and not rest:
        return None
    (value,) = rest
    decoded = _DECODE[tag](value)
    if tag in "bifs" and type(value) is not type(decoded):
        raise TypeError(f"partition value {value!r} is not of type {tag!r}")
    return decoded


def _outcome_json(task: int, outcome: Outcome) -> dict[str, Any]:
    if outcome.error_type is not None:
        return {"task": task, "error": [outcome.error_type, outcome.error_message,
                                        outcome.error_traceback],
                "original": _error_json(outcome)}
    report: TaskReport = outcome.result
    return {
        "task": task,
        "pieces": [{"key": [_value_json(v) for v in p.key], "task": p.task, "seq": p.seq,
                    "facts": asdict(p.facts), "index": p.index} for p in report.pieces],
        "nulls": [[[_value_json(v) for v in key], sorted(columns)]
                  for key, columns in report.nulls.items()],
    }


def _error_json(outcome: Outcome) -> dict[str, Any] | None:
    """A recprep error's class name, arguments and attributes (what is JSON of them)."""
    if outcome.error_pickle is None:
        return None
    try:  # made by the task, come through Spark (as the outcome itself): not from storage
        err = pickle.loads(outcome.error_pickle)
    except Exception:
        return None
    kind = type(err)
    if not isinstance(err, errors.RecprepError) or getattr(errors, kind.__name__, None) is not kind:
        return None
    state = {}
    for key, value in vars(err).items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            continue
        state[key] = value
    return {"class": kind.__name__, "args": [str(a) for a in err.args], "state": state}


def _error_from_json(doc: dict[str, Any] | None) -> BaseException | None:
    """The recprep error :func:`_error_json` described: only classes of
    :mod:`recprep.errors` are made, from data (nothing is imported or run)."""
    if doc is None:
        return None
    kind = getattr(errors, str(doc["class"]), None)
    if not (isinstance(kind, type) and issubclass(kind, errors.RecprepError)):
        return None
    err = kind.__new__(kind)
    Exception.__init__(err, *[str(a) for a in doc["args"]])
    err.__dict__.update({str(k): v for k, v in dict(doc["state"]).items()})
    return err


def _facts(doc: dict[str, Any]) -> FileFacts:
    return FileFacts(str(doc["path"]), int(doc["records"]), int(doc["bytes"]),
                     int(doc["crc32c"]), int(doc["offset"]))


def _outcome_from_json(item: dict[str, Any]) -> tuple[int, Outcome, BaseException | None]:
    task = int(item["task"])
    if "error" in item:
        kind, message, trace = (str(x) for x in item["error"])
        outcome = Outcome(error_type=kind, error_message=message, error_traceback=trace)
        return task, outcome, _error_from_json(item.get("original"))
    pieces = [
        PieceFile(tuple(_value_from_json(v) for v in p["key"]), int(p["task"]), int(p["seq"]),
              _facts(p["facts"]),
              None if p["index"] is None else str(p["index"]))
        for p in item["pieces"]
    ]
    nulls = {tuple(_value_from_json(v) for v in key): {str(c) for c in columns}
             for key, columns in item["nulls"]}
    return task, Outcome(result=TaskReport(task, pieces, nulls)), None
