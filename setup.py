"""recprep's build: pyproject.toml says everything but the optional C kernels.

``recprep._core._kernels`` (``src/recprep/_core/kernels.c``, no library but Python's) is
optional: where no C compiler is, the install goes on without it and recprep runs on numpy
alone, with the same results (``recprep._core.native``).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("recprep._core._kernels", ["src/recprep/_core/kernels.c"],
                             optional=True)])
