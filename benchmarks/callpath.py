"""How far a user's call travels through the package: functions, modules, package switches.

For ``RecordIO(path).batches(256)`` (a full pass) and ``convert(out, rows, 4, "x")``, the
calls made inside ``recprep`` are traced (``sys.setprofile``, in every thread) and counted:

* **functions**: distinct functions (and methods) of recprep that ran;
* **modules**: the distinct modules they are in;
* **package switches**: distinct call edges from a function of one package of recprep
  (``read``, ``storage``, ``codecs``...; the root's modules are the package ``recprep``)
  to a function of another;
* **generator layers**: the most recprep generators on the stack at once;
* **file wrappers**: distinct recprep classes whose ``read`` method ran (objects that wrap
  a file between the storage and the container).

Counts depend on the code only (not on timing). Run it against a tree by putting its
``src`` first on ``PYTHONPATH``::

    PYTHONPATH=src python benchmarks/callpath.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

GENERATOR = 0x20  # CO_GENERATOR


def package_of(filename: str, root: str) -> str | None:
    """The recprep package a source file is in (None: not recprep)."""
    if not filename.startswith(root):
        return None
    parts = Path(filename[len(root):].lstrip(os.sep)).parts
    return "recprep" if len(parts) == 1 else parts[0]


def trace(call: Callable[[], Any]) -> dict[str, int]:
    """Run ``call`` with every recprep call recorded; the counts of the module docs."""
    import recprep

    root = os.path.dirname(recprep.__file__)
    functions: set[Any] = set()
    edges: set[tuple[Any, Any]] = set()
    readers: set[str] = set()
    deepest = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if package_of(code.co_filename, root) is None:
            return
        functions.add(code)
        if code.co_name == "read" and "self" in frame.f_locals:
            readers.add(type(frame.f_locals["self"]).__qualname__)
        caller = frame.f_back
        while caller is not None and package_of(caller.f_code.co_filename, root) is None:
            caller = caller.f_back
        if caller is not None:
            edges.add((caller.f_code, code))
        layers, at = 0, frame
        while at is not None:
            if at.f_code.co_flags & GENERATOR and package_of(at.f_code.co_filename, root):
                layers += 1
            at = at.f_back
        deepest[0] = max(deepest[0], layers)

    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    modules = {c.co_filename for c in functions}
    switches = {
        (a, b) for a, b in edges
        if package_of(a.co_filename, root) != package_of(b.co_filename, root)
    }
    return {"functions": len(functions), "modules": len(modules),
            "package switches": len(switches), "generator layers": deepest[0],
            "file wrappers": len(readers)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    from recprep import RecordIO, convert

    rows = [(np.arange(16, dtype=np.float32) + i, i) for i in range(4000)]
    with tempfile.TemporaryDirectory() as work:
        written = os.path.join(work, "set")
        convert(written, rows, 4, "x", progress=False)  # warm: imports done before tracing
        out = {
            "RecordIO(path).batches(256)": trace(
                lambda: [b for b in RecordIO(os.path.join(written, "x")).batches(256)]),
            'convert(out, rows, 4, "x")': trace(
                lambda: convert(os.path.join(work, "again"), rows, 4, "x", progress=False)),
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    keys = list(next(iter(out.values())))
    print("| call | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, counts in out.items():
        print(f"| `{name}` | " + " | ".join(str(counts[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
