"""The folders the app may import from (`cogbias.datasets.importable`): a path outside them, a
symbolic link leading out of them (the path itself, a file inside a dataset's folder, a folder
on the way) and special files are refused without being read; a zipped folder unpacks safely.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from cogbias.datasets import import_mohr
from cogbias.datasets import importable as imp
from cogbias.datasets.importable import (
    NotImportable,
    importable_dirs,
    resolve_importable,
    unpack_zip,
)
from cogbias.store import Store
from tests.dataset_helpers import FIXTURES, MOHR_DIR

SECRET = "root:SECRET-FIRST-LINE:0:0"


@pytest.fixture
def allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable folder named in COGBIAS_IMPORT_DIRS."""
    folder = tmp_path / "allowed"
    folder.mkdir()
    monkeypatch.setenv(imp.IMPORT_DIRS_ENV, str(folder))
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A header-shaped file outside every importable folder, its first line a secret."""
    path = tmp_path / "elsewhere" / "secret.csv"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\nbias,control,treatment\n")
    return path


def refusal(path: str | Path) -> str:
    with pytest.raises(NotImportable) as caught:
        resolve_importable(path)
    said = str(caught.value)
    assert SECRET not in said and "root:" not in said  # nothing of the file is read
    return said


def test_the_home_imports_folder_then_the_named_folders(allowed, tmp_path, monkeypatch):
    home = Path(os.environ["COGBIAS_HOME"])
    other = tmp_path / "other"
    monkeypatch.setenv(imp.IMPORT_DIRS_ENV, os.pathsep.join([str(allowed), "", str(other)]))
    assert importable_dirs() == [(home / "imports").resolve(), allowed.resolve(), other.resolve()]


def test_a_file_inside_is_resolved_and_a_relative_path_is_looked_for_in_the_folders(allowed):
    (allowed / "data").mkdir()
    (allowed / "data" / "mine.csv").write_text("a,b\n")
    assert (
        resolve_importable(allowed / "data" / "mine.csv") == (allowed / "data/mine.csv").resolve()
    )
    assert resolve_importable("data/mine.csv") == (allowed / "data" / "mine.csv").resolve()
    assert "does not exist in any importable folder" in refusal("data/other.csv")


@pytest.mark.parametrize("path", ["/etc/passwd", "/etc/shadow", "/"])
def test_a_system_file_is_refused_naming_the_path_and_the_folders(allowed, path):
    said = refusal(path)
    assert said.startswith(f"{path}: is not inside a folder the app may import from")
    assert str(allowed.resolve()) in said and imp.IMPORT_DIRS_ENV in said


def test_a_nul_in_the_path_is_refused_in_words_not_a_crash(allowed):
    (allowed / "a").write_text("x\n")
    assert "holds a NUL character" in refusal(f"{allowed}/a\x00b")  # was a bare ValueError


def test_a_file_outside_and_a_climb_out_with_dots_are_refused(allowed, outside):
    assert "is not inside a folder" in refusal(outside)
    assert "is not inside a folder" in refusal(allowed / ".." / "elsewhere" / "secret.csv")
    assert "is not inside a folder" in refusal("../elsewhere/secret.csv")


def test_a_symbolic_link_inside_to_a_file_outside_is_refused(allowed, outside):
    (allowed / "data.csv").symlink_to(outside)
    said = refusal(allowed / "data.csv")
    assert "a symbolic link on its way leads out of them" in said
    (allowed / "etc").symlink_to(outside.parent)  # a folder on the way
    assert "leads out of them" in refusal(allowed / "etc" / "secret.csv")
    inner = allowed / "inner.csv"  # a link that stays inside is followed
    inner.write_text("a\n")
    (allowed / "alias.csv").symlink_to(inner)
    assert resolve_importable(allowed / "alias.csv") == inner.resolve()


def test_a_mohr_folder_with_one_file_linked_outside_is_refused_whole(allowed, outside):
    folder = allowed / "mohr2025"
    shutil.copytree(MOHR_DIR, folder)
    assert resolve_importable(folder) == folder.resolve()
    (folder / "models.csv").unlink()
    (folder / "models.csv").symlink_to(outside)
    said = refusal(folder)
    assert said.startswith(f"{folder}/models.csv: is not inside a folder")
    (folder / "models.csv").unlink()
    (folder / "deeper").mkdir()  # anywhere below, a linked folder included
    (folder / "deeper" / "away").symlink_to(outside.parent, target_is_directory=True)
    assert f"{folder}/deeper/away: is not inside" in refusal(folder)


def test_loops_pipes_and_dangling_links_are_refused_without_hanging(allowed):
    folder = allowed / "d"
    folder.mkdir()
    (folder / "loop").symlink_to(folder, target_is_directory=True)  # a loop inside: walked once
    (folder / "f.csv").write_text("a\n")
    assert resolve_importable(folder) == folder.resolve()
    (allowed / "a").symlink_to(allowed / "b")
    (allowed / "b").symlink_to(allowed / "a")
    assert "cannot be resolved" in refusal(allowed / "a")
    os.mkfifo(folder / "pipe")  # opening it would wait for a writer forever
    assert "pipe: is a named pipe" in refusal(folder)
    assert "is a named pipe" in refusal(folder / "pipe")
    (folder / "pipe").unlink()
    (folder / "gone").symlink_to(allowed / "nothing")
    assert "gone: is a symbolic link that leads nowhere" in refusal(folder)


def test_a_folder_with_too_many_entries_is_refused(allowed, monkeypatch):
    monkeypatch.setattr(imp, "MAX_ENTRIES", 5)
    for n in range(6):
        (allowed / f"{n}.csv").write_text("a\n")
    assert "holds more than 5 entries" in refusal(allowed)


def test_the_fixtures_folder_is_importable_when_named(monkeypatch):
    monkeypatch.setenv(imp.IMPORT_DIRS_ENV, str(FIXTURES))
    assert resolve_importable("mohr2025-format") == MOHR_DIR.resolve()
    monkeypatch.delenv(imp.IMPORT_DIRS_ENV)
    assert "not inside" in refusal(MOHR_DIR)


# --------------------------------------------------------------------------- zip uploads


def zipped(entries: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return out.getvalue()


def mohr_zip(top: str = "mohr2025/") -> bytes:
    return zipped({f"{top}{p.name}": p.read_bytes() for p in sorted(MOHR_DIR.iterdir())})


def unzip_refusal(data: bytes, into: Path) -> str:
    with pytest.raises(NotImportable) as caught:
        unpack_zip(data, into, "upload.zip")
    return str(caught.value)


def test_a_zipped_mohr_folder_unpacks_and_imports(tmp_path):
    into = tmp_path / "unpacked"
    into.mkdir()
    with_mac = io.BytesIO(mohr_zip())
    with zipfile.ZipFile(with_mac, "a") as archive:  # Finder's resource forks are skipped
        archive.writestr("__MACOSX/mohr2025/._models.csv", b"\x00\x05")
    folder = unpack_zip(with_mac.getvalue(), into, "mohr2025.zip")
    assert folder == into / "mohr2025"
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in MOHR_DIR.iterdir())
    with Store(tmp_path / "a.db") as store:
        summary = import_mohr(store, folder)
    assert summary.effects == 16 and summary.prompts == 4
    flat = tmp_path / "flat"  # files at the archive's top: the folder unpacked into
    flat.mkdir()
    assert unpack_zip(mohr_zip(top=""), flat) == flat


@pytest.mark.parametrize(
    "name",
    ["../evil.csv", "m/../../evil.csv", "/etc/evil.csv", "..\\evil.csv", "C:/evil.csv", "a\nb.csv"],
)
def test_a_zip_entry_that_leaves_the_folder_is_refused(tmp_path, name):
    into = tmp_path / "into"
    into.mkdir()
    said = unzip_refusal(zipped({"m/ok.csv": b"a\n", name: b"x"}), into)
    assert said.startswith("upload.zip: ")
    assert not (tmp_path / "evil.csv").exists() and not Path("/etc/evil.csv").exists()


def test_a_zip_with_a_link_twice_a_name_or_no_zip_at_all_is_refused(tmp_path):
    for n, (data, reason) in enumerate(
        [
            (
                zipped({"m/a.csv": b"a"}, links={"m/models.csv": "/etc/passwd"}),
                "is a symbolic link",
            ),
            (zipped({"m/a.csv": b"a", "m//a.csv": b"b"}), "holds 'm/a.csv' twice"),
            (b"bias,control\n" + SECRET.encode(), "is not a zip archive"),
        ]
    ):
        into = tmp_path / str(n)
        into.mkdir()
        said = unzip_refusal(data, into)
        assert reason in said and SECRET not in said
    assert not (tmp_path / "0" / "m" / "models.csv").exists()


def test_a_zip_is_bounded_in_bytes_as_written_and_in_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(imp, "MAX_ZIP_BYTES", 1000)
    out = io.BytesIO()  # compresses to a few bytes: the bound counts what is written
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("m/big.csv", b"0" * 5000)
    (tmp_path / "a").mkdir()
    assert "unpacks to more than" in unzip_refusal(out.getvalue(), tmp_path / "a")
    monkeypatch.setattr(imp, "MAX_ZIP_MEMBERS", 3)
    (tmp_path / "b").mkdir()
    many = zipped({f"m/{n}.csv": b"a" for n in range(4)})
    assert "holds more than 3 entries" in unzip_refusal(many, tmp_path / "b")
