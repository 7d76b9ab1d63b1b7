"""Old import paths of modules that moved, kept working for one release.

``import recprep.reader`` and ``from recprep.reader import X`` keep working for one release:
the module is found at its new path, with a :class:`~recprep.errors.MovedModuleWarning`
naming it. ``recprep.convert`` and ``recprep.prepare`` are the functions, and stay the
functions when their old module paths are imported (their modules are
:mod:`recprep.write.convert` and :mod:`recprep.write.prepare`).

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     from recprep.index import FileIndex
...     import recprep.convert
>>> FileIndex.__module__, str(caught[0].message)  # doctest: +ELLIPSIS
('recprep.containers.fileindex', 'recprep.index moved to recprep.containers.fileindex; ...')
>>> import recprep
>>> callable(recprep.convert), recprep.convert.__module__
(True, 'recprep.write.convert')
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from .errors import MovedModuleWarning, warn

#: old dotted path -> new dotted path
MOVED = {
    "recprep._failpoints": "recprep.storage.failpoints",
    "recprep.storage._failpoints": "recprep.storage.failpoints",
    "recprep._arguments": "recprep._core.arguments",
    "recprep.arguments": "recprep._core.arguments",
    "recprep.assembly": "recprep.write.assembly",
    "recprep.cache": "recprep.read.cache",
    "recprep.checkpoint": "recprep.read.checkpoint",
    "recprep.chunkindex": "recprep.storage.chunkindex",
    "recprep.codecs._example_chunk": "recprep.codecs.example.chunk",
    "recprep.codecs._example_columns": "recprep.codecs.example.columns",
    "recprep.codecs._example_encode_columns": "recprep.codecs.example.encode_columns",
    "recprep.codecs._example_parse": "recprep.codecs.example.parse",
    "recprep.codecs._recprep_base": "recprep.codecs.recprep.wire",
    "recprep.codecs._recprep_columns": "recprep.codecs.recprep.columns",
    "recprep.codecs._recprep_decode": "recprep.codecs.recprep.decode",
    "recprep.codecs._recprep_encode_columns": "recprep.codecs.recprep.encode_columns",
    "recprep.codecs._recprep_numpy": "recprep.codecs.recprep.arrays",
    "recprep.codecs._recprep_packed": "recprep.codecs.recprep.packed",
    "recprep.codecs._recprep_types": "recprep.codecs.recprep.types",
    "recprep.codecs._segments": "recprep.codecs.recprep.segments",
    "recprep.codecs.example_wire": "recprep.codecs.example.wire",
    "recprep.commit": "recprep.read.committed",
    "recprep.compression": "recprep.containers.compression",
    "recprep.convert": "recprep.write.convert",
    "recprep.cpugate": "recprep.read.cpugate",
    "recprep.dataset": "recprep.read.dataset",
    "recprep.decoding": "recprep.read.decoding",
    "recprep.discovery": "recprep.storage.discovery",
    "recprep.features": "recprep.codecs.features",
    "recprep.filepool": "recprep.read.filepool",
    "recprep.index": "recprep.containers.fileindex",
    "recprep.inputs": "recprep.write.inputs",
    "recprep.locking": "recprep.storage.locking",
    "recprep.manifest": "recprep.storage.manifest",
    "recprep.mixing": "recprep.read.mixing",
    "recprep.prefetch": "recprep.read.prefetch",
    "recprep.prepare": "recprep.write.prepare",
    "recprep.progress": "recprep.write.progress",
    "recprep.read.fileindex": "recprep.read.placing",
    "recprep.read.files": "recprep.read.sources",
    "recprep.reader": "recprep.read.reader",
    "recprep.sharding": "recprep.read.ranks",
    "recprep.shards": "recprep.storage.shardnames",
    "recprep.shuffling": "recprep.read.shuffling",
    "recprep.sideindex": "recprep.storage.sideindex",
    "recprep.sources": "recprep.read.sources",
    "recprep.staging": "recprep.storage.staging",
    "recprep.taskqueue": "recprep.read.taskqueue",
    "recprep.tasks": "recprep.write.plan",
    "recprep.writing": "recprep.write.loop",
}

#: names of ``recprep`` that are functions, whose old module paths are still imported:
#: the import must not put the module in the function's place
FUNCTIONS = ("convert", "prepare")


class Package(ModuleType):
    """The ``recprep`` package's class: an import of ``recprep.convert`` (an old module
    path) sets the attribute ``convert`` of the package to that module, as any import of
    a submodule does — here it is kept the function."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FUNCTIONS and isinstance(value, ModuleType):
            if callable(self.__dict__.get(name)):
                return
            value = getattr(value, name)  # not imported yet (a lazy name): the function
        super().__setattr__(name, value)


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: Any) -> ModuleType:
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        pass


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds a moved module at its new path (last on ``sys.meta_path``)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        new = MOVED.get(fullname)
        if new is None:
            return None
        warn(MovedModuleWarning(f"{fullname} moved to {new}; import it from there (the old "
                                "path goes in the next release)"))
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install(package: ModuleType) -> None:
    """Put :class:`MovedFinder` last on ``sys.meta_path`` (once), and make ``package``
    (``recprep``) a :class:`Package`."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
    package.__class__ = Package
