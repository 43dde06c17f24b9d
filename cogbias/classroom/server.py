"""The participant server: the open session's question and one answer per participant,
nothing else (`cogbias class serve`).

It is a separate, small aiohttp app so that the teacher's Streamlit app can stay on
127.0.0.1 while the room reaches this one. It serves three things: `/` (enter a code),
`/s/{code}` (the question on screen of that lesson or session, in its state: the lobby, the
question, answers locked, the result after the reveal) and the answer posted there.
Every other path is a plain 404; responses carry no server name and no script. Each request
reads and writes the database in one short transaction on a database thread
(`store_pool`), so the teacher's page sees an answer as soon as it is stored and a restart
loses none; a locked database gives a quick "try again" page. One address may bring new
participants and answers only at a class's pace (`limits`), and connections that idle or
dawdle are closed (`connections`); what is refused is counted, never logged with an address.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from cogbias.classroom import connections, lessons, limits, pages, sessions
from cogbias.classroom.answer_reading import read_answer
from cogbias.classroom.store_pool import Busy, StorePool
from cogbias.store import Store

COOKIE = "cogbias_class"
MAX_BODY = 2048  # bytes of a posted form: one short answer fits many times over
MAX_FIELD = 64  # characters of any one form field
RETRY = 3  # seconds a "busy" or "too fast" page waits before it tries again by itself
FLUSH_EVERY = 2  # seconds between writes of the refusals per session to the store
REPORT_EVERY = 60  # seconds between the terminal's count lines (only when there is news)
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
_CODE = re.compile(rf"[{sessions.CODE_ALPHABET}]{{{sessions.CODE_LENGTH}}}")
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
T = TypeVar("T")


@dataclass
class Limits:
    """What one address may do (`limits.Buckets`), what was refused (`limits.Tally`) and
    the open connections (`connections.Guard`), for one server."""

    joins: limits.Buckets = field(
        default_factory=lambda: limits.Buckets(limits.JOIN_BURST, limits.JOIN_RATE)
    )
    answers: limits.Buckets = field(
        default_factory=lambda: limits.Buckets(limits.ANSWER_BURST, limits.ANSWER_RATE)
    )
    tally: limits.Tally = field(default_factory=limits.Tally)
    guard: connections.Guard = field(init=False)

    def __post_init__(self) -> None:
        self.guard = connections.Guard(connections.MAX_CONNECTIONS, self.tally)


STORES = web.AppKey("stores", StorePool)
LIMITS = web.AppKey("limits", Limits)
HTTPS = web.AppKey("https", bool)


def make_app(db_path: str | Path, https: bool = False) -> web.Application:
    """The participant app over the database at `db_path` (opened here, closed on cleanup);
    `https`: participants reach it over TLS (a proxy), so the cookie is sent over TLS only."""
    Store(db_path).close()  # the file opens (and is migrated) now, not at the first request
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_plain_errors])
    app[HTTPS] = https
    app[STORES] = StorePool(db_path)
    app[LIMITS] = Limits()
    app.router.add_get("/", _home)
    app.router.add_get("/s/{code}", _question, allow_head=False)  # a HEAD assigns nobody
    app.router.add_post("/s/{code}", _answer)
    app.on_response_prepare.append(_headers)
    app.on_cleanup.append(_close)
    return app


async def _close(app: web.Application) -> None:
    app[STORES].close()


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.pop("Server", None)
    response.headers.update(_HEADERS)


def error_page(status: int) -> web.Response:
    """The reply to a request too broken to reach the app: plain, with the app's headers."""
    text = "Bad request" if status < 500 else "Something went wrong"
    return connections.Bare(text=text, status=status, headers=_HEADERS)


