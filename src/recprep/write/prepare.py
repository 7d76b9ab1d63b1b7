"""``prepare``: the data-preparation job — a model file and a raw data directory in,
shards out (the ElasticDL design).

The model file is the one users train with. It defines

* ``feature_columns`` — what each instance holds: :class:`~recprep.codecs.features.Feature`
  objects, or TensorFlow ``numeric_column``-style objects (``key``, ``shape``, ``dtype``);
* ``prepare_data_for_a_single_file(filename)`` — one raw file to one instance (a tuple in
  feature order, a dict by feature name, a ``tf.train.Example`` or its bytes), an iterator
  or generator (or list) of instances, or ``None`` to skip the file.

Each raw file is one partition (``recprep.partitions``): it is read by a task where the
task runs, with the instances checked against ``feature_columns`` there.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import logging
import os
import posixpath
import tempfile
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._core.arguments import checked
from .._core.names import CodecName, CompressorName, ExecutorName, FormatName
from ..codecs import Codec, get_codec
from ..codecs.features import Feature, as_features, check_instance
from ..errors import InvalidArgumentError, ModelFileError, NotFoundError, RawFileError, RecprepError
from ..storage.fs import display, resolve
from .convert import ConvertResult, convert
from .plan import partitions
from .progress import Progress

__all__ = ["ModelFileError", "PrepareResult", "RawFileError", "prepare"]

log = logging.getLogger("recprep")

FUNCTION = "prepare_data_for_a_single_file"
FEATURES = "feature_columns"
REPORT_NAME = "{prefix}.skipped.json"


# -- the model file ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFile:
    """A model file's source, loaded once per process wherever it is needed."""

    path: str
    source: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def load(self) -> types.ModuleType:
        """The model file as a module (cached per process by content)."""
        cached = _MODULES.get(self.digest)
        if cached is not None:
            return cached
        module = types.ModuleType(f"recprep_model_{self.digest}")
        module.__file__ = self.path
        try:
            code = compile(self.source, self.path, "exec")
            exec(code, module.__dict__)  # the user's own model file, as `python FILE` would
        except Exception as err:
            raise ModelFileError(
                self.path, f"loading it failed with {type(err).__name__}: {err}"
            ) from err
        if not callable(getattr(module, FUNCTION, None)):
            raise ModelFileError(
                self.path,
                f"it must define a function {FUNCTION}(filename) returning an instance, "
                "an iterator of instances, or None",
            )
        _MODULES[self.digest] = module
        return module

    def features(self) -> list[Feature] | None:
        columns = getattr(self.load(), FEATURES, None)
        if columns is None:
            return None
        try:
            return as_features(columns)
        except RecprepError as err:
            raise ModelFileError(self.path, f"{FEATURES}: {err}") from None


_MODULES: dict[str, types.ModuleType] = {}


def read_model_file(model_file: str, storage_options: Mapping[str, Any] | None) -> ModelFile:
    fs, path = resolve(model_file, storage_options)
    try:
        source = fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        raise NotFoundError(display(fs, path), "no such model file") from None
    except UnicodeDecodeError as err:
        raise ModelFileError(display(fs, path), f"not UTF-8 Python source ({err})") from None
    return ModelFile(display(fs, path), source)


# -- raw files -----------------------------------------------------------------------------


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def list_raw_files(
    fs: Any, root: str, include: Sequence[str] | str | None = None
) -> list[str]:
    """Every visible file under ``root`` (recursively), sorted; filtered by ``include``
    globs matched against the path relative to ``root`` or the file name."""
    if not fs.isdir(root):
        raise NotFoundError(display(fs, root), "the raw data directory does not exist")
    patterns = [include] if isinstance(include, str) else list(include or [])
    found = []
    for path in sorted(fs.find(root, withdirs=False)):
        relative = posixpath.relpath(path, root)
        if _hidden(relative):
            continue
        name = posixpath.basename(path)
        if patterns and not any(
            fnmatch.fnmatchcase(relative, p) or fnmatch.fnmatchcase(name, p) for p in patterns
        ):
            continue
        found.append(path)
    if not found:
        what = f" matching {patterns}" if patterns else ""
        raise NotFoundError(display(fs, root), f"the raw data directory has no files{what}")
    return found


@contextlib.contextmanager
def _local_copy(fs: Any, path: str) -> Iterator[str]:
    """A local path for ``path``: itself on a local filesystem, else a temporary copy."""
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    if protocol in ("file", "local"):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="recprep-raw-") as tmp:
        local = os.path.join(tmp, posixpath.basename(path))
        fs.get_file(path, local)
        yield local


def _returned_instances(result: Any) -> Iterator[Any]:
    """What the user's function returned, as instances."""
    if result is None:
        return iter(())
    if isinstance(result, (types.GeneratorType, Iterator, list)):
        return iter(result)
    return iter((result,))  # one instance: a tuple, dict, Example, bytes, array...


