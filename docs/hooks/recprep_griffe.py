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

Doctests show as code wherever they are: a numpy section headed ``Example`` is read as
``Examples``, and a doctest elsewhere (the body, ``Notes``) is fenced; griffe would show
either as Markdown, where ``>>>`` is three nested quotes.

A class whose bases include a private class (``CorruptDataError(LocatedError, ValueError)``)
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
#: numpydoc's section is "Examples"; griffe renders a singular "Example" as an admonition of
#: Markdown, where ">>>" lines become nested quotes
_EXAMPLE = re.compile(r"^(?P<indent>[ \t]*)Example\n(?P=indent)-{7}$", re.MULTILINE)
_UNDERLINE = re.compile(r"[ \t]*-{3,}[ \t]*")


def parse_role(role: str, body: str) -> tuple[str, str | None]:
    """The text a role shows and the name it points to (``None``: no link).

    >>> parse_role("class", "~recprep.errors.CorruptDataError")
    ('CorruptDataError', 'recprep.errors.CorruptDataError')
    >>> parse_role("func", "recprep.spark.write")
    ('recprep.spark.write()', 'recprep.spark.write')
    >>> parse_role("meth", "the epoch <set_epoch>")
    ('the epoch', 'set_epoch')
    >>> parse_role("mod", "!recprep.read.placing")
    ('recprep.read.placing', None)
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


def fix_sections(text: str) -> str:
    r"""``text`` with its doctests where the numpy parser shows them as code.

    A section headed ``Example`` is renamed ``Examples``; a doctest outside an ``Examples``
    section (in the summary's paragraphs, under ``Notes``...) is fenced as ``pycon``, as
    griffe does for ``Examples``: Markdown would read its ``>>>`` as three nested quotes.

    >>> fix_sections("Doc.\n\nExample\n-------\n>>> 1\n1")
    'Doc.\n\nExamples\n--------\n>>> 1\n1'
    >>> fix_sections("Doc.\n>>> 1\n1\n\nMore.").splitlines()
    ['Doc.', '', '```pycon', '>>> 1', '1', '```', '', 'More.']
    """
    lines = _EXAMPLE.sub(lambda m: f"{m['indent']}Examples\n{m['indent']}--------",
                         text).split("\n")
    out: list[str] = []
    section = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip() and index + 1 < len(lines) and _UNDERLINE.fullmatch(lines[index + 1]):
            section = line.strip()
        if line.lstrip().startswith(">>>") and section != "Examples":
            end = index
            while end < len(lines) and lines[end].strip():
                end += 1
            indent = line[: len(line) - len(line.lstrip())]
            if out and out[-1].strip():
                out.append("")
            out += [f"{indent}```pycon", *lines[index:end], f"{indent}```"]
            index = end
            continue
        out.append(line)
        index += 1
    return "\n".join(out)


def convert_roles(text: str, resolve: Callable[[str, str], str | None]) -> str:
    """``text`` with every Sphinx role replaced by inline code, linked where it resolves.

    ``resolve(target, role)`` gives the full path of the object a role names, or
    ``None``. A resolved role becomes ``<code><autoref identifier=PATH optional>`` (the
    element mkdocstrings itself uses for signatures: mkdocs-autorefs makes it a link when
    the site has that object and drops it silently when not); an unresolved one becomes
    plain inline code.

    >>> convert_roles(":class:`~a.B` or :func:`f`", lambda target, role: {"a.B": "a.B"}.get(target))
    '<code><autoref identifier="a.B" optional>B</autoref></code> or `f()`'
    """

    def replace(match: re.Match[str]) -> str:
        shown, target = parse_role(match.group("role"), match.group("body"))
        path = resolve(target, match.group("role")) if target else None
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


def _resolver(obj: Any, package: Any) -> Callable[[str, str], str | None]:
    collection = package.modules_collection

    def found(path: str, role: str) -> str | None:
        try:
            member = collection.get_member(path)
            is_module = member.is_module  # an alias griffe can't follow raises here
        except Exception:  # griffe raises KeyError, AliasResolutionError...
            return None
        name = path.rsplit(".", 1)[-1]
        if role != "mod" and is_module and name in member.members:
            return f"{path}.{name}"  # :func:`recprep.convert`: the function, not the module
        return path

    def resolve(target: str, role: str) -> str | None:
        head, _, rest = target.partition(".")
        try:
            scoped = obj.resolve(head)  # as Python would, from the docstring's scope
        except Exception:  # NameResolutionError: not in that scope
            scoped = None
        candidates = [target]
        if scoped is not None:
            candidates.append(f"{scoped}.{rest}" if rest else scoped)
        candidates += [f"{package.path}.{target}", f"{obj.module.path}.{target}"]
        return next(filter(None, (found(path, role) for path in candidates)), None)

    return resolve


def _public_bases(cls: Any) -> list[Any]:
    """``cls``'s bases, each private one replaced by its own bases, recursively."""
    bases: dict[str, Any] = {}
    for base in cls.bases:
        name = str(base).rsplit(".", 1)[-1]
        if name.startswith("_"):
            private = next((c for c in cls.resolved_bases if c.name == name), None)
            expanded = _public_bases(private) if private is not None else []
        else:
            expanded = [base]
        for item in expanded:
            bases.setdefault(str(item), item)
    return list(bases.values())


class SphinxRoles(_Extension):  # type: ignore[misc,valid-type]
    """Convert the roles of every docstring of a package and hide private bases."""

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                text = fix_sections(obj.docstring.value)
                obj.docstring.value = convert_roles(text, _resolver(obj, pkg))
            if obj.is_class and any(str(b).rsplit(".", 1)[-1].startswith("_") for b in obj.bases):
                obj.bases = _public_bases(obj)
