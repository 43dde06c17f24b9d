"""A Hub download is bounded in time and leaves no partial file (issue 22, point 8): a server
that sends a byte every few seconds is given up on (a stall detector and an overall
deadline, configurable so these tests take a second), and the `.part` file goes on every
exit path: an error, SIGTERM, and kill -9 (the next download removes it)."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cogbias.datasets.common import DatasetError
from cogbias.datasets.hub import download
from cogbias.store import Store
from tests.dataset_helpers import HUB_CSV, snapshot

ROOT = Path(__file__).resolve().parent.parent


class Handler(http.server.BaseHTTPRequestHandler):
    """/slow.csv: one byte every 0.2 s of a promised megabyte; /steady.csv: 4 KiB every
    0.05 s, forever (fast enough for the stall detector, too long for a deadline); any
    other path: the Hub fixture."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.endswith(("/slow.csv", "/steady.csv")):
            slow = self.path.endswith("/slow.csv")
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"a" if slow else b"a" * 4096)
                    self.wfile.flush()
                    time.sleep(0.2 if slow else 0.05)
            except OSError:
                return  # the client gave up
        body = HUB_CSV.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_trickling_server_is_given_up_on_and_no_part_file_stays(
    server: str, tmp_path: Path
) -> None:
    with pytest.raises(DatasetError, match=r"the download stalled: \d+ bytes in 1 s"):
        download(f"{server}/slow.csv", tmp_path, stall=1.0, deadline=30.0)
    assert list(tmp_path.iterdir()) == []


def test_a_download_past_its_deadline_ends_and_no_part_file_stays(
    server: str, tmp_path: Path
) -> None:
    with pytest.raises(DatasetError, match=r"the download took longer than 1\.5 s"):
        download(f"{server}/steady.csv", tmp_path, stall=1.0, deadline=1.5)
    assert list(tmp_path.iterdir()) == []


def start_import(server: str, folder: Path, db: Path) -> subprocess.Popen[str]:
    """`cogbias import malberg2024-hub` from the trickling server, once its `.part` exists."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COGBIAS_HUB_URL": server,
           "COGBIAS_HUB_FILE": "slow.csv", "COGBIAS_DOWNLOAD_STALL": "600"}  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "cogbias", "import", "malberg2024-hub", "--download-dir",
         str(folder), "--db", str(db)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for _ in range(600):
        if list(folder.glob("*.part")) or worker.poll() is not None:
            break
        time.sleep(0.1)
    assert list(folder.glob("slow.csv.*.part")), "the download did not start"
    return worker


def test_sigterm_during_a_download_removes_its_part_file(server: str, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    Store(db).close()
    before = snapshot(db)
    folder = tmp_path / "dl"
    worker = start_import(server, folder, db)
    worker.send_signal(signal.SIGTERM)
    worker.communicate(timeout=60)
    assert worker.returncode != 0
    assert list(folder.iterdir()) == []
    assert snapshot(db) == before


def test_the_part_file_of_a_killed_download_is_removed_by_the_next(
    server: str, tmp_path: Path
) -> None:
    """The probe: a download killed with -9 left a `.part` the docs say never stays (no
    process can clean up after kill -9: the next download of the same file does)."""
    db = tmp_path / "x.db"
    Store(db).close()
    folder = tmp_path / "dl"
    worker = start_import(server, folder, db)
    worker.kill()
    worker.communicate(timeout=60)
    assert len(list(folder.glob("*.part"))) == 1  # what the probe found
    path = download(f"{server}/dataset.csv", folder)
    assert path.read_bytes() == HUB_CSV.read_bytes()
    assert sorted(p.name for p in folder.iterdir()) == ["dataset.csv"]