class RawFileReader:
    """The reader of one raw file (a partition of the job); records skipped files in
    ``notes`` when ``on_error`` is ``"skip"``."""

    def __init__(
        self,
        model: ModelFile,
        fs: Any,
        path: str,
        features: list[Feature] | None,
        on_error: str,
    ) -> None:
        self.model, self.fs, self.path = model, fs, path
        self.features, self.on_error = features, on_error
        self.notes: list[dict[str, Any]] = []

    def __call__(self) -> Iterator[Any]:
        self.notes = []
        return self._read()

    def _check(self, instance: Any, index: int) -> Any:
        if self.features is None or hasattr(instance, "SerializeToString"):
            return instance
        if isinstance(instance, (bytes, bytearray, memoryview)):
            return instance
        try:
            check_instance(self.features, instance)
        except RecprepError as err:
            raise RawFileError(self._shown, str(err), index) from None
        return instance

    @property
    def _shown(self) -> str:
        return display(self.fs, self.path)

    def _read(self) -> Iterator[Any]:
        function = getattr(self.model.load(), FUNCTION)
        if self.on_error == "fail":
            with _local_copy(self.fs, self.path) as local:
                index = -1
                try:
                    for index, instance in enumerate(_returned_instances(function(local))):
                        yield self._check(instance, index)
                except RecprepError:
                    raise
                except Exception as err:
                    raise RawFileError(
                        self._shown, f"{FUNCTION} raised {type(err).__name__}: {err}",
                        None if index < 0 else index + 1,
                    ) from err
            return
        # skip mode: the whole file is checked before any of it is written
        try:
            with _local_copy(self.fs, self.path) as local:
                returned = _returned_instances(function(local))
                instances = [self._check(x, i) for i, x in enumerate(returned)]
        except Exception as err:
            reason = err.reason if isinstance(err, RawFileError) else (
                f"{FUNCTION} raised {type(err).__name__}: {err}"
            )
            at = err.instance_index if isinstance(err, RawFileError) else None
            self.notes.append({"file": self._shown, "instance": at, "reason": reason})
            log.warning("recprep: skipping %s: %s", self._shown, reason)
            return
        yield from instances


# -- the job -------------------------------------------------------------------------------


@dataclass
class PrepareResult:
    """What :func:`prepare` did: the conversion, the files read and the files skipped."""

    convert: ConvertResult
    files: int
    skipped: list[dict[str, Any]] = field(default_factory=list)
    report_path: str | None = None

    def summary(self) -> str:
        c = self.convert
        lines = [
            f"files read:  {self.files - len(self.skipped)} of {self.files}",
            f"instances:   {c.num_records}",
            f"shards:      {len(c.paths)} in {c.output_path}",
            f"bytes:       {c.total_bytes}",
            f"skipped:     {len(self.skipped)} file(s)"
            + (f", report in {self.report_path}" if self.report_path else ""),
            f"time:        {c.elapsed:.2f} s",
        ]
        return "\n".join(lines)


def _choose_executor(
    mode: str, executor: str | None, master: str | None, address: str | None,
    conf: Mapping[str, Any] | None, num_workers: int, connect_timeout: float | None = None,
) -> tuple[str, dict[str, Any]]:
    if mode not in ("local", "cluster"):
        raise InvalidArgumentError(f"mode must be 'local' or 'cluster', got {mode!r}")
    chosen = executor or ("processes" if mode == "local" else "spark")
    options: dict[str, Any] = {}
    if chosen == "spark":
        if master:
            options["master"] = master
        elif mode == "local":
            options["master"] = f"local[{num_workers}]"
        if conf:
            options["conf"] = dict(conf)
    elif chosen == "ray":
        if address:
            options["address"] = address
        elif mode == "local":
            options.update(address="local", num_cpus=num_workers)
        options.update(conf or {})
    elif master or address or conf:
        raise InvalidArgumentError(
            f"--master/--address/--conf go with the spark or ray executors, not {chosen!r}"
        )
    if connect_timeout is not None and chosen in ("spark", "ray"):
        options["connect_timeout"] = connect_timeout
    return chosen, options


