"""Seals: what makes a staging side file trusted — the user's resume key and an HMAC.

``options.json``, ``done-*.json`` and ``commit.json`` (:mod:`recprep.storage.staging`) are
input, not trusted (the threat model is in ``docs/reliability.md``): each carries an
HMAC-SHA256 made with the user's resume key (:func:`resume_key`, kept outside the output)
over its content and the staging directory it belongs to (:func:`seal`, checked by
:func:`unseal`), and every name it holds must be one plain file name (:func:`safe_name`).
A side file that fails either check raises :class:`~recprep.errors.UntrustedFileError`.

Example
-------
>>> data = seal({"kind": "run", "staging": "/out/.recprep-staging-p", "fingerprint": "x"})
>>> unseal(data, kind="run", staging="/out/.recprep-staging-p", shown="options.json")["fingerprint"]
'x'
>>> unseal(data.replace(b'"x"', b'"y"'), kind="run", staging="/out/.recprep-staging-p",
...        shown="options.json")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
recprep.errors.UntrustedFileError: ...its seal doesn't match...
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

from ..errors import UntrustedFileError

__all__ = ["KEY_ENV", "resume_key", "safe_name", "seal", "unseal"]

log = logging.getLogger("recprep")

KEY_ENV = "RECPREP_RESUME_KEY"
_RESERVED = (".recprep-",)  # names a side file may never make recprep touch


_KEYS: dict[str, bytes] = {}


def resume_key() -> bytes:
    """The secret that seals side files: ``$RECPREP_RESUME_KEY`` (any text; set the same
    on every machine that resumes), else a random key kept, readable by its user only, in
    ``$XDG_CACHE_HOME/recprep/resume.key`` (``~/.cache/...``), made on first use. Where
    that can't be written, a key of this process: a later resume then redoes the work."""
    text = os.environ.get(KEY_ENV)
    if text:
        return hashlib.sha256(b"recprep-resume-key\0" + text.encode()).digest()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "recprep", "resume.key")
    if path not in _KEYS:
        _KEYS[path] = _load_or_make_key(path)
    return _KEYS[path]


def _load_or_make_key(path: str) -> bytes:
    for _ in range(2):
        try:
            with open(path, "rb") as f:  # not a user path: recprep's own key file
                key = f.read()
            if len(key) >= 32:
                return key
        except OSError:
            pass
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
            try:
                os.link(tmp, path)  # create-if-absent: two processes agree on one key
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
        except OSError as err:
            log.info("recprep: can't keep a resume key in %s (%s); staged work of this "
                     "process can't be reused by another", path, err)
            break
    return _KEYS.setdefault("", secrets.token_bytes(32))


def _mac(doc: Mapping[str, Any]) -> str:
    body = json.dumps({k: v for k, v in doc.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":"))
    return hmac.new(resume_key(), body.encode(), hashlib.sha256).hexdigest()


def seal(doc: dict[str, Any]) -> bytes:
    """``doc`` with its HMAC, as the bytes of a side file."""
    return json.dumps({**doc, "mac": _mac(doc)}, sort_keys=True).encode()


def unseal(data: bytes, *, kind: str, staging: str, shown: str) -> dict[str, Any]:
    """The content of a side file of ``kind`` written for ``staging`` with this user's
    key; anything else raises :class:`~recprep.errors.UntrustedFileError`."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("mac"), str):
        raise UntrustedFileError(shown, "not a side file recprep wrote (no valid seal)")
    if not hmac.compare_digest(doc["mac"].encode(), _mac(doc).encode()):  # (any text)
        raise UntrustedFileError(
            shown, "its seal doesn't match: it was changed, planted, or written with another "
            f"resume key (set {KEY_ENV} to the same secret on every machine that resumes)"
        )
    if doc.get("kind") != kind or doc.get("staging") != staging:
        raise UntrustedFileError(shown, f"it was written for {doc.get('staging')!r} "
                                        f"({doc.get('kind')}), not for this {kind} here")
    return doc


def safe_name(name: Any, shown: str) -> str:
    """``name`` if it is one plain file name (no directory part, no ``..``) that recprep
    may create or remove; else :class:`~recprep.errors.UntrustedFileError`."""
    if (not isinstance(name, str) or not name or "/" in name or "\\" in name
            or "\0" in name or name in (".", "..") or name.startswith(_RESERVED)):
        raise UntrustedFileError(shown, f"names {name!r}, which is not a plain file name "
                                        "inside the directory")
    return name
