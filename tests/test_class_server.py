"""The participant server, run as `cogbias class serve` and met over HTTP: it shows a session's
question and keeps one bounded answer per participant, and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from class_helpers import fresh_address, join_and_answer, open_on, participant, run, serving

from cogbias.classroom import questions, sessions
from cogbias.classroom.questions import Question
from cogbias.classroom.server import COOKIE
from cogbias.store import Store

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def hostile_question() -> Question:
    """A test case of someone's own whose words try to be HTML."""
    base = questions.classic_question("classics", "theatre_ticket")
    return Question.from_json(
        base.to_json()
        .replace("You have decided to see a play", HOSTILE.replace('"', '\\"'))
        .replace("A) Yes", "A) <b>Yes</b>")
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    db = tmp_path_factory.mktemp("class") / "class.db"
    Store(db).close()
    with serving(db) as base:
        yield base, db


async def fetch(
    client: aiohttp.ClientSession, method: str, url: str, **kwargs: object
) -> tuple[int, str, dict[str, str]]:
    async with client.request(method, url, allow_redirects=False, **kwargs) as response:
        return response.status, await response.text(), dict(response.headers)


def test_the_server_stores_its_join_address_for_the_teacher(server: tuple[str, Path]) -> None:
    base, db = server
    assert base.startswith("http://127.0.0.1:")
    with Store(db) as store:
        assert sessions.join_base(store) == base


def test_a_participant_answers_once_and_keeps_their_condition(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db)

    async def scenario() -> None:
        async with participant(fresh_address()) as client:
            status, first, headers = await fetch(client, "GET", f"{base}/s/{code}")
            assert status == 200 and 'name=answer value="a"' in first
            cookie = headers["Set-Cookie"]
            assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
            status, again, _ = await fetch(client, "GET", f"{base}/s/{code}")
            assert again == first  # a reload shows the same condition's question
            status, _, headers = await fetch(
                client, "POST", f"{base}/s/{code}", data={"answer": "a"}
            )
            assert status == 303 and headers["Location"] == f"/s/{code}"
            status, thanks, _ = await fetch(client, "GET", f"{base}/s/{code}")
            assert status == 200 and "Your answer is in" in thanks and "A) Yes" in thanks
            status, text, _ = await fetch(client, "POST", f"{base}/s/{code}", data={"answer": "b"})
            assert status == 409 and "already answered" in text

    run(scenario())
    with Store(db) as store:
        assert sum(sessions.count_answers(store, code).values()) == 1
        assert [a.answer for a in store.class_answers(code)] == ["a"]


def test_the_home_page_takes_a_code(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db)

    async def scenario() -> None:
        async with participant(fresh_address()) as client:
            status, text, _ = await fetch(client, "GET", f"{base}/")
            assert status == 200 and "name=code" in text
            typed = f" {code[:3].lower()} {code[3:].lower()}"
            status, _, headers = await fetch(client, "GET", f"{base}/", params={"code": typed})
            assert status == 303 and headers["Location"] == f"/s/{code}"
            status, text, _ = await fetch(client, "GET", f"{base}/", params={"code": "<b>x"})
            assert status == 200 and "not a session code" in text and "<b>x" not in text

    run(scenario())


def test_hostile_answers_and_oversized_fields_are_refused(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db)

    async def scenario() -> None:
        async with participant(fresh_address()) as client:
            await fetch(client, "GET", f"{base}/s/{code}")
            url = f"{base}/s/{code}"
            status, text, _ = await fetch(client, "POST", url, data={"answer": HOSTILE[:60]})
            assert status == 400 and "<script>" not in text and "choose one" in text
            status, text, _ = await fetch(client, "POST", url, data={"answer": "a" * 5000})
            assert status == 413 and "too long" in text
            status, _, _ = await fetch(client, "POST", url, data={"answer": "a" * 100})
            assert status == 400
            status, _, _ = await fetch(client, "POST", url, data={"answer": "a", "name": "Bo"})
            assert status == 400
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            status, _, _ = await fetch(client, "POST", url, data="answer=a&answer=b", headers=form)
            assert status == 400
        async with aiohttp.ClientSession() as stranger:  # no cookie: no question opened
            status, _, _ = await fetch(stranger, "POST", url, data={"answer": "a"})
            assert status == 400

    run(scenario())
    with Store(db) as store:
        assert store.class_answers(code) == []


def test_a_hostile_question_and_its_options_stay_text(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db, hostile_question())

    async def scenario() -> str:
        async with participant(fresh_address()) as client:
            pages = [(await fetch(client, "GET", f"{base}/s/{code}"))[1] for _ in range(6)]
            return "".join(pages)

    text = run(scenario())
    assert "<script>" not in text and "<img" not in text and "<b>Yes" not in text
    assert "&lt;script&gt;" in text or "&lt;b&gt;Yes" in text


def test_a_number_question_takes_only_numbers_in_range(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db, questions.classic_question("classics", "un_anchor"))

    async def scenario() -> None:
        async with participant(fresh_address()) as client:
            status, text, _ = await fetch(client, "GET", f"{base}/s/{code}")
            assert "Percentage:" in text and "inputmode=decimal" in text
            url = f"{base}/s/{code}"
            status, text, _ = await fetch(client, "POST", url, data={"answer": "250"})
            assert status == 400 and "from 0 to 100" in text
            status, _, _ = await fetch(client, "POST", url, data={"answer": "35"})
            assert status == 303

    run(scenario())
    with Store(db) as store:
        assert [a.answer for a in store.class_answers(code)] == ["35"]


def test_unknown_closed_and_revealed_sessions(server: tuple[str, Path]) -> None:
    base, db = server
    closed, revealed = open_on(db), open_on(db)

    async def scenario() -> None:
        async with participant(fresh_address()) as member, participant(fresh_address()) as outsider:
            await fetch(member, "GET", f"{base}/s/{revealed}")
            await fetch(member, "POST", f"{base}/s/{revealed}", data={"answer": "b"})
            await fetch(member, "GET", f"{base}/s/{closed}")
            with Store(db) as store:
                sessions.close_session(store, closed)
                sessions.reveal_session(store, revealed)
            status, text, _ = await fetch(outsider, "GET", f"{base}/s/ZZZZZZ")
            assert status == 404 and "no session with this code" in text
            status, text, _ = await fetch(outsider, "GET", f"{base}/s/{closed}")
            assert status == 410 and "closed" in text
            status, text, _ = await fetch(
                member, "POST", f"{base}/s/{closed}", data={"answer": "a"}
            )
            assert status == 410
            status, text, _ = await fetch(member, "GET", f"{base}/s/{revealed}")
            assert status == 200 and "the class's result" in text and "Original" in text
            assert "You were in the group" in text and "B) No" in text
            # someone who did not take part sees no result of another class's session
            status, text, _ = await fetch(outsider, "GET", f"{base}/s/{revealed}")
            assert status == 410 and "Original" not in text and "You were" not in text

    run(scenario())


def test_nothing_else_is_served(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db)
    paths = [
        "/s/",
        f"/s/{code}/",
        f"/s/{code}/x",
        "/s/../../etc/passwd",
        "/s/%2e%2e%2fclass.db",
        "/class.db",
        f"/{db.name}",
        "/static/app.js",
        "/_stcore/health",
        "/favicon.ico",
        "/.env",
        "/api/results",
        "/s/" + "A" * 5000,
    ]

    async def scenario() -> None:
        async with participant(fresh_address()) as client:
            for path in paths:
                status, text, headers = await fetch(client, "GET", base + path)
                assert status in (404, 414, 400), path
                assert str(db.parent) not in text and "Traceback" not in text, path
                assert "aiohttp" not in text.lower(), path
                assert "Server" not in headers, path
            for method in ("PUT", "DELETE", "PATCH", "HEAD"):  # a link preview assigns nobody
                status, text, headers = await fetch(client, method, f"{base}/s/{code}")
                assert status == 405 and "Server" not in headers
            status, _, headers = await fetch(client, "GET", f"{base}/s/{code}")
            assert "default-src 'none'" in headers["Content-Security-Policy"]
            assert "Server" not in headers

    run(scenario())


def test_sixty_participants_at_once_each_answer_once(server: tuple[str, Path]) -> None:
    base, db = server
    code = open_on(db)

    async def room() -> list[tuple[int, int]]:  # one class behind one address (a school's NAT)
        answers, address = ["a", "b"] * 30, fresh_address()
        return await asyncio.gather(*(join_and_answer(base, code, a, address) for a in answers))

    statuses = run(room())
    assert statuses == [(200, 303)] * 60
    with Store(db) as store:
        assert sessions.count_answers(store, code) == {"lost_ticket": 30, "lost_bill": 30}
        assert len(store.class_answers(code)) == 60


def test_a_restart_keeps_every_answer_and_every_participant(tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    code = open_on(db)

    async def first(base: str) -> str:
        async with participant(fresh_address()) as client:
            await fetch(client, "GET", f"{base}/s/{code}")
            await fetch(client, "POST", f"{base}/s/{code}", data={"answer": "a"})
            return next(c.value for c in client.cookie_jar if c.key == COOKIE)

    async def later(base: str, token: str) -> str:
        async with aiohttp.ClientSession(cookies={COOKIE: token}) as client:
            status, text, _ = await fetch(client, "POST", f"{base}/s/{code}", data={"answer": "b"})
            assert status == 409
            return (await fetch(client, "GET", f"{base}/s/{code}"))[1]

    with serving(db) as base:
        token = run(first(base))
    with Store(db) as store:  # stopped: the teacher's page no longer shows its address
        assert sessions.join_base(store) is None
    with serving(db) as base:
        text = run(later(base, token))
    assert "Your answer is in" in text
    with Store(db) as store:
        assert [a.answer for a in store.class_answers(code)] == ["a"]


def test_a_broken_session_row_gives_a_plain_error_page(server: tuple[str, Path]) -> None:
    base, db = server
    with Store(db) as store:
        store.add_class_session("BRKN23", '{"source": "classic", "title": ')

    async def scenario() -> tuple[int, str, dict[str, str]]:
        async with participant(fresh_address()) as client:
            return await fetch(client, "GET", f"{base}/s/BRKN23")

    status, text, headers = run(scenario())
    assert status == 500 and "try again" in text
    assert "JSON" not in text and "Traceback" not in text and str(db.parent) not in text
    assert "Server" not in headers


def test_behind_https_the_cookie_is_sent_over_tls_only(tmp_path: Path) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from cogbias.classroom.server import make_app

    db = tmp_path / "tls.db"
    code = open_on(db)

    async def scenario() -> tuple[str, str]:
        cookies = []
        for https in (True, False):
            async with TestClient(TestServer(make_app(db, https=https))) as client:
                response = await client.get(f"/s/{code}")
                cookies.append(response.headers["Set-Cookie"])
        return cookies[0], cookies[1]

    secure, plain = run(scenario())
    assert "Secure" in secure and "Secure" not in plain


def test_a_lesson_is_followed_at_one_code_and_a_late_answer_never_counts_for_the_next(
    server: tuple[str, Path],
) -> None:
    from cogbias.classroom import lessons

    base, db = server
    with Store(db) as store:
        code = lessons.open_lesson(store, [questions.classic_question("classics", "linda")] * 2)
    url = f"{base}/s/{code}"

    async def scenario() -> None:
        async with participant(fresh_address()) as you, participant(fresh_address()) as late:
            status, text, _ = await fetch(you, "GET", url)
            assert status == 200 and "You are in" in text and 'http-equiv="refresh"' in text
            status, text, _ = await fetch(you, "POST", url, data={"answer": "a"})
            assert status == 409 and "not open yet" in text  # the lobby takes no answer
            with Store(db) as store:
                lessons.start(store, code)
            status, text, _ = await fetch(you, "GET", url)
            assert status == 200 and f'name="question" value="{code}-1"' in text
            assert 'http-equiv="refresh"' not in text  # a question never reloads
            with Store(db) as store:
                lessons.next_question(store, code)  # question 1 locked, 2 open
            form = {"question": f"{code}-1", "answer": "a"}  # the form of question 1, late
            status, text, _ = await fetch(you, "POST", url, data=form)
            assert status == 409 and "That question is over" in text
            status, text, _ = await fetch(you, "GET", url)
            assert "Question 2 of 2" in text and f'value="{code}-2"' in text
            form = {"question": f"{code}-2", "answer": "b"}
            status, _, _ = await fetch(you, "POST", url, data=form)
            assert status == 303
            status, text, _ = await fetch(you, "GET", f"{url}?still=1")
            assert "Thank you" in text and 'http-equiv="refresh"' not in text
            assert "Check again" in text
            with Store(db) as store:
                lessons.lock(store, code)
            status, text, _ = await fetch(late, "GET", url)
            assert status == 410 and "Answers to this question are locked" in text
            form = {"question": "not a code!", "answer": "b"}
            status, _, _ = await fetch(you, "POST", url, data=form)
            assert status == 400

    run(scenario())
    with Store(db) as store:
        assert [a.answer for a in store.class_answers(f"{code}-1")] == []
        assert [a.answer for a in store.class_answers(f"{code}-2")] == ["b"]


def test_a_number_is_shown_back_as_it_was_stored(server: tuple[str, Path]) -> None:
    """Before: "40,5" was taken without saying how it was read; "25%" was refused."""
    base, db = server
    code = open_on(db, questions.classic_question("classics", "un_anchor"))

    async def answer(typed: str) -> str:
        async with participant(fresh_address()) as client:
            await fetch(client, "GET", f"{base}/s/{code}")
            status, _, _ = await fetch(client, "POST", f"{base}/s/{code}", data={"answer": typed})
            assert status == 303, typed
            return (await fetch(client, "GET", f"{base}/s/{code}"))[1]

    assert 'stored as the number:</p><p class="given">40.5</p>' in run(answer("40,5"))
    assert '<p class="given">25</p>' in run(answer("25%"))
    with Store(db) as store:
        assert sorted(a.answer for a in store.class_answers(code)) == ["25", "40.5"]
