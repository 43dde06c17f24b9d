"""The folders the app may import from, and the check every path it imports goes through.

The app is served: whoever opens it in a browser types a path that the *server* then reads.
Without a bound, "a path on this machine" reads any file the server can (`/etc/shadow`, a
key file), and an importer's error or the generic format's column picker shows its first
line. So the app imports only from folders the user has made importable:

- `imports/` in the cogbias home (`COGBIAS_HOME`, default `~/.cogbias`), and
- the folders named in `COGBIAS_IMPORT_DIRS` (separated by `os.pathsep`, `:` on Linux).

`resolve_importable` resolves a path (symbolic links followed, `..` taken away) and refuses
it unless it lies in one of them; for a folder it checks every entry below it the same way,
since an importer opens files inside the folder it is given (a mohr2025 folder whose
`models.csv` links to `/etc/passwd` is refused whole). A refused path is never opened, so no
line of it can reach a message. A folder can also arrive as a zip upload: `unpack_zip`
writes it into a folder of the caller's (a temporary one) with no absolute or `..` names, no
links and bounded size and count.

The command line (`cogbias import FORMAT PATH`) is the user's own shell and reads any path
the user can: it does not call this module.

A hard link is the file itself, not a path to it, and cannot be told apart here; what an
importable folder holds is its owner's to choose. Checked paths are opened right after the
check, by the same process; someone who can write in an importable folder between the two
already has a shell on the machine.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from cogbias.datasets.common import DatasetError
from cogbias.store import cogbias_home

IMPORT_DIRS_ENV = "COGBIAS_IMPORT_DIRS"
MAX_ENTRIES = 10_000  # entries below an imported folder; a published data folder has dozens
MAX_ZIP_MEMBERS = 10_000
MAX_ZIP_BYTES = 1024**3  # unpacked; an upload is at most 200 MB packed (Streamlit's limit)
_CHUNK = 1 << 20
_SKIPPED = ("__MACOSX/",)  # the resource forks macOS's Finder adds to every zip


class NotImportable(DatasetError):
    """A path the app may not import from, or an upload it will not unpack; the message
    names the path and the reason, never anything the file holds."""


def importable_dirs() -> list[Path]:
    """The folders the app may import from, resolved, in order: the home's `imports/`, then
    `COGBIAS_IMPORT_DIRS`. A folder that does not exist yet is listed all the same."""
    named = os.environ.get(IMPORT_DIRS_ENV, "").split(os.pathsep)
    folders = [cogbias_home() / "imports", *(Path(n.strip()) for n in named if n.strip())]
    out: list[Path] = []
    for folder in folders:
        try:
            real = folder.expanduser().resolve()
        except (OSError, RuntimeError):  # a loop of links names no folder
            continue
        if real not in out:
            out.append(real)
    return out


def resolve_importable(path: str | Path) -> Path:
    """`path` resolved to the real file or folder it names, when it lies in an importable
    folder (a relative path is looked for in each of them, in order) and, for a folder,
    everything below it does too; else NotImportable naming the path and why. Nothing in
    the path is read."""
    shown = str(path).strip()
    if not shown:
        raise NotImportable("(no path)", "give a file or folder inside an importable folder")
    if "\x00" in shown:  # the system refuses it too, with a ValueError of its own
        raise NotImportable(shown.replace("\x00", "\\x00"), "holds a NUL character: no path does")
    roots = importable_dirs()
    given = Path(shown).expanduser()
    candidates = [given] if given.is_absolute() else [root / given for root in roots]
    real = None
    for candidate in candidates:
        real = _inside(candidate, roots, shown)
        if real.exists():
            break
    assert real is not None  # roots always holds the home's imports folder
    kind = _kind(real)
    if kind is None:
        where = "" if given.is_absolute() else " in any importable folder"
        raise NotImportable(shown, f"does not exist{where}")
    if kind != "folder" and kind != "file":
        raise NotImportable(shown, f"is {kind}, not a file or a folder")
    if kind == "folder":
        _check_tree(real, roots, shown)
    return real


def _inside(path: Path, roots: list[Path], shown: str) -> Path:
    """`path` resolved, or NotImportable when it leads outside every root."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):
        raise NotImportable(shown, "cannot be resolved (a loop of symbolic links?)") from None
    if not any(real.is_relative_to(root) for root in roots):
        listed = ", ".join(str(r) for r in roots)
        raise NotImportable(
            shown,
            f"is not inside a folder the app may import from ({listed}); move it into one, "
            f"or name its folder in {IMPORT_DIRS_ENV} when starting the app"
            + (
                " (a symbolic link on its way leads out of them)"
                if _linked_out(path, roots)
                else ""
            ),
        )
    return real


