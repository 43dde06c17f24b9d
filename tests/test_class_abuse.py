"""The participant server against a prankster (issue 45): each break the issue found, first
made as the prankster made it, then what the server does instead. The server runs as
`cogbias class serve` in a subprocess; "addresses" are X-Forwarded-For values, which it
trusts from this machine only (a reverse proxy on it)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from class_helpers import fresh_address, join_and_answer, open_on, participant, run, serving

from cogbias.classroom import limits, questions, sessions
from cogbias.store import Store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    """A running server, its database and (once the module is done) what it printed."""
    db = tmp_path_factory.mktemp("abuse") / "class.db"
    Store(db).close()
    printed: list[str] = []
    with serving(db, errors=printed) as base:
        yield base, db, printed
    text = "".join(printed)
    assert "Traceback" not in text and "127.0.0.1" not in text and "198.51." not in text, text


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def stuff(base: str, code: str, tries: int, address: str) -> list[tuple[int, str]]:
    """The prankster: open the question without a cookie, again and again, and answer "a"
    (Yes) only when handed the lost ticket: (status of each page, the condition it showed)."""
    seen = []
    async with participant(address) as client:
        for _ in range(tries):
            client.cookie_jar.clear()  # a new participant every time
            async with client.get(f"{base}/s/{code}") as page:
                text = await page.text()
            condition = "lost_ticket" if "ticket is gone" in text else "lost_bill"
            seen.append((page.status, condition if page.status == 200 else ""))
            if page.status == 200 and condition == "lost_ticket":
                await client.post(f"{base}/s/{code}", data={"answer": "a"})
    return seen


def test_ballot_stuffing_follows_the_balanced_order_and_is_held_to_the_rate(
    server: tuple[str, Path, list[str]],
) -> None:
    """Before: a client that dropped its cookie stored 200 "Yes" answers in 2 s, every one
    in the condition it wanted. Now every new participant takes the session's next place,
    and one address brings at most the burst and the rate's refill."""
    base, db, _ = server
    code = open_on(db)
    began = time.monotonic()
    seen = run(stuff(base, code, 200, fresh_address()))
    elapsed = time.monotonic() - began
    allowed = limits.JOIN_BURST + limits.JOIN_RATE * elapsed + 1
    given = [condition for status, condition in seen if status == 200]
    assert {status for status, _ in seen} == {200, 429}
    assert limits.JOIN_BURST <= len(given) <= allowed
    with Store(db) as store:
        seed = store.query("select seed from class_sessions where code = ?", (code,))[0]["seed"]
        stored = store.class_answers(code)
        conditions = sessions.get_session(store, code).question.conditions
    # the conditions it was handed are the session's sequence, place by place: no choice
    assert given == [sessions.balanced_condition(conditions, seed, i) for i in range(len(given))]
    assert all(set(given[i : i + 2]) == set(conditions) for i in range(0, len(given) - 1, 2))
    # it kept the answers of its lost-ticket places only: about half of what it was allowed
    assert len(stored) == given.count("lost_ticket") <= allowed / 2 + 1
    assert {a.condition for a in stored} == {"lost_ticket"}


def test_bare_gets_are_held_to_the_rate_and_unknown_codes_create_nobody(
    server: tuple[str, Path, list[str]],
) -> None:
    """Before: cookie-less GETs made ~350 participants a second."""
    base, db, _ = server
    code = open_on(db)

    async def flood(path: str, n: int, address: str) -> list[int]:
        async with aiohttp.ClientSession(headers={"X-Forwarded-For": address}) as client:
            statuses = []
            for _ in range(n):
                client.cookie_jar.clear()
                async with client.get(base + path) as page:
                    statuses.append(page.status)
            return statuses

    began = time.monotonic()
    statuses = run(flood(f"/s/{code}", 150, fresh_address()))
    elapsed = time.monotonic() - began
    assert run(flood("/s/ZZZZZZ", 20, fresh_address())) == [404] * 20
    with Store(db) as store:
        placed = store.query(
            "select count(*) as n from class_assignments where session = ?", (code,)
        )
        unknown = store.query(
            "select count(*) as n from class_assignments where session = 'ZZZZZZ'"
        )
    assert (
        placed[0]["n"] == statuses.count(200) <= limits.JOIN_BURST + limits.JOIN_RATE * elapsed + 1
    )
    assert statuses.count(429) > 0 and unknown[0]["n"] == 0