@web.middleware
async def _plain_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every error as a short page of ours: no framework page, no path, no traceback; the
    connection counts as being answered meanwhile (it is not closed as idle)."""
    guard = request.app[LIMITS].guard
    guard.begins(request.protocol)
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        return _html(pages.message("Too long", "That answer is too long."), 413)
    except web.HTTPMethodNotAllowed:
        return _html(pages.message("Not here", "Nothing to see at this address."), 405)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if exc.status == 404:
            return _html(pages.message("Not found", "Nothing to see at this address."), 404)
        return _html(pages.message("Not accepted", "This page cannot take that."), exc.status)
    except Busy:
        request.app[LIMITS].tally.add(limits.BUSY)
        return _busy(request)
    except Exception as exc:  # a bug or a database failure: the teacher's terminal says which
        request.app[LIMITS].tally.add(limits.ERRORS)
        print(f"class server: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return _html(pages.message("Something went wrong", "Please try again in a moment."), 500)
    finally:
        guard.ends(request.protocol)


def _busy(request: web.Request) -> web.Response:
    """503 with Retry-After: the page tries again by itself (a form goes back to its
    question, so the answer is sent again, not lost in a reload)."""
    text = "The class's database is busy for a moment; this page tries again by itself."
    if request.method == "POST":
        text = "The class's database is busy for a moment; your answer is not in yet. "
        text += "This page goes back to your question: send it again."
    page = pages.message("One moment", text, refresh=RETRY, url=_back(request))
    response = _html(page, 503)
    response.headers["Retry-After"] = str(RETRY)
    return response


def _back(request: web.Request) -> str | None:
    """Where a page that tries again goes: the question of a POST, else the page itself."""
    code = request.match_info.get("code", "")
    return f"/s/{code}" if request.method == "POST" and _CODE.fullmatch(code) else None


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def _db(request: web.Request, work: Callable[..., T], *args: Any) -> T:
    """Run one store call on a database thread (off the event loop); Busy when locked."""
    return await request.app[STORES].run(work, *args)


def _address(request: web.Request) -> str:
    """The address this request counts against (in memory only: `limits.client_address`)."""
    return limits.client_address(request.remote, request.headers.get("X-Forwarded-For"))


def _too_fast(request: web.Request, buckets: limits.Buckets, address: str) -> web.Response:
    """429 with Retry-After, counted for the session's teacher: one address asks faster
    than a room does. The page tries again by itself (a form goes back to its question)."""
    code = request.match_info.get("code", "")
    request.app[LIMITS].tally.add(limits.TOO_FAST, code if _CODE.fullmatch(code) else None)
    wait = max(RETRY, buckets.wait(address))
    text = "Many people on your network are joining at once; this page tries again by itself."
    if request.method == "POST":
        text = "Many answers came from your network at once; yours is not in yet. "
        text += "This page goes back to your question: send it again."
    response = _html(pages.message("One moment", text, refresh=wait, url=_back(request)), 429)
    response.headers["Retry-After"] = str(wait)
    return response


async def _home(request: web.Request) -> web.Response:
    typed = request.query.get("code", "")
    if not typed:
        return _html(pages.enter_code())
    code = sessions.normal_code(typed[:MAX_FIELD])
    if _CODE.fullmatch(code):
        raise web.HTTPSeeOther(f"/s/{code}")
    return _html(pages.enter_code("That is not a session code; check it and type it again."))


def _unknown() -> tuple[str, int]:
    text = "There is no session with this code; check the code your teacher shows."
    return pages.message("No such session", text), 404


def _token(request: web.Request) -> tuple[str, bool]:
    """The participant's token from their cookie, or a new one (True: set the cookie)."""
    token = request.cookies.get(COOKIE, "")
    if _TOKEN.fullmatch(token):
        return token, False
    return secrets.token_urlsafe(32), True


async def _question(request: web.Request) -> web.Response:
    token, new = _token(request)
    address = _address(request)
    joins = request.app[LIMITS].joins
    code = request.match_info["code"]
    follow = "still" not in request.query  # "Stop updating": the page waits without reloads
    text, status = await _db(
        request, _question_page, code, token, lambda: joins.take(address), follow
    )
    if status == 429:
        return _too_fast(request, joins, address)
    response = _html(text, status)
    if new and status == 200:
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="Lax",
            path="/s/",
            max_age=12 * 3600,
            secure=request.app[HTTPS],
        )
    return response


def _lesson(store: Store, code: str) -> lessons.Lesson | None:
    """The lesson (or session on its own) a participant's code names, if any."""
    if not _CODE.fullmatch(code):
        return None
    lesson = lessons.get_lesson(store, code)
    return lesson if lesson is not None and lesson.code == code else None


