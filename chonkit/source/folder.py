"""A folder on the server as a source: only under a root the operator allows, and nothing that leads out of it.

Every path is resolved (symlinks followed) before it is judged, so a folder given as a symlink, a link to a file
or folder elsewhere, or ``..`` cannot reach outside ``RAGU_SOURCE_ROOTS``. A file is opened without following a
symlink, non-blocking, and checked again through its descriptor (a regular file, still inside a root), so a file
swapped for a link or a FIFO between the listing and the read is refused rather than followed or waited on.
Device files, FIFOs and sockets are skipped with a reason; hidden files and folders (a name starting with ``.``:
``.git``, editor swap files) are passed over silently. Listing a folder (with matching its files against the
globs) and reading a file are blocking calls, made in a thread, one folder or one file at a time: nothing a source
holds, however many files or however hostile its globs, runs on the event loop that serves questions.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from chonkit.document.parsing.doctype import EXTENSIONS
from chonkit.source.items import SkippedItem, SourceItem
from chonkit.source.models import MAX_GLOB_CHARS, MAX_GLOBS, FolderSpec
from common.errors import InvalidInput

FOLDER_UNREADABLE = "folder_unreadable"
"""A skipped item with this code is a folder: the sync keeps every item under it as it was (never "gone")."""


def check_roots(roots: Sequence[Path]) -> list[Path]:
    """The roots, resolved; none configured refuses every folder source."""
    if not roots:
        raise InvalidInput(
            "Folder sources are off: the operator allows none (set RAGU_SOURCE_ROOTS to the folders they may read).",
            code="source_roots_unset",
        )
    return [root.resolve() for root in roots]


def within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolve_folder(path: str, roots: Sequence[Path]) -> Path:
    """The folder ``path`` names, resolved, if it lies under one of ``roots``. Blocking (it reads the disk)."""
    resolved_roots = check_roots(roots)
    given = Path(path)
    if not given.is_absolute():
        raise InvalidInput(f"The folder {path!r} must be an absolute path.", code="folder_not_absolute")
    try:
        folder = given.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise InvalidInput(f"There is no folder {path!r} on the server.", code="folder_not_found") from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission denied on the way
        raise InvalidInput(f"The folder {path!r} cannot be resolved: {exc}.", code="folder_unreadable") from None
    except ValueError:  # a NUL character: no path on any disk
        raise InvalidInput(f"There is no folder {path!r} on the server.", code="folder_not_found") from None
    if not within(folder, resolved_roots):
        raise InvalidInput(
            f"The folder {path!r} (resolved: {str(folder)!r}) is outside the folders the operator allows.",
            code="folder_outside_roots",
            extra={"roots": [str(r) for r in resolved_roots]},
        )
    if not folder.is_dir():
        raise InvalidInput(f"{path!r} is not a folder.", code="folder_not_a_directory")
    return folder


def check_globs(include: Sequence[str], exclude: Sequence[str]) -> None:
    """Refuse what a new or edited spec may not hold: more than :data:`MAX_GLOBS` globs on a side, a glob over
    :data:`MAX_GLOB_CHARS` characters (each glob is matched against every file, so both bound a sync's work and
    memory), an absolute glob or one with a ``..`` part (it could never match), or one RE2 cannot compile.
    Compiling takes up to ~70 ms at the bounds (64 class-heavy globs): call it in a thread."""
    for side, patterns in (("include", include), ("exclude", exclude)):
        if len(patterns) > MAX_GLOBS:
            raise InvalidInput(
                f"A folder source takes at most {MAX_GLOBS} {side} globs ({len(patterns)} given).",
                code="too_many_globs",
                extra={"field": side, "limit": MAX_GLOBS},
            )
        for pattern in patterns:
            if len(pattern) > MAX_GLOB_CHARS:
                raise InvalidInput(
                    f"A glob has at most {MAX_GLOB_CHARS} characters ({len(pattern)} in {pattern[:40]!r}...).",
                    code="glob_too_long",
                    extra={"field": side, "limit": MAX_GLOB_CHARS},
                )
            if pattern.startswith("/") or ".." in pattern.split("/"):
                raise InvalidInput(
                    f"The glob {pattern!r} must be relative to the folder, without '..'.", code="invalid_glob"
                )
            compile_glob(pattern)


_ANY = ".*"
_NAME = "[^/]*"
_FOLDERS = "(?:.*/)?"
_GLOB_OPTIONS = re2.Options()
_GLOB_OPTIONS.log_errors = False  # RE2 would print every refused glob to stderr
_GLOB_OPTIONS.never_capture = True  # a glob only decides whether a path matches
_GLOB_OPTIONS.max_mem = 1 << 20
"""Per glob: enough for a 500-character glob's program and a DFA cache that never falls back to the slower (still
linear) NFA on real paths, and a bound on what a source's globs can hold however hostile its file names."""