def test_a_throttled_page_tries_again_and_the_teacher_sees_the_count(
    server: tuple[str, Path, list[str]],
) -> None:
    base, db, _ = server
    code = open_on(db)
    address = fresh_address()
    seen = run(stuff(base, code, limits.JOIN_BURST + 20, address))
    assert any(status == 429 for status, _ in seen)

    async def refused() -> tuple[int, str, dict[str, str]]:
        async with participant(address) as client:
            async with client.get(f"{base}/s/{code}") as page:
                return page.status, await page.text(), dict(page.headers)

    status, text, headers = run(refused())
    assert status == 429 and int(headers["Retry-After"]) >= 1
    assert 'http-equiv="refresh"' in text and "tries again" in text and "Server" not in headers
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    deadline = time.monotonic() + 60  # the server writes its counts every 2 s
    with Store(db) as store:
        while sessions.throttled_count(store, code) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sessions.throttled_count(store, code) >= 1


def test_a_class_of_sixty_behind_one_address_joins_while_a_prankster_shares_it(
    server: tuple[str, Path, list[str]],
) -> None:
    """One NAT: 60 participants join at once and answer, each once; the limits hold a
    client that stuffs from another address, not them."""
    base, db, _ = server
    code = open_on(db)

    async def room() -> list[tuple[int, int]]:
        address = fresh_address()
        stuffer = asyncio.create_task(stuff(base, code, 100, fresh_address()))
        answers = ["a", "b"] * 30
        statuses = await asyncio.gather(*(join_and_answer(base, code, a, address) for a in answers))
        await stuffer
        return statuses

    assert run(room()) == [(200, 303)] * 60


