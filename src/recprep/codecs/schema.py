"""A codec configured from a manifest's ``schema``: :func:`codec_with_schema`.

A manifest records the schema its codec wrote with (feature shapes and dtypes, for codecs
that need them); a reader taking the codec from the manifest configures it with that
schema. The schema is untrusted input like the rest of the manifest: one the codec can't
use is a damaged manifest.
"""

from __future__ import annotations

from typing import Any

from ..errors import CorruptDataError
from .base import Codec

__all__ = ["MAX_DIMS", "codec_with_schema"]

#: the most dimensions a feature's shape in a schema may have
MAX_DIMS = 32
_INT_BOUND = 1 << 63


def _schema_repr(value: Any) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) else (
        type(value).__name__)
    return text if len(text) <= 60 else text[:57] + "..."


def _schema_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _INT_BOUND:
        raise ValueError(f"{what} must be an int in [0, 2**63), found {_schema_repr(value)}")
    return value


def _check_shapes(schema: dict[str, Any]) -> None:
    """The shapes of a schema's ``features`` (recprep's convention, ``Feature.to_json``)
    must be arrays numpy can make: at most :data:`MAX_DIMS` dimensions, each ``null`` or
    an int in ``[0, 2**63)``, whose product is below 2**63."""
    features = schema.get("features")
    for feature in features if isinstance(features, list) else ():
        shape = feature.get("shape") if isinstance(feature, dict) else None
        if shape is None:
            continue
        if not isinstance(shape, list) or len(shape) > MAX_DIMS:
            raise ValueError(f"a feature's shape must be a list of at most {MAX_DIMS} "
                             f"dimensions, found {_schema_repr(shape)}")
        size = 1
        for dim in shape:
            if dim is not None:
                size *= _schema_int(dim, "a dimension")
        if size >= _INT_BOUND:
            raise ValueError(f"a feature's shape {shape} has {size} elements, past 2**63")


def codec_with_schema(codec: Codec, schema: dict[str, Any], path: str | None) -> Codec:
    """``codec.with_schema(schema)`` for a schema read from the manifest at ``path``: a
    schema the codec can't use raises :class:`~recprep.errors.CorruptDataError` naming
    the manifest, whatever the codec raised.

    >>> from recprep.codecs import get_codec
    >>> codec_with_schema(get_codec("example"), {"features": 3}, "p.manifest.json")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recprep.errors.CorruptDataError: p.manifest.json: the manifest's schema is not one ...
    """
    try:
        _check_shapes(schema)
        return codec.with_schema(schema)
    except CorruptDataError:
        raise
    except Exception as err:
        raise CorruptDataError(
            f"the manifest's schema is not one codec {codec.name!r} can read "
            f"({type(err).__name__}: {err})",
            path=path,
        ) from None
