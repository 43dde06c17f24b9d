"""The Datasets page reads only from importable folders (issue 29, point 2), with AppTest.

The app is served, so "a path on this machine" is read by the server: a system file, a file
outside the importable folders and a dataset folder holding a link out of them are refused
with the path and the reason, and nothing they hold is shown (the generic format's column
picker used to show a refused file's first line). A folder can arrive as a zip upload instead.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from cogbias.store import Store
from tests.dataset_helpers import FIXTURES, MOHR_DIR
from tests.test_page_datasets import button, page, texts

MARK = "SECRETCOLUMN"  # in the outside file's header: a column picker would offer it


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "app.db"
    monkeypatch.setenv("COGBIAS_DB", str(path))
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    monkeypatch.setenv("COGBIAS_IMPORT_DIRS", os.pathsep.join([str(FIXTURES), str(allowed)]))
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A header-shaped file outside the importable folders: the generic format could map it."""
    path = tmp_path / "outside" / "private.csv"
    path.parent.mkdir()
    path.write_text(f"bias,{MARK},treatment\nanchoring,x,y\n")
    return path


def everything_shown(at: AppTest) -> str:
    """Every text, option and cell the page shows."""
    parts = [texts(at), *(str(t.value) for t in at.text)]
    parts += [str(o) for box in at.selectbox for o in box.options]
    parts += [d.value.to_csv() for d in at.dataframe]
    return "\n".join(parts)


def path_import(at: AppTest, fmt: str, path: str | Path) -> None:
    at.radio(key="ds_src").set_value("A path on this machine").run()
    at.selectbox(key="ds_fmt").set_value(fmt).run()
    at.text_input(key="ds_path").set_value(str(path)).run()
    assert not at.exception, at.exception


def test_the_page_names_the_importable_folders_and_how_to_add_one(db):
    at = page()
    at.radio(key="ds_src").set_value("A path on this machine").run()
    shown = texts(at)
    assert f"The app reads only inside these folders: {Path(os.environ['COGBIAS_HOME'])}" in shown
    assert str(FIXTURES) in shown and "COGBIAS_IMPORT_DIRS" in shown


def test_a_system_file_is_refused_and_no_line_of_it_is_shown(db):
    first = Path("/etc/passwd").read_text().splitlines()[0]
    at = page()
    path_import(at, "generic", "/etc/passwd")
    error = at.error[0].value.replace("\\", "")
    assert error.startswith("/etc/passwd: is not inside a folder the app may import from")
    assert first not in everything_shown(at) and "root:" not in everything_shown(at)
    assert not [b for b in at.selectbox if b.key == "ds_map_bias"]  # no column picker
    assert button(at, "Import").disabled


def test_a_header_shaped_file_outside_cannot_be_mapped_or_imported(db, outside):
    at = page()
    path_import(at, "generic", outside)
    assert MARK not in everything_shown(at)
    assert f"{outside}: is not inside a folder" in texts(at)
    assert not [b for b in at.selectbox if b.key == "ds_map_bias"]
    assert button(at, "Import").disabled
    link = db.parent / "allowed" / "data.csv"  # a link inside, to it: refused the same way
    link.symlink_to(outside)
    at.text_input(key="ds_path").set_value(str(link)).run()
    assert MARK not in everything_shown(at)
    assert "a symbolic link on its way leads out of them" in texts(at)
    with Store(db) as store:
        assert store.datasets() == []


def test_a_mohr_folder_with_a_file_linked_outside_is_refused(db, outside):
    folder = db.parent / "allowed" / "mohr2025"
    shutil.copytree(MOHR_DIR, folder)
    (folder / "models.csv").unlink()
    (folder / "models.csv").symlink_to(outside)
    at = page()
    path_import(at, "mohr2025", folder)
    assert f"{folder}/models.csv: is not inside a folder" in texts(at)
    assert MARK not in everything_shown(at)
    assert button(at, "Import").disabled
    with Store(db) as store:
        assert store.datasets() == []


def zipped(entries: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return out.getvalue()


def upload(at: AppTest, fmt: str, name: str, data: bytes) -> None:
    at.radio(key="ds_src").set_value("Upload a file").run()
    at.selectbox(key="ds_fmt").set_value(fmt).run()
    at.file_uploader(key=f"ds_upload_{fmt}").set_value((name, data, "application/zip")).run()
    assert not at.exception, at.exception


def test_a_zipped_mohr_folder_uploads_and_imports(db):
    at = page()
    data = zipped({f"04_Datasets/{p.name}": p.read_bytes() for p in MOHR_DIR.iterdir()})
    upload(at, "mohr2025", "04_Datasets.zip", data)
    button(at, "Import").click().run()
    assert not at.exception, at.exception
    assert "16 effect sizes of 2 model(s)" in texts(at)
    with Store(db) as store:
        assert [d["name"] for d in store.datasets()] == ["mohr2025"]


def test_a_zip_with_entries_that_climb_out_is_refused(db, tmp_path, monkeypatch):
    unpacked = tmp_path / "t" / "u"  # the upload is unpacked below here, three levels down
    unpacked.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(unpacked))
    at = page()
    files = {f"m/{p.name}": p.read_bytes() for p in MOHR_DIR.iterdir()}
    data = zipped({**files, "m/../../../escaped.csv": b"bias\nx\n"})
    upload(at, "mohr2025", "m.zip", data)
    button(at, "Import").click().run()
    assert not at.exception
    error = at.error[0].value.replace("\\", "")
    assert "m.zip: 'm/../../../escaped.csv' is not a name inside the archive's folder" in error
    assert "The database was not changed" in error
    assert not list(tmp_path.rglob("escaped.csv")) and not Path("/escaped.csv").exists()
    assert not list(unpacked.iterdir())  # the temporary folder is gone
    with Store(db) as store:
        assert store.datasets() == []
