"""pytest settings for the whole repository (the tests in tests/, the doctests in src/).

A doctest whose examples import an optional engine (pandas, pyarrow, torch, pyspark...)
that isn't installed is skipped, saying which: the base install runs every other doctest.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

#: what the extras install; a doctest importing one of these needs it
OPTIONAL = frozenset({"pandas", "pyarrow", "polars", "duckdb", "torch", "torchdata",
                      "tensorflow", "pyspark", "ray", "s3fs", "moto", "lightning",
                      "accelerate"})
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        examples = getattr(getattr(item, "dtest", None), "examples", ())
        needed = {name for example in examples for name in _IMPORT.findall(example.source)}
        absent = sorted(name for name in needed & OPTIONAL if _missing(name))
        if absent:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(absent)}"))