class GlobMatcher:
    """A source's include and exclude globs compiled with RE2, which matches in time linear in the path whatever the
    glob: Python's ``re`` backtracked, and ``exclude: ["*" * 28 + "x"]`` took a minute on one 23-character name,
    with the server's event loop (and so chonkit and kappi) frozen meanwhile. Compiling and matching are CPU work:
    build and call it in the listing thread, never on the loop."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str]) -> None:
        self.include = [compile_glob(p) for p in include]
        self.exclude = [compile_glob(p) for p in exclude]

    def wanted(self, key: str) -> bool:
        path = key.encode()  # RE2 works on UTF-8 anyway; handing it ``str`` costs a conversion per glob
        return any(g.fullmatch(path) for g in self.include) and not any(g.fullmatch(path) for g in self.exclude)


def compile_glob(pattern: str) -> Any:
    """``pattern`` compiled with RE2; one it cannot compile is ``invalid_glob``. ``(?s)``: a file name may hold a
    newline, and ``**`` spans it like any other character."""
    try:
        return re2.compile("(?s)" + glob_regex(pattern), _GLOB_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidInput(f"The glob {pattern!r} is not valid: {reason}.", code="invalid_glob") from None


def glob_regex(pattern: str) -> str:
    """``pattern`` as an RE2 regex on ``/``-separated relative paths, matched whole: ``**/`` any number of folders
    (none too), ``**`` anything, ``*`` and ``?`` within one name, ``[...]`` a character class (``[!...]`` negated).
    A run of wildcards is collapsed to the shortest regex matching the same paths (see :func:`_push`)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            token, i = _FOLDERS, i + 3
        elif pattern.startswith("**", i):
            token, i = _ANY, i + 2
        elif pattern[i] == "*":
            token, i = _NAME, i + 1
        elif pattern[i] == "?":
            token, i = "[^/]", i + 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            token, i = ("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]"), end + 1
        else:
            token, i = re2.escape(pattern[i]), i + 1
        _push(out, token)
    return "".join(out)


def _push(out: list[str], token: str) -> None:
    """Append ``token``, merged with the wildcards before it where the paths matched stay the same: ``.*`` next to
    any wildcard run is ``.*`` (each part can match the empty string), ``[^/]*[^/]*`` is ``[^/]*``,
    ``(?:.*/)?(?:.*/)?`` is ``(?:.*/)?``, and ``(?:.*/)?[^/]*`` (``**/*``) is any path at all."""
    while out and (merged := _merged(out[-1], token)) is not None:
        out.pop()
        token = merged
    out.append(token)


def _merged(before: str, after: str) -> str | None:
    wildcards = (_ANY, _NAME, _FOLDERS)
    if before not in wildcards or after not in wildcards:
        return None
    if _ANY in (before, after) or (before, after) == (_FOLDERS, _NAME):
        return _ANY
    return before if before == after else None


class _Entry(msgspec.Struct, frozen=True):
    """One thing a folder listing found, judged in the listing thread."""

    key: str
    real: str
    kind: str
    """``dir``, ``file`` or ``skipped``."""
    code: str = ""
    reason: str = ""