def _question_page(
    store: Store, code: str, token: str, admit: Callable[[], bool], follow: bool = True
) -> tuple[str, int]:
    """What this participant sees at /s/{code}, read in one go on a database thread: the
    question on screen in its state. Opening it in its lobby or while it takes answers
    places a new participant at that question's next place, if `admit` lets them (429 if
    not); after it stopped, only those placed in it see more than that it stopped."""
    lesson = _lesson(store, code)
    if lesson is None:
        return _unknown()
    session, here, place = lesson.session, f"/s/{lesson.code}", lesson.place()
    state, more = session.state, lesson.has_next
    condition = sessions.condition_of(store, session, token)
    answer = sessions.answer_of(store, session, token) if condition is not None else None
    if state in (sessions.LOCKED, sessions.REVEALED):
        revealed = state == sessions.REVEALED
        if condition is None:
            return pages.late(here, revealed, more, place, follow), 200 if more else 410
        if revealed:
            result = sessions.results(store, session.code)
            return pages.revealed(result, condition, answer, here, place, more, follow), 200
        return pages.locked(here, session.question, condition, answer, place, follow), 200
    try:
        condition = sessions.assign_condition(store, session, token, admit)
    except sessions.Throttled:
        return "", 429
    if state == sessions.LOBBY:
        return pages.lobby(here, place, follow), 200
    if answer is not None:
        return pages.answered(here, session.question, condition, answer, place, follow), 200
    return pages.question_form(
        here, session.code, session.question, condition, "", place, session.seconds_left()
    ), 200


_FIELDS = (["answer"], ["question", "answer"])  # a form of an older page had no "question"
_QUESTION = re.compile(rf"[{sessions.CODE_ALPHABET}]{{{sessions.CODE_LENGTH}}}(-[0-9]{{1,2}})?")


async def _answer(request: web.Request) -> web.Response:
    address = _address(request)
    answers = request.app[LIMITS].answers
    if not answers.take(address):
        return _too_fast(request, answers, address)
    try:
        async with asyncio.timeout(connections.BODY):
            form = await request.post()
    except TimeoutError:
        request.app[LIMITS].tally.add(limits.TIMED_OUT)
        text = "Your answer took too long to arrive; please send it again."
        return _html(pages.message("Not received", text), 408)
    except ValueError:  # not form data in UTF-8
        return _html(pages.message("Not accepted", "That form is not one this page sent."), 400)
    fields = [name for name, _ in form.items()]
    asked = str(form.get("question", ""))
    if (
        fields not in _FIELDS
        or any(len(str(v)) > MAX_FIELD for v in form.values())
        or (asked and not _QUESTION.fullmatch(asked))
    ):
        return _html(pages.message("Not accepted", "That form is not one this page sent."), 400)
    token = request.cookies.get(COOKIE, "")
    if not _TOKEN.fullmatch(token):
        text = "Open the question first (this page needs cookies to keep your one answer)."
        return _html(pages.message("No question yet", text), 400)
    code = request.match_info["code"]
    text, status = await _db(request, _answer_page, code, token, str(form["answer"]), asked)
    if status == 303:
        raise web.HTTPSeeOther(text)
    return _html(text, status)


def _answer_page(
    store: Store, code: str, token: str, answer: str, asked: str = ""
) -> tuple[str, int]:
    """Store the answer to the question on screen (303 and where to go) or say why not, in
    one go on a database thread. Nobody is given a place here: only opening the question
    does that. `asked`: the question the form was for; an answer to a question no longer on
    screen is refused, never stored as an answer to the next."""
    lesson = _lesson(store, code)
    if lesson is None:
        return _unknown()
    session, here = lesson.session, f"/s/{lesson.code}"
    if asked and asked != session.code:
        text = "That question no longer takes answers, so yours was not counted. "
        text += "This page goes to the question on screen now."
        return pages.message("That question is over", text, refresh=RETRY, url=here), 409
    if session.state == sessions.LOBBY:
        text = "Answers are not open yet; this page goes back to wait for the question."
        return pages.message("Not open yet", text, refresh=RETRY, url=here), 409
    if not session.open:
        return _stopped(sessions.answer_of(store, session, token) is not None, here)
    outcome = sessions.submit_answer(store, session, token, answer)
    if outcome == "saved":
        return here, 303
    condition = sessions.condition_of(store, session, token)
    if outcome == "invalid" and condition is not None:
        error = read_answer(session.question, answer).problem
        form = pages.question_form(
            here, session.code, session.question, condition, error, lesson.place(),
            session.seconds_left(),
        )  # fmt: skip
        return form, 400
    if outcome == "already":
        text = "You already answered; one answer per person is kept."
        return pages.message("Already answered", text), 409
    if outcome in ("unassigned", "invalid"):
        return pages.message("No question yet", "Open the question first."), 400
    return _stopped(False, here)


