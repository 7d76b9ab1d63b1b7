"""Finding the sets a path names: nothing there, several sets, shards missing, a set
that changed or is caught mid-commit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .base import REMEDY, RecprepError, RecprepWarning, Remedy
from .usage import InvalidArgumentError


class NotFoundError(RecprepError, FileNotFoundError):
    """Nothing to read where the user pointed. Attributes: ``path``, ``detail``."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"{path}: {detail}; check the path{REMEDY}",
            remedy=Remedy("storage_options", effect="if the storage needs credentials or "
                          "an endpoint"),
        )


class AmbiguousPathError(InvalidArgumentError):
    """A path names several shard sets where one is expected (a directory holding
    ``train`` and ``test``, a glob matching files of both): reading them as one stream
    would mix them.

    Attributes: ``path`` (as given), ``directory``, ``sets`` (name -> number of shards
    matched), ``paths`` (name -> the path that names that set alone: pass one, or a list).
    """

    def __init__(
        self, path: str, directory: str, sets: Mapping[str, int], detail: str = "",
        *, paths: Mapping[str, str] | None = None, files: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.directory = directory
        self.sets = dict(sets)
        base = directory.rstrip("/")
        given = dict(paths or {})
        self.paths = {name: given.get(name, f"{base}/{name}") for name in self.sets}
        lone = set(files)  # names that are single data files, not sets

        def said(name: str, count: int) -> str:
            return "a file" if name in lone else f"{count} shard{'' if count == 1 else 's'}"

        listed = ", ".join(f"{name} ({said(name, count)})" for name, count in self.sets.items())
        one = next((self.paths[n] for n in self.sets if n not in lone), f"{base}/name")
        if any(c in one for c in "*?["):
            name_one = f"Name one: {one!r}"
        else:
            name_one = (f"Name one set: {one!r} (the directory and the set's prefix), its "
                        f"glob '{one}-*-of-*' or its manifest '{one}.manifest.json'")
        super().__init__(
            f"{path}: {detail or 'the directory holds several shard sets'}: {listed}. "
            f"{name_one}; to read several sets as one stream on purpose, pass a list of "
            f"them: {list(self.paths.values())!r}"
        )


class MissingShardsError(RecprepError, FileNotFoundError):
    """A glob matched part of a shard set whose other shards don't exist.

    Attributes: ``pattern``, ``missing`` (the expected paths that aren't there).
    """

    def __init__(
        self, pattern: str, missing: Sequence[str], found: int, *, manifest: bool = True
    ) -> None:
        self.pattern = pattern
        self.missing = list(missing)
        shown = ", ".join(self.missing[:5]) + (" ..." if len(self.missing) > 5 else "")
        alone = "" if manifest else (
            " The set's manifest isn't there either: these are some shards of a set (a "
            "partial copy?), not a committed set.")
        super().__init__(
            f"{pattern!r} matched {found} shard(s) of a set that should have "
            f"{found + len(self.missing)}; missing: {shown}.{alone} Copy the missing shards, "
            "or pass the files you want as a list of paths to read only those (on the "
            "command line: the files themselves, e.g. an unquoted glob)"
        )


class SetChangedError(RecprepError):
    """A shard set is not one committed set for this reader: a commit into it is in
    progress or was interrupted (its shards may mix two sets), or it was replaced after
    the reader read its manifest. Attributes: ``path`` (the set), ``detail``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"{path}: {detail}")


class UncommittedSetWarning(RecprepWarning):
    """A reader with ``on_corrupt="skip"`` reads the files of a set that isn't committed
    (a commit into it was interrupted or is in progress): they may mix two sets.
    Attributes: ``path``.
    """

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        super().__init__(f"{path}: {detail}; reading its files as they are")


class PartialCopyWarning(RecprepWarning):
    """``recprep cp`` copied some shards of a set and not its manifest (the shards named
    are not the whole set): the copy is not a committed set. Readers refuse its directory
    and globs (:class:`MissingShardsError`) and read its files named one by one.
    Attributes: ``path`` (the set copied from), ``copied``, ``total`` (its shards).
    """

    def __init__(self, path: str, copied: int, total: int) -> None:
        self.path = path
        self.copied = copied
        self.total = total
        super().__init__(
            f"{path}: copying {copied} of the set's {total} shards, without its manifest: "
            "the copy is some shards of a set, not a committed set. Readers refuse its "
            "directory and globs as a set missing shards; read the copied files by naming "
            "them (a list of paths; on the command line, the files themselves)"
        )