class FolderLister:
    """Lists a folder source's files as :class:`SourceItem` (key: the path relative to the folder)."""

    def __init__(self, spec: FolderSpec, *, roots: Sequence[Path], max_bytes: int) -> None:
        self.spec = spec
        self.roots = roots
        self.max_bytes = max_bytes

    async def items(self) -> AsyncIterator[SourceItem | SkippedItem]:
        """The folder's wanted files, read, and what was skipped. The globs are compiled (a stored spec may hold
        up to 200 globs of 500 characters, up to ~0.5 s to compile) and matched in the listing threads."""
        folder = await asyncio.to_thread(resolve_folder, self.spec.path, self.roots)
        globs = await asyncio.to_thread(GlobMatcher, self.spec.include, self.spec.exclude)
        roots = check_roots(self.roots)
        pending: list[tuple[str, Path]] = [("", folder)]
        visited = {folder}
        while pending:
            prefix, directory = pending.pop()
            try:
                entries = await asyncio.to_thread(_list_wanted, directory, prefix, roots, globs)
            except OSError as exc:
                if not prefix:
                    raise InvalidInput(
                        f"The folder {self.spec.path!r} cannot be listed: {exc.strerror}.", code="folder_unreadable"
                    ) from None
                reason = f"The folder cannot be listed ({exc.strerror}); what it held is kept as it was."
                yield SkippedItem(key=prefix.rstrip("/"), code=FOLDER_UNREADABLE, reason=reason)
                continue
            for entry in entries:
                if entry.kind == "dir":
                    real = Path(entry.real)
                    if real not in visited:  # a link back up would loop forever
                        visited.add(real)
                        pending.append((entry.key + "/", real))
                elif entry.kind == "skipped":
                    yield SkippedItem(key=entry.key, code=entry.code, reason=entry.reason)
                else:
                    yield await asyncio.to_thread(self._read, entry, roots)

    def _read(self, entry: _Entry, roots: Sequence[Path]) -> SourceItem | SkippedItem:
        suffix = Path(entry.key).suffix.lower()
        if suffix not in EXTENSIONS:
            return _skipped(entry.key, "unsupported_type", f"Files of type {suffix or '(none)'!r} are not read.")
        try:
            fd = os.open(entry.real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            return _skipped(entry.key, "file_unreadable", f"The file cannot be opened: {exc.strerror}.")
        try:
            content = self._read_open(fd, entry, roots)
        finally:
            os.close(fd)
        if isinstance(content, SkippedItem):
            return content
        return SourceItem(key=entry.key, name=entry.key, content=content, media_type=_media_type(suffix))

    def _read_open(self, fd: int, entry: _Entry, roots: Sequence[Path]) -> bytes | SkippedItem:
        """The bytes of an opened file, judged by its descriptor: what it is and where it really is."""
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _skipped(entry.key, "not_a_regular_file", "It is not a regular file (a device, FIFO or socket).")
        if not within(_path_of(fd, entry.real), roots):
            return _skipped(entry.key, "symlink_outside_roots", "It leads outside the allowed folders.")
        if info.st_size > self.max_bytes:
            return _too_large(entry.key, info.st_size, self.max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as file:
            content = file.read(self.max_bytes + 1)
        if len(content) > self.max_bytes:
            return _too_large(entry.key, len(content), self.max_bytes)
        return content


def _list_wanted(directory: Path, prefix: str, roots: Sequence[Path], globs: GlobMatcher) -> list[_Entry]:
    """:func:`_list_folder` less the files the globs leave out, in the same thread. Every folder is kept (a glob
    may match what lies below it), and so is a symlink leading out of the roots, which is always reported."""
    return [
        entry
        for entry in _list_folder(directory, prefix, roots)
        if entry.kind == "dir" or entry.code == "symlink_outside_roots" or globs.wanted(entry.key)
    ]


def _list_folder(directory: Path, prefix: str, roots: Sequence[Path]) -> list[_Entry]:
    """The visible entries of one folder, each judged: a folder to descend, a file to read, or skipped and why."""
    entries = []
    with os.scandir(directory) as found:
        for item in sorted(found, key=lambda e: e.name):
            if item.name.startswith("."):
                continue
            key = prefix + item.name
            if not _encodable(item.name):  # not UTF-8 on disk: no key or document name could hold it
                shown = key.encode("utf-8", "backslashreplace").decode()
                entries.append(_Entry(shown, "", "skipped", "invalid_file_name", "Its name is not valid UTF-8."))
                continue
            real = Path(item.path)
            if item.is_symlink():
                try:
                    real = real.resolve(strict=True)
                except (OSError, RuntimeError):
                    entries.append(_Entry(key, "", "skipped", "broken_symlink", "It is a symlink to nothing."))
                    continue
                if not within(real, roots):
                    reason = "It is a symlink leading outside the allowed folders."
                    entries.append(_Entry(key, "", "skipped", "symlink_outside_roots", reason))
                    continue
            try:
                mode = real.stat().st_mode
            except OSError as exc:
                entries.append(_Entry(key, "", "skipped", "file_unreadable", f"It cannot be read: {exc.strerror}."))
                continue
            if stat.S_ISDIR(mode):
                entries.append(_Entry(key, str(real), "dir"))
            elif stat.S_ISREG(mode):
                entries.append(_Entry(key, str(real), "file"))
            else:
                reason = "It is not a regular file (a device, FIFO or socket)."
                entries.append(_Entry(key, "", "skipped", "not_a_regular_file", reason))
    return entries


def _encodable(name: str) -> bool:
    try:
        name.encode()
    except UnicodeEncodeError:
        return False
    return True


def _path_of(fd: int, opened: str) -> Path:
    """Where an open file really is: a folder on the way swapped for a symlink after the listing shows here."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:  # no /proc (not Linux): the path as opened, resolved now
        return Path(opened).resolve()


def _media_type(suffix: str) -> str:
    return EXTENSIONS[suffix].media_type


def _skipped(key: str, code: str, reason: str) -> SkippedItem:
    return SkippedItem(key=key, code=code, reason=reason)


def _too_large(key: str, size: int, limit: int) -> SkippedItem:
    return _skipped(key, "file_too_large", f"It is {size} bytes; the limit is {limit} (RAGU_CHONKIT_MAX_UPLOAD_BYTES).")
