"""A failed task, the same on every executor (issue 22, item 21).

A user's argument error raised inside a task reaches the caller as itself
(``InvalidArgumentError``), never wrapped; a task that really fails is a
``TaskFailedError`` whose message is one readable sentence, with the original error as
its cause and the worker's traceback kept apart (``original_traceback``, and the cause
chain that ``traceback`` prints), never pasted into ``str(err)``.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import traceback

import pytest

from recprep import InvalidArgumentError, TaskFailedError, convert, partitions

EXECUTORS = ["serial", "processes", "user-threads", "spark", "ray"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    """``executor=`` and its options for one engine (real Spark and Ray, local)."""
    name = request.param
    if name == "spark":
        request.getfixturevalue("spark_session")
        yield {"executor": "spark"}
    elif name == "ray":
        request.getfixturevalue("ray_local")
        yield {"executor": "ray"}
    elif name == "processes":
        yield {"executor": "processes", "num_workers": 2}
    elif name == "user-threads":
        pool = cf.ThreadPoolExecutor(2)
        yield {"executor": pool}
        pool.shutdown()
    else:
        yield {"executor": name}


def not_a_reader_result():
    return 5  # a reader must return an iterable


def rows(start: int, size: int):
    return iter(range(start, start + size))


def broken(start: int):
    yield start
    raise ValueError(f"bad row after {start}")


def test_an_argument_error_inside_a_task_is_raised_as_itself(tmp_path, executor):
    readers = [functools.partial(rows, 0, 3), not_a_reader_result]
    with pytest.raises(InvalidArgumentError) as info:
        convert(str(tmp_path / "out"), partitions(readers), 2, "a", progress=False,
                **executor)
    err = info.value
    assert not isinstance(err, TaskFailedError)
    assert str(err) == ("calling the reader returned a int; a reader must return an "
                        "iterable of instances (e.g. be a generator function)")
    assert any("partition 1" in note for note in getattr(err, "__notes__", []))
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_an_argument_error_of_a_single_reader_on_the_serial_executor(tmp_path):
    with pytest.raises(InvalidArgumentError, match="calling the reader returned a int") as info:
        convert(str(tmp_path), not_a_reader_result, 2, "a", progress=False)
    assert not isinstance(info.value, TaskFailedError)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_task_is_one_sentence_with_the_traceback_kept_apart(tmp_path, executor):
    readers = [functools.partial(rows, 0, 3), functools.partial(broken, 3)]
    with pytest.raises(TaskFailedError) as info:
        convert(str(tmp_path / "out"), partitions(readers), 2, "b", progress=False,
                **executor)
    err = info.value
    assert str(err) == (
        "partition 1 failed with ValueError: bad row after 3; nothing was committed (the "
        "original traceback is in .original_traceback; the CLI shows it with --debug)"
    )
    assert "\n" not in str(err) and "Traceback" not in str(err)
    assert "in broken" in err.original_traceback
    assert isinstance(err.original, ValueError) and err.__cause__ is err.original
    # printing the error (what `recprep --debug` does) shows where the worker raised it
    printed = "".join(traceback.format_exception(err))
    assert "in broken" in printed and 'raise ValueError(f"bad row after {start}")' in printed
    if executor["executor"] not in ("serial",) and not isinstance(
            executor["executor"], cf.ThreadPoolExecutor):
        assert type(err.original.__cause__).__name__ == "RemoteTraceback"


def test_nothing_was_committed_is_said_once(tmp_path):
    """A task whose own error already says it (a WriteError) doesn't get it twice."""
    err = TaskFailedError("the reader's task", "recprep.errors.WriteError",
                          "writing x failed: ...; nothing was committed and the "
                          "temporaries were removed", "Traceback ...")
    assert str(err).count("nothing was committed") == 1
    assert "Traceback ..." not in str(err) and err.original_traceback == "Traceback ..."
