"""Writing an output file without losing what was there: the open database is never a
target, an existing file is replaced only when asked, and the file appears whole or not at
all (written beside the target, then renamed over it)."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from cogbias.core.errors import UserError

NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # disk full, quota, file size limit


class OutputError(ValueError):
    """An output path that must not be written; nothing was written."""


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _protected(protect: Iterable[str | Path | None]) -> list[Path]:
    """The files of each database: the file itself and its journal, WAL and shared memory."""
    files: list[Path] = []
    for db in protect:
        if db is None or str(db) == ":memory:":
            continue
        files += [Path(f"{db}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]
    return files


def check_output(
    path: str | Path, force: bool = False, protect: Iterable[str | Path | None] = ()
) -> Path:
    """The output path, checked: never a database file in `protect` (not even with `force`),
    never a directory or device, and an existing file only with `force`."""
    path = Path(path)
    for db in _protected(protect):
        if _same_file(path, db) or path.resolve() == db.resolve():
            raise OutputError(
                f"{path} is the database this command reads ({db}); "
                "write the output to another file"
            )
    if path.exists() or path.is_symlink():
        if not path.is_file():
            raise OutputError(f"{path} exists and is not a regular file; choose a file name")
        if not force:
            raise OutputError(f"{path} already exists; pass --force to replace it")
    return path


@contextlib.contextmanager
def replacing(
    path: str | Path, force: bool = False, protect: Iterable[str | Path | None] = ()
) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write to; on success it is renamed over
    `path` (checked by `check_output`), on any failure it is removed and `path` is untouched.
    A disk that fills up midway stops the writing at the first failed write, and is said as
    such (`UserError`), naming `path`, not the temporary file."""
    target = check_output(path, force, protect)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(handle)
    temporary = Path(name)
    try:
        try:
            yield temporary
        except OSError as exc:
            raise _no_room(target, exc) from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
        check_output(target, force, protect)  # still true at the moment of the rename
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def _no_room(target: Path, exc: OSError) -> OSError | UserError:
    """What a failed write of `target` is said as: a disk that filled up midway names the
    output (not the temporary beside it) and what to do; any other error stays itself."""
    if exc.errno not in NO_ROOM:
        return exc
    return UserError(
        f"could not write {target}: {exc.strerror or exc}; nothing was written"
        + (" (the file there is unchanged)" if target.is_file() else "")
        + ": free some space, or choose a place with room, and try again"
    )


def check_folder(
    path: str | Path, force: bool = False, protect: Iterable[str | Path | None] = ()
) -> Path:
    """An output folder, checked: never one that holds a database in `protect` (replacing it
    would delete the database, so not even with `force`), never a file, and a folder with
    anything in it only with `force`."""
    path = Path(path)
    where = path.resolve()
    for db in _protected(protect):
        if db.exists() and where in db.resolve().parents:
            raise OutputError(
                f"{path} holds the database this command reads ({db}); "
                "write the folder somewhere else"
            )
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise OutputError(f"{path} exists and is not a folder; choose a folder name")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise OutputError(f"{path} already exists and is not empty; pass --force to replace it")
    return path


@contextlib.contextmanager
def replacing_folder(
    path: str | Path, force: bool = False, protect: Iterable[str | Path | None] = ()
) -> Iterator[Path]:
    """`replacing` for a folder: yield an empty temporary folder beside `path`; on success it
    takes `path`'s place (an old folder there is moved aside first and removed after, or put
    back if the move fails), on any failure it is removed and `path` is untouched. A reader
    sees the old folder or the whole new one, never a half-written one."""
    import shutil

    target = check_folder(path, force, protect)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part"))
    old: Path | None = None
    try:
        try:
            yield temporary
        except OSError as exc:
            raise _no_room(target, exc) from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o777 & ~umask)  # as an ordinary new folder, not mkdtemp's 0700
        check_folder(target, force, protect)  # still true at the moment of the rename
        if target.exists():
            old = Path(f"{temporary}.old")
            os.replace(target, old)
        try:
            os.replace(temporary, target)
        except OSError:
            if old is not None:
                os.replace(old, target)
                old = None
            raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
