"""Codecs: instance <-> record bytes, in a registry keyed by name.

Built in: ``"recprep"`` (typed, exact, the default), ``"pickle"`` (PaddlePaddle v2's
records), ``"raw"`` (bytes as they are) and ``"example"`` (``tf.train.Example``).

======================  ==========================================================
module or package       what it holds
======================  ==========================================================
``base``                :class:`Codec`, the contract and its capability hooks
``blocks``              a block's records made at once, as ``bytes`` or placed
                        straight into a writer's buffer (``Codec.encode_block``)
``recprep/``            the ``"recprep"`` codec (a package: its docstring maps it)
``example/``            the ``"example"`` codec, and the columnar API Spark uses
``pickle``, ``raw``     the ``"pickle"`` and ``"raw"`` codecs
``features``            :class:`~recprep.codecs.features.Feature` and checking
                        instances against features
``schema``              a codec configured from a manifest's ``schema``
``guess``               which codec a record's first byte points to (error advice)
======================  ==========================================================

Example
-------
>>> from recprep.codecs import available_codecs, get_codec
>>> available_codecs()
['example', 'pickle', 'raw', 'recprep']
>>> get_codec("recprep").decode(get_codec("recprep").encode((1, "a")))
(1, 'a')
"""

from __future__ import annotations

from collections.abc import Callable

from .._core.registry import Registry
from ..errors import InvalidArgumentError
from .base import Codec

__all__ = ["Codec", "available_codecs", "get_codec", "register_codec"]


def _check_codec_factory(name: str, factory: Callable[[], Codec]) -> None:
    if not callable(factory):
        raise InvalidArgumentError(
            f"codec {name!r} must be a Codec subclass or a function returning a Codec, "
            f"got {factory!r}"
        )


_CODECS: Registry[Callable[[], Codec]] = Registry(
    "codec", group="recprep.codecs", check=_check_codec_factory,
    hint=" (or pass a recprep.codecs.Codec instance)",
)


def register_codec(
    name: str, factory: Callable[[], Codec] | str, *, replace: bool = False
) -> None:
    """Make ``codec=name`` mean ``factory()``; ``factory`` is usually the codec class, or
    its dotted path (``"package.module:MyCodec"``, imported on first use). A name already
    registered raises :class:`~recprep.errors.InvalidArgumentError` unless ``replace=True``.
    """
    _CODECS.register(name, factory, replace=replace)


def available_codecs() -> list[str]:
    """The registered codec names, sorted (plug-ins too; none is imported)."""
    return _CODECS.available()


def get_codec(codec: str | Codec) -> Codec:
    """Return the codec named ``codec`` (a :class:`Codec` instance is returned as is)."""
    if isinstance(codec, Codec):
        return codec
    return _CODECS.get(codec)()


for _name, _path in (
    ("recprep", "recprep.codec:RecprepCodec"),
    ("pickle", "pickle:PickleCodec"),
    ("raw", "raw:RawCodec"),
    ("example", "example.codec:ExampleCodec"),
):
    register_codec(_name, f"{__name__}.{_path}")
