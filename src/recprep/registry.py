"""The plug-in registries: formats, codecs, compressors, executors and commands, each a
:class:`Registry` keyed by name, with lazy dotted paths, install hints and entry points.

Its home is :mod:`recprep._core.registry` (the base layer); this is its public face.

>>> from recprep.registry import registries
>>> registries()["recprep.formats"].kind
'format'
"""

from __future__ import annotations

from ._core.registry import Registry, import_path, registries

__all__ = ["Registry", "import_path", "registries"]