def _linked_out(path: Path, roots: list[Path]) -> bool:
    """Whether `path`, read as written (no link followed), is inside a root: then a link
    took it out."""
    written = Path(os.path.normpath(path.absolute()))
    return any(written.is_relative_to(root) for root in roots)


def _kind(path: Path) -> str | None:
    """What is at `path`: "file", "folder", another kind's name, or None when nothing is."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "a named pipe" if stat.S_ISFIFO(mode) else "a device or socket"


def _check_tree(top: Path, roots: list[Path], shown: str) -> None:
    """Every entry below `top` is a file or folder inside the roots (links resolved), and
    there are at most MAX_ENTRIES of them; else NotImportable naming the entry."""
    seen, stack, count = {top}, [(top, shown)], 0
    while stack:
        folder, label = stack.pop()
        for entry in _entries(folder, label):
            count += 1
            if count > MAX_ENTRIES:
                raise NotImportable(
                    shown, f"holds more than {MAX_ENTRIES:,} entries; give the dataset's own folder"
                )
            name = f"{label.rstrip('/')}/{entry.name}"
            real = (
                _inside(Path(entry.path), roots, name) if entry.is_symlink() else Path(entry.path)
            )
            kind = _kind(real)
            if kind == "folder" and real not in seen:
                seen.add(real)
                stack.append((real, name))
            elif kind is None:
                raise NotImportable(name, "is a symbolic link that leads nowhere")
            elif kind not in ("file", "folder"):
                raise NotImportable(name, f"is {kind}, not a file or a folder")


def _entries(folder: Path, label: str) -> Iterator[os.DirEntry[str]]:
    """The entries of `folder` one by one (a folder of millions is not listed whole before
    the count stops it); a folder that cannot be listed is NotImportable."""
    try:
        with os.scandir(folder) as entries:
            yield from entries
    except OSError as exc:
        reason = exc.strerror or "it cannot be read"
        raise NotImportable(label, f"cannot be listed ({reason})") from None


def unpack_zip(data: bytes, into: Path, label: str = "the upload") -> Path:
    """Unpack the zip archive `data` into the existing empty folder `into` and return the
    dataset's folder: the archive's one top folder when it holds only that, else `into`.
    Refused (NotImportable naming `label` and the entry): a name that is absolute, climbs
    with `..` or holds control characters; a symbolic link or other special entry; a name
    given twice; more than MAX_ZIP_MEMBERS entries or MAX_ZIP_BYTES unpacked (counted as
    written, not as the archive claims); an encrypted or damaged archive."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        raise NotImportable(label, "is not a zip archive") from None
    with archive:
        members = [m for m in archive.infolist() if not m.filename.startswith(_SKIPPED)]
        if len(members) > MAX_ZIP_MEMBERS:
            raise NotImportable(label, f"holds more than {MAX_ZIP_MEMBERS:,} entries")
        names = [_member_name(m, label) for m in members]
        if len(set(names)) < len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise NotImportable(label, f"holds {'/'.join(twice)!r} twice")
        written = 0
        for member, parts in zip(members, names, strict=True):
            target = into.joinpath(*parts)
            try:
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(member) as source, target.open("xb") as out:
                    while chunk := source.read(_CHUNK):
                        written += len(chunk)
                        if written > MAX_ZIP_BYTES:
                            raise NotImportable(
                                label, f"unpacks to more than {MAX_ZIP_BYTES / 1e9:.1f} GB"
                            )
                        out.write(chunk)
            except NotImportable:
                raise
            except RuntimeError:  # zipfile's word for "needs a password"
                raise NotImportable(label, f"{member.filename!r} is encrypted") from None
            except NotImplementedError:
                raise NotImportable(
                    label, f"{member.filename!r} uses a compression method cogbias cannot read"
                ) from None
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "damaged"
                raise NotImportable(
                    label, f"{'/'.join(parts)!r} cannot be unpacked ({reason})"
                ) from None
    entries = list(into.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def _member_name(member: zipfile.ZipInfo, label: str) -> tuple[str, ...]:
    """The parts of a member's name, or NotImportable when it is not a plain relative name
    of a file or folder."""
    name = member.filename
    kind = stat.S_IFMT(member.external_attr >> 16)  # 0 when the archiver did not say
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        what = "a symbolic link" if kind == stat.S_IFLNK else "not a file or a folder"
        raise NotImportable(label, f"{name!r} is {what}; an upload holds only files and folders")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise NotImportable(label, f"{name!r} has a control character in its name")
    parts = tuple(p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("", "."))
    absolute = name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":")
    if absolute or ".." in parts or not parts:
        raise NotImportable(label, f"{name!r} is not a name inside the archive's folder")
    return parts
