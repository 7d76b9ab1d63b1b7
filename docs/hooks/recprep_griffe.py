"""A griffe extension for the API reference: Sphinx roles become links, private bases go.

recprep's docstrings cross-reference with Sphinx roles (``:class:`~recprep.RecordIO```,
``:func:`convert```, ``:meth:`set_epoch```...), which mkdocstrings would show raw. Before
the docstrings are parsed, each role becomes inline code (``RecordIO``, ``convert()``)
that links to the object's entry in the API reference when the site renders it; when it
doesn't (a private helper), the code stays, without a link and without a build warning.
The source docstrings are left as they are: ``help()`` and IDEs read them too.

Names follow Sphinx: ``~a.b.C`` shows ``C``; ``a.b.C`` shows ``a.b.C``; ``title <a.b.C>``
shows ``title``; ``!name`` never links; functions and methods get ``()``. A name that
isn't a full path is looked up from the docstring's own scope (its class, its module and
what that imports), as Python would, then as a member of ``recprep``.

A class whose bases include a private class (``CorruptDataError(_Located, ValueError)``)
shows that class's own bases instead (``RecprepError, ValueError``).

``mkdocs.yml`` loads it with the python handler's ``extensions`` option. The role
conversion, :func:`convert_roles`, is plain Python, so the tests use it without griffe.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

try:
    from griffe import Extension as _Extension
except ImportError:  # the test venv has no griffe; convert_roles needs none
    _Extension = object  # type: ignore[assignment,misc]

#: the roles recprep's docstrings use (``:py:class:`` too); anything else is left alone
ROLES = ("class", "func", "meth", "mod", "attr", "exc", "data", "obj", "const")
CALLABLE_ROLES = ("func", "meth")
ROLE = re.compile(
    r":(?:py:)?(?P<role>" + "|".join(ROLES) + r"):`(?P<body>[^`\n]+)`"
)
_TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")


def parse_role(role: str, body: str) -> tuple[str, str | None]:
    """The text a role shows and the name it points to (``None``: no link).

    >>> parse_role("class", "~recprep.errors.CorruptDataError")
    ('CorruptDataError', 'recprep.errors.CorruptDataError')
    >>> parse_role("func", "recprep.spark.write")
    ('recprep.spark.write()', 'recprep.spark.write')
    >>> parse_role("meth", "the epoch <set_epoch>")
    ('the epoch', 'set_epoch')
    >>> parse_role("mod", "!recprep.index")
    ('recprep.index', None)
    """
    body = body.strip()
    titled = _TITLED.match(body)
    if titled:
        return titled.group("title"), titled.group("target").strip().lstrip("~.")
    link = not body.startswith("!")
    target = body.lstrip("!")
    short = target.startswith("~")
    target = target.lstrip("~").lstrip(".")
    text = target.rsplit(".", 1)[-1] if short else target
    if role in CALLABLE_ROLES and not text.endswith(")"):
        text += "()"
    return text, target if link else None


def convert_roles(text: str, resolve: Callable[[str], str | None]) -> str:
    """``text`` with every Sphinx role replaced by inline code, linked where it resolves.

    ``resolve`` turns a role's target into the full path of a documented object, or
    ``None``. A resolved role becomes ``<code><autoref identifier=PATH optional>`` (the
    element mkdocstrings itself uses for signatures: mkdocs-autorefs makes it a link when
    the site has that object and drops it silently when not); an unresolved one becomes
    plain inline code.

    >>> convert_roles("See :class:`~recprep.RecordIO` and :func:`helper`.",
    ...               {"recprep.RecordIO": "recprep.RecordIO"}.get)
    'See <code><autoref identifier="recprep.RecordIO" optional>RecordIO</autoref></code> and `helper()`.'
    """

    def replace(match: re.Match[str]) -> str:
        shown, target = parse_role(match.group("role"), match.group("body"))
        path = resolve(target) if target else None
        if path is None:
            return f"`{shown}`"
        shown = shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return f'<code><autoref identifier="{path}" optional>{shown}</autoref></code>'

    return ROLE.sub(replace, text)


# -- the griffe side: only runs under mkdocs, where griffe is installed ------------------------


def _walk(obj: Any) -> Iterator[Any]:
    """``obj`` and every object defined in it (aliases skipped: they're documented where
    they point)."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


def _resolver(obj: Any, package: Any) -> Callable[[str], str | None]:
    collection = package.modules_collection

    def exists(path: str) -> bool:
        try:
            collection.get_member(path)
        except Exception:  # griffe raises KeyError, AliasResolutionError...
            return False
        return True

    def resolve(target: str) -> str | None:
        if exists(target):
            return target
        head, _, rest = target.partition(".")
        try:
            path = obj.resolve(head)
        except Exception:  # NameResolutionError: not in the docstring's scope
            path = None
        if path is not None:
            full = f"{path}.{rest}" if rest else path
            if exists(full):
                return full
        for candidate in (f"{package.path}.{target}", f"{obj.module.path}.{target}"):
            if exists(candidate):
                return candidate
        return None

    return resolve


def _public_bases(cls: Any, seen: set[str] | None = None) -> list[Any]:
    """``cls``'s bases, each private one replaced by its own bases, recursively."""
    seen = set() if seen is None else seen
    bases = []
    for base in cls.bases:
        name = str(base).rsplit(".", 1)[-1]
        if name.startswith("_"):
            private = next((c for c in cls.resolved_bases if c.name == name), None)
            expanded = _public_bases(private, seen) if private is not None else []
        else:
            expanded = [base]
        for item in expanded:
            if str(item) not in seen:
                seen.add(str(item))
                bases.append(item)
    return bases


class SphinxRoles(_Extension):  # type: ignore[misc,valid-type]
    """Convert the roles of every docstring of a package and hide private bases."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None and ":" in obj.docstring.value:
                obj.docstring.value = convert_roles(obj.docstring.value, _resolver(obj, pkg))
            if obj.is_class and any(str(b).rsplit(".", 1)[-1].startswith("_") for b in obj.bases):
                obj.bases = _public_bases(obj)
