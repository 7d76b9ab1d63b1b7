"""Planted special files, run in a process of their own (``tests/storage/test_special_files.py``).

Files of a shard set (its manifest, chunk index, a shard, a TFRecord side index, a
staging side file) are replaced by things that are not regular files — a FIFO, a
symbolic link to ``/dev/zero`` or ``/dev/null``, a directory, a UNIX socket — or by
(sparse) regular files larger than their cap, and one of recprep's operations runs on the
set. What used to happen is a hang (a FIFO) or gigabytes read (``/dev/zero``), so the
tests run this module in a subprocess with a timeout and a bound on its memory; here, an
alarm turns a hang into a :class:`Hung` that no ``except Exception`` can swallow.

``python tests/support/planted.py case DIR OP [--skip] TARGET=KIND...`` runs one case
and prints one line of JSON: the outcome (``values``, or ``error`` with its type and
message), the warnings given, what was logged and the process's peak resident memory.
``python tests/support/planted.py fuzz DIR N`` runs the hypothesis fuzz target over N
drawn cases and prints ``fuzz: ok`` when every case behaved (see :func:`check`).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import signal
import socket
import sys
import warnings
from collections.abc import Sequence
from typing import Any

DATA = list(range(23))
#: per target: the set's format and the file's name in the set's directory
FILES = {
    "manifest": ("recordio", "p.manifest.json"),
    "chunks": ("recordio", ".p.chunks"),
    "shard": ("recordio", "p-00001-of-00002"),
    "tfindex": ("tfrecord", ".p-00001-of-00002.tfindex"),
    "journal": ("recordio", ".recprep-staging-p/commit.json"),
    "options": ("recordio", ".recprep-staging-p/options.json"),
}
TARGETS = tuple(FILES)
KINDS = ("fifo", "zero", "null", "dir", "socket", "huge")
OPS = ("read", "range", "verify", "ls", "head", "cp", "resume")
#: bytes of a "huge" file: one more than the cap of its kind of file (a shard has none:
#: a megabyte of zeros where a shard should be is damage)
HUGE = {"manifest": (64 << 20) + 1, "chunks": (1 << 30) + 1, "journal": (64 << 20) + 1,
        "options": (64 << 20) + 1, "tfindex": 1 << 20, "shard": 1 << 20}
#: what an operation can't do without: a planted one of these must make it fail, naming it
NEEDED = {"read": {"manifest", "shard"}, "range": {"manifest", "shard", "chunks", "tfindex"},
          "head": {"manifest", "shard"},
          "verify": {"manifest", "shard", "chunks", "tfindex"},
          "cp": {"manifest", "shard", "chunks"},
          "resume": {"manifest", "shard", "journal", "options"}, "ls": set()}


class Hung(BaseException):
    """The operation blocked or read on past the alarm (not an ``Exception``: no handler
    in the code under test may turn it into one of its own errors)."""


def build(directory: str, fmt: str) -> None:
    """The set ``p`` of 3 shards (format ``fmt``) in ``directory``: made once, copied per
    case."""
    from recprep import convert

    convert(directory, DATA, 3, "p", format=fmt, progress=False)


def make_bases(base: str) -> None:
    for fmt in ("recordio", "tfrecord"):
        build(os.path.join(base, fmt), fmt)


def plant(directory: str, target: str, kind: str) -> str:
    """Replace the file ``target`` of the set in ``directory`` by a ``kind``; its path."""
    path = os.path.join(directory, FILES[target][1])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind in ("zero", "null"):
        os.symlink(f"/dev/{kind}", path)
    elif kind == "dir":
        os.mkdir(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)  # the file stays after the socket is closed
        server.close()
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(HUGE[target])  # sparse: no disk used
    else:
        raise ValueError(kind)
    return path


def operate(directory: str, op: str, on_corrupt: str = "raise", fmt: str = "recordio") -> Any:
    """Run ``op`` on the set ``p`` of ``directory``; what it gives back, as JSON data."""
    from recprep import RecordIO, convert
    from recprep.tools import copy, head, list_datasets, verify

    where = os.path.join(directory, "p")
    if op == "read":
        return list(RecordIO(where, on_corrupt=on_corrupt)())
    if op == "range":
        reader = RecordIO(where, on_corrupt=on_corrupt)
        shard = os.path.join(directory, "p-00001-of-00002")
        return list(reader.read_range(shard, 1, 4)) + [reader.dataset()[len(DATA) - 1]]
    if op == "verify":
        report = verify(where)
        return {"ok": report.ok, "problems": [[p.kind, p.path, p.message]
                                              for p in report.problems]}
    if op == "ls":
        return [[d.records, d.source, d.notes] for d in list_datasets(where)]
    if op == "head":
        return head(where, 30, on_corrupt=on_corrupt)
    if op == "cp":
        result = copy(where, directory + "-copy", progress=False)
        return sorted(os.path.basename(f.dest) for f in result.files)
    if op == "resume":
        convert(directory, DATA, 3, "p", format=fmt, resume=True, progress=False)
        return list(RecordIO(where)())
    raise ValueError(op)


def _alarm(signum: int, frame: Any) -> None:
    raise Hung("the operation hung (a blocking open or an endless read)")


def run_case(
    base: str, directory: str, op: str, plants: Sequence[tuple[str, str]],
    on_corrupt: str = "raise",
) -> dict[str, Any]:
    """One case: copy the set made in ``base`` to ``directory``, plant, operate."""
    from recprep import RecprepError

    for old in (directory, directory + "-copy"):
        shutil.rmtree(old, ignore_errors=True)
    fmt = "tfrecord" if any(t == "tfindex" for t, _ in plants) else "recordio"
    shutil.copytree(os.path.join(base, fmt), directory, symlinks=True)
    outcome: dict[str, Any] = {"op": op, "on_corrupt": on_corrupt, "plants": list(plants)}
    if op in ("read", "range", "head"):  # what the same operation gives on the intact set
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outcome["expected"] = operate(directory, op, fmt=fmt)
    outcome["planted"] = {target: plant(directory, target, kind) for target, kind in plants}
    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("recprep").addHandler(handler)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            try:
                outcome["values"] = operate(directory, op, on_corrupt, fmt)
            except RecprepError as err:
                outcome["error"] = [type(err).__name__, str(err)]
            except Exception as err:  # noqa: BLE001 - what the tests look for
                outcome["foreign"] = [type(err).__name__, str(err)[:500]]
            except (MemoryError, Hung) as err:
                outcome["foreign"] = [type(err).__name__, str(err)]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        logging.getLogger("recprep").removeHandler(handler)
    outcome["warnings"] = [f"{w.category.__name__}: {w.message}" for w in seen]
    outcome["logged"] = logged
    outcome["maxrss_mib"] = peak_mib()
    return outcome


def peak_mib() -> int:
    """This process's peak resident memory, in MiB: the kernel's high-water mark of its
    own address space (``ru_maxrss`` also counts the parent's, kept across ``exec``)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def check(outcome: dict[str, Any]) -> None:
    """What every case must give: no foreign exception and no hang; data given back is
    the intact set's (or a ``CorruptDataWarning`` said what was skipped); and when a
    planted file is one the operation can't do without, an error (or a failed verify)
    naming it — except a damaged manifest, which ``on_corrupt="skip"`` reads around."""
    assert "foreign" not in outcome, outcome
    op, values = outcome["op"], outcome.get("values")
    warned = any(w.startswith("CorruptDataWarning") for w in outcome["warnings"])
    if "expected" in outcome and values is not None:
        assert values == outcome["expected"] or warned, outcome
    if op == "resume" and values is not None:
        assert values == DATA, outcome
    needed = dict(outcome["planted"])
    if outcome["on_corrupt"] == "skip":  # read around, with a warning
        for optional in ("manifest", "chunks", "tfindex"):  # (side files its manifest
            needed.pop(optional, None)  # vouches for: without a skip, a lie is an error)
    if any(kind == "huge" for target, kind in outcome["plants"] if target == "shard"):
        needed.pop("shard", None)  # zeros of another size: damage, said another way
    if op == "cp" and ("chunks", "dir") in outcome["plants"]:
        needed.pop("chunks", None)  # no file there: the set is copied without the index
    if op == "cp" and ("manifest", "dir") in outcome["plants"] and "shard" not in needed:
        needed.pop("manifest", None)  # no file: a set of shards only (with a warning)
    needed = {t: path for t, path in needed.items() if t in NEEDED[op]}
    if not needed:
        return
    if op == "verify":
        assert values is not None and not values["ok"], outcome
        assert any(path in p[1] or path in p[2] for p in values["problems"]
                   for path in needed.values()), outcome
        return
    assert "error" in outcome, outcome
    assert any(path in outcome["error"][1] for path in outcome["planted"].values()), outcome


def fuzz(directory: str, examples: int) -> None:
    """The hypothesis fuzz target: one to three planted special or oversized files, one
    operation, either ``on_corrupt``."""
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    base = os.path.join(directory, "base")
    make_bases(base)
    counter = iter(range(1 << 30))
    plants = st.lists(st.tuples(st.sampled_from(TARGETS), st.sampled_from(KINDS)),
                      min_size=1, max_size=3, unique_by=lambda plant: plant[0])

    @settings(max_examples=examples, deadline=None, database=None,
              derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
              suppress_health_check=list(HealthCheck))
    @given(plants, st.sampled_from(OPS), st.sampled_from(["raise", "skip"]))
    def target(plants: list[tuple[str, str]], op: str, on_corrupt: str) -> None:
        # cp copies what is there, byte for byte: not a sparse gigabyte of zeros per case
        assume(op != "cp" or not any(kind == "huge" for _, kind in plants))
        case = os.path.join(directory, f"case-{next(counter)}")
        try:
            check(run_case(base, case, op, plants, on_corrupt))
        finally:
            shutil.rmtree(case, ignore_errors=True)
            shutil.rmtree(case + "-copy", ignore_errors=True)

    target()


#: this process's address space at most: /dev/zero read whole fails fast, not the machine
MEMORY_LIMIT = 3 << 29


def main(argv: list[str]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    warnings.simplefilter("ignore")
    if argv[0] == "fuzz":
        fuzz(argv[1], int(argv[2]))
        print("fuzz: ok")
        return
    if argv[0] == "case":
        directory, op, rest = argv[1], argv[2], argv[3:]
        on_corrupt = "skip" if "--skip" in rest else "raise"
        plants = [tuple(item.split("=", 1)) for item in rest if item != "--skip"]
        base = directory + "-base"
        shutil.rmtree(base, ignore_errors=True)
        make_bases(base)
        outcome = run_case(base, directory, op, plants, on_corrupt)  # type: ignore[arg-type]
        print(json.dumps(outcome, default=repr))
        return
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
