"""The registry behind every plug-in point, tested through each registry it backs.

Every test is parametrized from :func:`recprep.registry.registries`, so a new plug-in
point is tested by being a :class:`~recprep.registry.Registry`. Plug-ins are real entry
points: a ``*.dist-info`` directory written into a temporary directory on ``sys.path``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
import warnings
from pathlib import Path

import pytest

import recprep.cli
import recprep.codecs
import recprep.containers
import recprep.containers.compression
import recprep.executors
from recprep.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    PluginError,
    PluginWarning,
)
from recprep.registry import Registry, registries

#: group -> (the built-in names, the source of a module whose ``OBJ`` is a valid entry
#: named NAME); a command's entry is the module itself
PLUGINS = {
    "recprep.formats": (
        ["recordio", "recordio-legacy", "tfrecord"],
        """
        from recprep.containers.recordio import RecordIOFormat
        class OBJ(RecordIOFormat):
            name = "NAME"
        """,
    ),
    "recprep.codecs": (
        ["example", "pickle", "raw", "recprep"],
        """
        from recprep.codecs.raw import RawCodec
        class OBJ(RawCodec):
            name = "NAME"
        """,
    ),
    "recprep.executors": (
        ["processes", "ray", "serial", "spark"],
        """
        from recprep.executors.serial import SerialBackend
        class OBJ(SerialBackend):
            pass
        """,
    ),
    "recprep.compressions": (
        ["gzip", "none", "snappy-framed", "snappy-raw", "zlib"],
        """
        from recprep.containers.compression import Compression, get_compression
        _none = get_compression("none")
        OBJ = Compression("NAME", _none.compress, _none.decompress)
        """,
    ),
    "recprep.commands": (
        ["cp", "head", "ls", "prepare", "verify"],
        """
        HELP = "a test command"
        def add_arguments(parser):
            pass
        def run(args):
            return 0
        """,
    ),
}


def test_every_plug_in_point_is_a_registry():
    assert set(registries()) == set(PLUGINS)


@pytest.fixture(params=sorted(PLUGINS))
def registry(request) -> Registry:
    """A registry; names a test adds are removed, and plug-ins forgotten, afterwards."""
    reg = registries()[request.param]
    before = set(reg.names())
    yield reg
    for name in set(reg.names()) - before:
        reg.pop(name)
    reg.reset_plugins()


class Plugins:
    """Writes modules and distributions into a directory on ``sys.path``."""

    def __init__(self, root: Path, registry: Registry) -> None:
        self.root = root
        self.registry = registry
        self.modules: list[str] = []

    def module(self, name: str) -> str:
        """A new module whose entry is valid as ``name``; returns its dotted path."""
        module = f"recprep_test_{uuid.uuid4().hex[:8]}"
        source = textwrap.dedent(PLUGINS[self.registry.group][1]).replace("NAME", name)
        (self.root / f"{module}.py").write_text(source)
        self.modules.append(module)
        return module if self.registry.kind == "command" else f"{module}:OBJ"

    def distribution(self, entry_points: dict[str, str]) -> str:
        """A distribution declaring ``entry_points`` (name -> value) in the registry's
        group; returns its name."""
        dist = f"recprep-test-{uuid.uuid4().hex[:8]}"
        info = self.root / f"{dist.replace('-', '_')}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = [f"[{self.registry.group}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        self.registry.reset_plugins()
        return dist


@pytest.fixture
def plugins(registry, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Plugins(tmp_path, registry)
    yield made
    for module in made.modules:
        sys.modules.pop(module, None)


def _unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:6]}"


def test_builtins_are_listed_sorted(registry):
    names = registry.available()
    assert names == sorted(names) and set(PLUGINS[registry.group][0]) <= set(names)


def test_an_unknown_name_lists_the_valid_ones(registry):
    with pytest.raises(InvalidArgumentError, match=rf"unknown {registry.kind} 'nope'; valid "
                       rf"{registry.plural} are \['") as err:
        registry.get("nope")
    for name in PLUGINS[registry.group][0]:
        assert repr(name) in str(err.value)
    with pytest.raises(InvalidArgumentError, match="valid"):
        registry.get(None)  # type: ignore[arg-type]


def test_a_dotted_path_is_imported_on_first_use(registry, plugins):
    name = _unique("lazy")
    path = plugins.module(name)
    registry.register(name, path)
    module = path.partition(":")[0]
    assert name in registry.available() and module not in sys.modules
    value = registry.get(name)
    assert module in sys.modules
    assert value is (sys.modules[module] if ":" not in path else sys.modules[module].OBJ)
    assert registry.get(name) is value


def test_a_lazy_loader_is_called_on_first_use(registry, plugins):
    name = _unique("loader")
    path = plugins.module(name)
    calls = []

    def load():
        calls.append(1)
        from recprep.registry import import_path

        return import_path(path)

    registry.register(name, load, lazy=True)
    assert calls == []
    assert registry.get(name) is registry.get(name) and calls == [1]


def test_a_missing_engine_names_the_extra(registry):
    name = _unique("engine")
    registry.register(name, "recprep_no_such_engine.sub:Thing", extra="fancy")
    with pytest.raises(MissingDependencyError, match=r"pip install 'recprep\[fancy\]'") as err:
        registry.get(name)
    assert err.value.package == "recprep_no_such_engine" and err.value.extra == "fancy"
    assert f"{registry.kind}={name!r}" in str(err.value)


def test_a_taken_name_is_refused_unless_replace(registry, plugins):
    taken = PLUGINS[registry.group][0][0]
    before = registry.get(taken)
    with pytest.raises(InvalidArgumentError, match=rf"an? {registry.kind} named {taken!r} is "
                       r"already registered \(.+\); pass replace=True"):
        registry.register(taken, plugins.module(taken))
    assert registry.get(taken) is before
    name = _unique("mine")
    registry.register(name, plugins.module(name))
    first = registry.get(name)
    registry.register(name, plugins.module(name), replace=True)
    assert registry.get(name) is not first


def test_an_entry_that_is_not_of_the_kind_is_refused(registry, plugins):
    with pytest.raises(InvalidArgumentError, match=registry.kind):
        registry.register(_unique("bad"), 42, replace=True)  # type: ignore[arg-type]
    name = _unique("bad")
    registry.register(name, "builtins:object" if registry.kind != "command" else "json")
    if registry.kind in ("codec", "executor"):  # any callable is a factory
        registry.get(name)
    else:
        with pytest.raises(InvalidArgumentError, match=repr(name)):
            registry.get(name)


def test_an_entry_point_is_a_plug_in(registry, plugins):
    name = _unique("plug")
    path = plugins.module(name)
    plugins.distribution({name: path})
    module = path.partition(":")[0]
    assert name in registry.available() and module not in sys.modules  # listed, not loaded
    order = registry.names()
    assert order[-1] == name  # plug-ins come after the built-ins
    assert all(order.index(b) < order.index(name) for b in PLUGINS[registry.group][0])
    value = registry.get(name)
    assert module in sys.modules and dict(registry.items())[name] is value
    registry.reset_plugins()
    sys.path.remove(str(plugins.root))
    assert name not in registry.available()


def test_a_plug_in_is_looked_up_when_an_unknown_name_is_asked_for(registry, plugins):
    name = _unique("late")
    path = plugins.module(name)
    assert name not in registry.available()  # the entry points are read now, and kept
    plugins.distribution({name: path})  # (this resets the cache)
    assert registry.get(name) is not None


def test_a_broken_plug_in_warns_naming_its_distribution(registry, plugins):
    name = _unique("broken")
    dist = plugins.distribution({name: "recprep_test_no_such_module:OBJ"})
    assert name in registry.available()
    with pytest.raises(PluginError, match=rf"{registry.kind} {name!r} of {dist} 1\.0") as err:
        registry.get(name)
    assert err.value.distribution == f"{dist} 1.0" and err.value.plugin == name
    assert isinstance(err.value.original, ImportError)
    with pytest.warns(PluginWarning, match=rf"{dist} 1\.0 .*fails to load"):
        loaded = dict(registry.items())
    assert name not in loaded and set(PLUGINS[registry.group][0]) <= set(loaded)


def test_a_plug_in_loading_the_wrong_kind_is_a_plug_in_error(registry, plugins):
    name = _unique("wrong")
    path = "builtins:object" if registry.kind != "command" else "json"
    if registry.kind in ("codec", "executor"):
        path = "builtins:len"  # callable: let it be, the factory call says the rest
    dist = plugins.distribution({name: path})
    if registry.kind in ("codec", "executor"):
        assert registry.get(name) is len
        return
    with pytest.raises(PluginError, match=dist):
        registry.get(name)


def test_a_plug_in_cannot_take_a_registered_name(registry, plugins):
    taken = PLUGINS[registry.group][0][0]
    before = registry.get(taken)
    dist = plugins.distribution({taken: plugins.module(taken)})
    with pytest.warns(PluginWarning, match=rf"{dist} 1\.0 registers .*{taken!r}.*ignored"):
        registry.available()
    assert registry.get(taken) is before


# -- what uses the registries ---------------------------------------------------------------


def test_public_functions_reach_the_plug_ins(tmp_path, monkeypatch):
    from recprep import available_codecs, get_codec

    reg = registries()["recprep.codecs"]
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Plugins(tmp_path, reg)
    try:
        made.distribution({"shout": made.module("shout")})
        assert "shout" in available_codecs() and get_codec("shout").encode(b"x") == b"x"
    finally:
        sys.path.remove(str(tmp_path))
        reg.reset_plugins()
    assert "shout" not in available_codecs()


def test_detection_tries_formats_in_registration_order(tmp_path, monkeypatch):
    from recprep.containers import detect_format

    reg = registries()["recprep.formats"]
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Plugins(tmp_path, reg)
    try:
        made.distribution({"zz-recordio": made.module("zz-recordio")})
        assert reg.names() == ["recordio", "recordio-legacy", "tfrecord", "zz-recordio"]
        assert detect_format(bytes.fromhex("04030201")).name == "recordio"  # not the plug-in
    finally:
        sys.path.remove(str(tmp_path))
        reg.reset_plugins()


def test_a_broken_command_plug_in_leaves_the_cli_working(tmp_path, monkeypatch, capsys):
    reg = registries()["recprep.commands"]
    monkeypatch.syspath_prepend(str(tmp_path))
    made = Plugins(tmp_path, reg)
    try:
        dist = made.distribution({"kaputt": "recprep_test_no_such_module",
                                  "hello": made.module("hello")})
        with pytest.warns(PluginWarning, match=dist):
            assert recprep.cli.main(["hello"]) == 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PluginWarning)
            assert recprep.cli.main(["kaputt"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
        reg.reset_plugins()
    assert "invalid choice: 'kaputt'" in capsys.readouterr().err


def test_import_recprep_imports_no_engine_codec_or_plug_in(tmp_path):
    """Built-ins load on first use; entry points are not even read by ``import recprep``,
    so a broken plug-in can't break it."""
    info = tmp_path / "recprep_test_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: recprep-test-broken\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(
        "".join(f"[{group}]\nbroken = recprep_test_no_such_module:OBJ\n" for group in PLUGINS)
    )
    code = textwrap.dedent("""
        import sys, warnings
        import recprep
        lazy = ["recprep.containers.tfrecord", "recprep.codecs.example",
                "recprep.codecs.pickle", "recprep.codecs.raw", "recprep.executors.serial",
                "recprep.executors.futures", "recprep.executors.spark", "recprep.executors.ray",
                "recprep.cli"]
        print(sorted(m for m in lazy if m in sys.modules))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            print(recprep.available_formats(), recprep.get_format("tfrecord").name)
            print(recprep.containers.detect_format(bytes.fromhex("04030201")).name)
            print(recprep.containers.detect_format(b"not a shard at all"))
        print(sorted({type(w.message).__name__ for w in seen}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.splitlines() == [
        "[]",
        "['broken', 'recordio', 'recordio-legacy', 'tfrecord'] tfrecord",
        "recordio",
        "None",
        "['PluginWarning']",
    ], done.stderr