async def raw(port: int, data: bytes, wait: float = 60.0) -> bytes:
    """Send `data` on a fresh connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


def test_idle_and_half_sent_connections_are_closed(server: tuple[str, Path, list[str]]) -> None:
    """Before: 0 of 200 idle connections were closed in 60 s."""
    base, _, _ = server
    port = port_of(base)

    async def scenario() -> list[bytes]:
        idle = [raw(port, b"") for _ in range(10)]
        half = [raw(port, b"GET / HTTP/1.1\r\nHost: x\r\n") for _ in range(10)]
        return await asyncio.gather(*idle, *half)  # TimeoutError if any stays open

    assert run(scenario()) == [b""] * 20


def test_a_half_sent_answer_is_refused(server: tuple[str, Path, list[str]]) -> None:
    base, db, _ = server
    code = open_on(db)
    head = (
        f"POST /s/{code} HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded"
        "\r\nContent-Length: 200\r\n\r\nanswer="
    ).encode()
    reply = run(raw(port_of(base), head))
    assert reply.startswith(b"HTTP/1.1 408") or reply == b""


def test_malformed_requests_get_a_plain_400_and_no_log(server: tuple[str, Path, list[str]]) -> None:
    """Before: aiohttp's own 400 page with its Server header and none of ours, and a
    traceback naming the sender's address in the teacher's terminal."""
    base, _, _ = server
    port = port_of(base)
    broken = [
        b"GET / HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    ]

    async def scenario() -> list[bytes]:
        return await asyncio.gather(*(raw(port, data) for data in broken))

    for reply in run(scenario()):
        head = reply.split(b"\r\n\r\n")[0].decode("latin-1").lower()
        assert head.startswith(("http/1.1 400", "http/1.0 400")), head
        assert "\r\nserver:" not in head and "aiohttp" not in reply.decode("latin-1").lower()
        assert "content-security-policy: default-src 'none'" in head
        assert "x-content-type-options: nosniff" in head


def test_an_undecodable_answer_is_400_and_a_code_with_a_newline_is_404(
    server: tuple[str, Path, list[str]],
) -> None:
    base, db, _ = server
    code = open_on(db)

    async def scenario() -> tuple[int, int, int]:
        async with participant(fresh_address()) as client:
            async with client.get(f"{base}/s/{code}") as page:
                await page.text()
            form = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
            async with client.post(
                f"{base}/s/{code}", data=b"answer=\xff\xfe", headers=form
            ) as posted:
                undecodable = posted.status
            async with client.get(f"{base}/s/{code}%0A") as page:
                newline = page.status
            async with client.get(f"{base}/s/{code}%20") as page:
                space = page.status
            return undecodable, newline, space

    assert run(scenario()) == (400, 404, 404)
    with Store(db) as store:
        assert store.class_answers(code) == []


def test_a_number_answer_is_bounded_even_without_a_stated_maximum(
    server: tuple[str, Path, list[str]],
) -> None:
    """Before: mohr8's endowment took 1e308, and two of them made the class's mean inf."""
    base, db, _ = server
    question = questions.classic_question("mohr8", "endowment")
    assert question.low == 0 and question.high is not None and question.high <= 1000
    code = open_on(db, question)

    async def scenario() -> list[int]:
        statuses = []
        for answer in ("1e308", "inf", "nan", "-5", "1e40", "7.5"):
            async with participant(fresh_address()) as client:
                async with client.get(f"{base}/s/{code}") as page:
                    await page.text()
                async with client.post(
                    f"{base}/s/{code}", data={"answer": answer}, allow_redirects=False
                ) as posted:
                    statuses.append(posted.status)
        return statuses

    assert run(scenario()) == [400, 400, 400, 400, 400, 303]
    with Store(db) as store:
        assert [a.answer for a in store.class_answers(code)] == ["7.5"]
        result = sessions.results(store, code)
    assert all(row.mean is None or row.mean == 7.5 for row in result.conditions)


def test_a_locked_database_gives_a_quick_try_again_page(
    server: tuple[str, Path, list[str]],
) -> None:
    """Before: with another process holding the write lock, a join waited 39.5 s and an
    answer failed after 30 s. Now both get 503 with Retry-After (the server waits at most
    its short lock wait), a participant already placed still sees their question, and all
    works again once the lock is gone."""
    base, db, _ = server
    code = open_on(db)
    address, url = fresh_address(), f"{base}/s/{code}"

    async def get(client: aiohttp.ClientSession) -> tuple[int, str]:
        async with client.get(url) as page:
            await page.text()
            return page.status, page.headers.get("Retry-After", "")

    async def post(client: aiohttp.ClientSession, answer: str) -> tuple[int, str]:
        async with client.post(url, data={"answer": answer}, allow_redirects=False) as posted:
            text = await posted.text()
            return posted.status, posted.headers.get("Retry-After", "") + text

    async def scenario() -> list[tuple[int, str]]:
        async with participant(address) as placed, participant(address) as newcomer:
            seen = [await get(placed)]
            lock = sqlite3.connect(db, timeout=30)
            lock.execute("BEGIN IMMEDIATE")  # another process writing, for a long time
            try:
                seen += [await get(newcomer), await get(placed), await post(placed, "a")]
            finally:
                lock.rollback()
                lock.close()
            await asyncio.sleep(3)  # the server's pause after a lock has passed
            return [*seen, await post(placed, "b"), await get(newcomer)]

    before, joining, reloading, answering, answered, joined = run(scenario())
    assert before[0] == 200 and reloading[0] == 200  # a placed participant only reads
    assert joining[0] == 503 and int(joining[1]) >= 1
    assert answering[0] == 503 and "send it again" in answering[1]
    assert answered[0] == 303 and joined[0] == 200
    with Store(db) as store:
        assert [a.answer for a in store.class_answers(code)] == ["b"]


def test_stopping_one_of_two_servers_keeps_the_others_join_link(tmp_path: Path) -> None:
    db = tmp_path / "two.db"
    Store(db).close()
    with serving(db) as first:
        with serving(db) as second:
            assert first != second
            with Store(db) as store:
                assert sessions.join_base(store) == second
        with Store(db) as store:
            assert sessions.join_base(store) == first  # the one still serving
    with Store(db) as store:
        assert sessions.join_base(store) is None


def test_idle_connections_at_a_laptops_file_limit_lock_nobody_out(tmp_path: Path) -> None:
    """Before: at an open-file limit of 256, 250 idle connections from one client locked
    participants out and printed ~150,000 tracebacks in 35 s."""
    db = tmp_path / "files.db"
    code = open_on(db)
    printed: list[str] = []
    with serving(db, errors=printed, file_limit=256) as base:
        port = port_of(base)

        async def scenario() -> tuple[int, int]:
            hogs = []
            for _ in range(250):
                hogs.append(await asyncio.open_connection("127.0.0.1", port))
            try:  # (locked out, it would wait for ever)
                return await asyncio.wait_for(
                    join_and_answer(base, code, "a", fresh_address()), 120
                )
            finally:
                for _, writer in hogs:
                    writer.close()

        assert run(scenario()) == (200, 303)
    text = "".join(printed)
    assert "Traceback" not in text and "127.0.0.1" not in text, text
    assert len(text) < 2000 and "connections closed to make room" in text
