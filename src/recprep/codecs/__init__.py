"""Codecs: instance <-> record bytes, in a registry keyed by name.

Built in: ``"recprep"`` (typed, exact, the default), ``"pickle"`` (PaddlePaddle v2's
records), ``"raw"`` (bytes as they are) and ``"example"`` (``tf.train.Example``).

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

from ..errors import InvalidArgumentError
from .base import Codec

__all__ = ["Codec", "available_codecs", "get_codec", "register_codec"]

_REGISTRY: dict[str, Callable[[], Codec]] = {}


def register_codec(name: str, factory: Callable[[], Codec], *, replace: bool = False) -> None:
    """Make ``codec=name`` mean ``factory()``; ``factory`` is usually the codec class."""
    if not replace and name in _REGISTRY:
        raise InvalidArgumentError(
            f"a codec named {name!r} is already registered; pass replace=True to replace it"
        )
    _REGISTRY[name] = factory


def available_codecs() -> list[str]:
    """The registered codec names, sorted."""
    return sorted(_REGISTRY)


def get_codec(codec: str | Codec) -> Codec:
    """Return the codec named ``codec`` (a :class:`Codec` instance is returned as is)."""
    if isinstance(codec, Codec):
        return codec
    try:
        factory = _REGISTRY[codec]
    except (KeyError, TypeError):
        raise InvalidArgumentError(
            f"unknown codec {codec!r}; valid codecs are {available_codecs()} "
            "(or pass a recprep.codecs.Codec instance)"
        ) from None
    return factory()


def _register_builtins() -> None:
    from .example import ExampleCodec
    from .pickle import PickleCodec
    from .raw import RawCodec
    from .recprep import RecprepCodec

    for cls in (RecprepCodec, PickleCodec, RawCodec, ExampleCodec):
        register_codec(cls.name, cls)


_register_builtins()