@checked
def prepare(
    model_file: str | os.PathLike[str],
    raw_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    mode: Literal["local", "cluster"] = "local",
    *,
    num_workers: int | None = None,
    num_shards: int | None = None,
    name_prefix: str = "data",
    executor: ExecutorName | str | None = None,
    master: str | None = None,
    address: str | None = None,
    conf: Mapping[str, Any] | None = None,
    codec: CodecName | str | Codec | None = None,
    format: FormatName | str = "recordio",
    compressor: CompressorName | str | None = None,
    include: Sequence[str] | str | None = None,
    on_error: Literal["fail", "skip"] = "fail",
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: Any = None,
    resume: bool = False,
    connect_timeout: float | None = None,
) -> PrepareResult:
    """Run the data-preparation job: every raw file through the model file's function,
    into ``num_shards`` shards in ``output_dir``.

    Parameters
    ----------
    model_file
        A Python file defining ``prepare_data_for_a_single_file(filename)`` and, usually,
        ``feature_columns``.
    raw_dir
        The raw data directory (local or an fsspec URL), traversed recursively in sorted
        order; hidden files and directories are skipped. Each file is one partition.
        Remote files are handed to the function as a local temporary copy.
    output_dir
        Where the shards go (local or an fsspec URL).
    mode
        ``"local"``: this machine, ``num_workers`` processes. ``"cluster"``: Spark (default)
        or Ray (``executor="ray"``) at ``master`` / ``address``.
    num_workers
        Parallelism (default: this machine's CPU count).
    num_shards
        Default ``4 * num_workers``.
    codec
        Default ``"example"`` (tf.train.Example records, what ElasticDL trainers read) when
        the model file has ``feature_columns``, else ``"recprep"``.
    format
        ``"recordio"`` (default, what ElasticDL reads) or ``"tfrecord"`` (with
        ``compressor`` ``"none"``, ``"gzip"`` or ``"zlib"``), as for :func:`~recprep.convert`.
    include
        Glob(s) a file's relative path or name must match (``"*.png"``).
    on_error
        ``"fail"`` (default): the first bad file stops the job, naming the file, the
        instance and what was wrong. ``"skip"``: bad files are skipped and listed in a
        report, ``{name_prefix}.skipped.json`` next to the output (and in the result).
    resume
        Complete a run that was killed, reusing the files it finished (see
        :func:`~recprep.convert`).
    connect_timeout
        Seconds to wait for the Spark master (``spark://``) or Ray ``address`` to answer
        (default 60) before :class:`~recprep.errors.ClusterUnreachableError`.

    Examples
    --------
    >>> import fsspec
    >>> fs = fsspec.filesystem("memory")
    >>> fs.pipe({"/doc-prep/model.py": b'''
    ... from recprep import Feature
    ... feature_columns = [Feature("n", "int64")]
    ... def prepare_data_for_a_single_file(filename):
    ...     return (int(open(filename).read()),)
    ... ''', "/doc-prep/raw/a.txt": b"1", "/doc-prep/raw/b/c.txt": b"2"})
    >>> result = prepare("memory:///doc-prep/model.py", "memory:///doc-prep/raw",
    ...                  "memory:///doc-prep/out", num_workers=1, executor="serial")
    >>> from recprep import RecordIO
    >>> [int(x["n"]) for x in RecordIO("memory:///doc-prep/out/data-*")()]
    [1, 2]
    """
    if on_error not in ("fail", "skip"):
        raise InvalidArgumentError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    model_file, raw_dir, output_dir = (os.fspath(p) for p in (model_file, raw_dir, output_dir))
    workers = num_workers or os.cpu_count() or 1
    chosen, options = _choose_executor(
        mode, executor, master, address, conf, workers, connect_timeout
    )
    model = read_model_file(model_file, storage_options)
    features = model.features()
    codec_obj = _codec_for(codec, features)
    fs, root = resolve(raw_dir, storage_options)
    files = list_raw_files(fs, root, include)
    readers = [RawFileReader(model, fs, path, features, on_error) for path in files]
    log.info("recprep: preparing %d file(s) from %s with %s", len(files), raw_dir, chosen)
    shards = num_shards or 4 * workers
    bar = Progress(progress, total_shards=shards, desc=name_prefix, tasks_total=len(files))
    result = convert(
        output_dir, partitions(readers), shards, name_prefix, codec=codec_obj, format=format,
        compressor=compressor, overwrite=overwrite, storage_options=storage_options,
        progress=bar, executor=chosen, num_workers=workers, executor_options=options,
        resume=resume,
    )
    skipped = list(result.notes)
    out_fs, out = resolve(output_dir, storage_options)
    report_path = _report_skipped(out_fs, posixpath.join(
        out, REPORT_NAME.format(prefix=name_prefix)), skipped, resume)
    return PrepareResult(result, len(files), skipped, report_path)


def _codec_for(codec: str | Codec | None, features: list[Feature] | None) -> Codec:
    """``prepare``'s codec: the one asked for, else ``"example"`` (of the model's
    ``feature_columns``) when the model file has them, else ``"recprep"``."""
    if codec is None:
        codec = "example" if features is not None else "recprep"
    made = get_codec(codec)
    if features is not None and isinstance(codec, str):
        # a codec named, not built: the model's columns are its features (when it has any)
        made = made.with_features(features)
    return made


def _report_skipped(
    fs: Any, report: str, skipped: list[dict[str, Any]], resume: bool
) -> str | None:
    """Write the report of the files skipped (none: remove an earlier run's, which
    would be wrong now); its path, if there is one."""
    if skipped:
        fs.pipe_file(report, (json.dumps(skipped, indent=2) + "\n").encode())
        return display(fs, report)
    if not resume and fs.exists(report):  # an earlier run's report would be wrong now
        fs.rm(report)
    return None