def _stopped(answered: bool, here: str) -> tuple[str, int]:
    """An answer sent after answers stopped (locked by the teacher or the countdown)."""
    if answered:
        text = "You already answered; answers are now locked."
        return pages.message("Answers are locked", text, refresh=RETRY, url=here), 409
    text = "Answers to this question were locked before yours arrived, so it was not counted."
    return pages.message("Answers are locked", text, refresh=RETRY, url=here), 410


def lan_address() -> str:
    """This machine's address on its network, found without sending anything (a UDP socket
    "connected" to a documentation address only picks a route); 127.0.0.1 without one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()
    return address if address and not address.startswith("0.") else "127.0.0.1"


def join_base(host: str, port: int, public_url: str | None = None) -> str:
    """The address participants type: `public_url`, else this host and port (the machine's
    network address when listening on every interface)."""
    if public_url:
        return public_url.rstrip("/")
    if host in ("0.0.0.0", "", "::"):
        host = lan_address()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


async def serve(
    db_path: str | Path,
    host: str,
    port: int,
    public_url: str | None = None,
    started: Callable[[str], None] | None = None,
) -> None:
    """Serve until cancelled; `started` gets the join URL base once the port is bound (a
    port of 0 is one the system picks). The base is stored for the teacher's page while
    the server runs (a record of this server's own, so another server on the same file
    keeps its own)."""
    app = make_app(db_path, https=bool(public_url and public_url.startswith("https://")))
    tally = app[LIMITS].tally
    app[LIMITS].guard.most = connections.bound(connections.raise_file_limit())
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, _context: tally.add(limits.ERRORS))  # counted
    runner = web.AppRunner(app, access_log=None)  # no request log: no addresses kept
    await runner.setup()
    key, listening, chores = "", None, None
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off Unix
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        listening = await connections.listen(runner, host, port, app[LIMITS].guard, error_page)
        bound = port or int(listening.sockets[0].getsockname()[1])
        base = join_base(host, bound, public_url)
        with Store(db_path) as store:
            key = store.set_class_join_url(base)
        chores = asyncio.create_task(_chores(app))
        if started is not None:
            started(base)
        await stop.wait()  # until Ctrl-C cancels it or SIGTERM (a service manager) sets it
    finally:
        if chores is not None:
            chores.cancel()
        if listening is not None:
            listening.close()
        if key:  # the teacher's page then says the server is not running
            with Store(db_path) as store:
                store.clear_class_join_url(key)
        await _flush(app)
        _report(app)
        await runner.cleanup()


async def _chores(app: web.Application) -> None:
    """Every second: close connections that waited too long; every `FLUSH_EVERY` s write the
    refusals per session; every `REPORT_EVERY` s print the counts, if any are new."""
    seconds = 0
    while True:
        await asyncio.sleep(1.0)
        seconds += 1
        app[LIMITS].guard.sweep()
        if seconds % FLUSH_EVERY == 0:
            await _flush(app)
        if seconds % REPORT_EVERY == 0:
            _report(app)


async def _flush(app: web.Application) -> None:
    """The refusals as too fast per session, added to the store for the teacher's page."""
    tally = app[LIMITS].tally
    counts = tally.take_sessions()
    if not counts:
        return
    try:
        await app[STORES].run(Store.add_class_throttled, counts)
    except Busy:  # kept for the next time
        tally.give_back(counts)
    except Exception as exc:  # a bug: said, and the counts kept for the next time
        tally.give_back(counts)
        print(f"class server: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def _report(app: web.Application) -> None:
    line = app[LIMITS].tally.news()
    if line:
        print(line, file=sys.stderr, flush=True)
