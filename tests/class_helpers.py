"""The participant server as a participant meets it: `cogbias class serve` in a subprocess on
a free 127.0.0.1 port, and participants as aiohttp sessions with their own cookie jars; and a
question whose every text is hostile."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import aiohttp

from cogbias.classroom import sessions
from cogbias.classroom.questions import Question, classic_question
from cogbias.store import Store

ROOT = Path(__file__).resolve().parent.parent
_URL = re.compile(r"Participants join at (http://\S+)")


_ADDRESSES = itertools.count(1)


def fresh_address() -> str:
    """A network address of its own for one test's participants (documentation range),
    which the server counts as theirs: it trusts X-Forwarded-For from this machine, as from
    a reverse proxy on it. Tests that share a server then share no rate limit."""
    n = next(_ADDRESSES)
    return f"198.51.{100 + n // 250}.{n % 250 + 1}"


def _file_limit(n: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return apply


@contextmanager
def serving(
    db: Path,
    *extra: str,
    timeout: float = 120.0,
    errors: list[str] | None = None,
    file_limit: int | None = None,
) -> Iterator[str]:
    """The join URL base of a running `cogbias class serve` over `db`; stopped on exit.
    `errors` receives what it wrote to its stderr once stopped; `file_limit` caps its open
    files (as a laptop's default of 256 does)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cogbias", "class", "serve", "--port", "0", "--db", str(db), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_file_limit(file_limit) if file_limit else None,
    )
    try:
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline:
            line = process.stdout.readline() if process.stdout else ""
            found = _URL.search(line)
            if found:
                yield found.group(1)
                return
            if process.poll() is not None:
                break
        raise AssertionError(f"the server did not start: {line!r} {process.stderr.read()!r}")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if errors is not None and process.stderr is not None:
            errors.append(process.stderr.read())


def participant(address: str | None = None) -> aiohttp.ClientSession:
    """One participant's browser: its own cookies (kept for an IP address too), from
    `address` when given (`fresh_address`), else from this machine."""
    headers = {"X-Forwarded-For": address} if address else None
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), headers=headers)


async def join_and_answer(
    base: str, code: str, answer: str, address: str | None = None
) -> tuple[int, int]:
    """One participant opens the question and answers: (status of the page, of the post)."""
    async with participant(address) as client:
        async with client.get(f"{base}/s/{code}") as page:
            await page.text()
        async with client.post(
            f"{base}/s/{code}", data={"answer": answer}, allow_redirects=False
        ) as posted:
            return page.status, posted.status


def open_on(db: Path, question: Question | None = None) -> str:
    """A session on `question` (the theatre ticket by default) in the database at `db`."""
    with Store(db) as store:
        return sessions.open_session(
            store, question or classic_question("classics", "theatre_ticket")
        )


def run(coroutine):  # type: ignore[no-untyped-def]
    return asyncio.run(coroutine)


def hostile_question(evil: str) -> Question:
    """The theatre-ticket classic (the humans beside it) with `evil` in its title, condition
    labels, texts and first option, as a user's own test case could carry it."""
    base = classic_question("classics", "theatre_ticket")
    return replace(
        base,
        title=f"Title {evil}",
        labels={c: f"{c} {evil}" for c in base.conditions},
        texts={c: f"Text {evil}\n{base.texts[c]}" for c in base.conditions},
        options={c: (f"Yes {evil}", "No") for c in base.conditions},
    )
