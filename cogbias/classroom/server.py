"""The participant server: the open session's question and one answer per participant,
nothing else (`cogbias class serve`).

It is a separate, small aiohttp app so that the teacher's Streamlit app can stay on
127.0.0.1 while the room reaches this one. It serves three things: `/` (enter a code),
`/s/{code}` (the question, or the result after the reveal) and the answer posted there.
Every other path is a plain 404; responses carry no server name and no script. Each request
reads and writes the database in one short transaction on a single worker thread, so the
teacher's page sees an answer as soon as it is stored and a restart loses none.
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from cogbias.classroom import pages, sessions
from cogbias.store import Store

COOKIE = "cogbias_class"
MAX_BODY = 2048  # bytes of a posted form: one short answer fits many times over
MAX_FIELD = 64  # characters of any one form field
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{43}$")  # secrets.token_urlsafe(32)
_CODE = re.compile(rf"^[{sessions.CODE_ALPHABET}]{{{sessions.CODE_LENGTH}}}$")
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
STORE = web.AppKey("store", Store)
POOL = web.AppKey("pool", ThreadPoolExecutor)
HTTPS = web.AppKey("https", bool)


def make_app(db_path: str | Path, https: bool = False) -> web.Application:
    """The participant app over the database at `db_path` (opened here, closed on cleanup);
    `https`: participants reach it over TLS (a proxy), so the cookie is sent over TLS only."""
    app = web.Application(client_max_size=MAX_BODY, middlewares=[_plain_errors])
    app[HTTPS] = https
    app[STORE] = Store(db_path)
    app[POOL] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="class-db")
    app.router.add_get("/", _home)
    app.router.add_get("/s/{code}", _question, allow_head=False)  # a HEAD assigns nobody
    app.router.add_post("/s/{code}", _answer)
    app.on_response_prepare.append(_headers)
    app.on_cleanup.append(_close)
    return app


async def _close(app: web.Application) -> None:
    app[POOL].shutdown(wait=True)
    app[STORE].close()


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.pop("Server", None)
    response.headers.update(_HEADERS)


@web.middleware
async def _plain_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every error as a short page of ours: no framework page, no path, no traceback."""
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
    except Exception as exc:  # a bug or a database failure: the teacher's terminal says which
        print(f"class server: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return _html(pages.message("Something went wrong", "Please try again in a moment."), 500)


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def _db(request: web.Request, work: Callable[..., T], *args: Any) -> T:
    """Run one store call on the app's database thread (one at a time, off the event loop)."""
    loop = asyncio.get_running_loop()
    store = request.app[STORE]
    return await loop.run_in_executor(request.app[POOL], lambda: work(store, *args))


async def _home(request: web.Request) -> web.Response:
    typed = request.query.get("code", "")
    if not typed:
        return _html(pages.enter_code())
    code = sessions.normal_code(typed[:MAX_FIELD])
    if _CODE.match(code):
        raise web.HTTPSeeOther(f"/s/{code}")
    return _html(pages.enter_code("That is not a session code; check it and type it again."))


def _unknown() -> tuple[str, int]:
    text = "There is no session with this code; check the code your teacher shows."
    return pages.message("No such session", text), 404


def _closed(answered: bool) -> tuple[str, int]:
    """Closed before the reveal: those who answered wait for it (the page reloads itself)."""
    text = "Answers are no longer taken. The result appears here when it is revealed."
    if answered:
        return pages.message("This session is closed", text, refresh=5), 200
    return pages.message("This session is closed", text), 410


def _token(request: web.Request) -> tuple[str, bool]:
    """The participant's token from their cookie, or a new one (True: set the cookie)."""
    token = request.cookies.get(COOKIE, "")
    if _TOKEN.match(token):
        return token, False
    return secrets.token_urlsafe(32), True


async def _question(request: web.Request) -> web.Response:
    token, new = _token(request)
    text, status = await _db(request, _question_page, request.match_info["code"], token)
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


def _question_page(store: Store, code: str, token: str) -> tuple[str, int]:
    """What this participant sees at /s/{code}, read in one go on the database thread."""
    session = sessions.get_session(store, code) if _CODE.match(code) else None
    if session is None:
        return _unknown()
    if session.revealed:  # the result, for those who took part only
        condition = sessions.condition_of(store, session, token)
        if condition is not None:
            answer = sessions.answer_of(store, session, token)
            return pages.revealed(sessions.results(store, session.code), condition, answer), 200
    answer = sessions.answer_of(store, session, token)
    if not session.open:
        return _closed(answer is not None)
    condition = sessions.assign_condition(store, session, token)
    if answer is not None:
        return pages.answered(session.question, condition, answer), 200
    return pages.question_form(session.code, session.question, condition), 200


async def _answer(request: web.Request) -> web.Response:
    code = request.match_info["code"]
    form = await request.post()
    fields = [name for name, _ in form.items()]
    if fields != ["answer"] or any(len(str(v)) > MAX_FIELD for v in form.values()):
        return _html(pages.message("Not accepted", "That form is not one this page sent."), 400)
    token = request.cookies.get(COOKIE, "")
    if not _TOKEN.match(token):
        text = "Open the question first (this page needs cookies to keep your one answer)."
        return _html(pages.message("No question yet", text), 400)
    text, status = await _db(request, _answer_page, code, token, str(form["answer"]))
    if status == 303:
        raise web.HTTPSeeOther(text)
    return _html(text, status)


def _answer_page(store: Store, code: str, token: str, answer: str) -> tuple[str, int]:
    """Store the answer (303 and where to go) or say why not, in one go on the database thread."""
    session = sessions.get_session(store, code) if _CODE.match(code) else None
    if session is None:
        return _unknown()
    if not session.open:
        return _closed(sessions.answer_of(store, session, token) is not None)
    outcome = sessions.submit_answer(store, session, token, answer)
    if outcome == "saved":
        return f"/s/{session.code}", 303
    if outcome == "invalid":
        condition = sessions.assign_condition(store, session, token)
        error = (
            "Please choose one of the answers."
            if session.question.keys
            else ("Please give a number" + _range(session.question) + ".")
        )
        return pages.question_form(session.code, session.question, condition, error), 400
    if outcome == "already":
        text = "You already answered; one answer per person is kept."
        return pages.message("Already answered", text), 409
    if outcome == "unassigned":
        return pages.message("No question yet", "Open the question first."), 400
    return _closed(False)


def _range(question: Any) -> str:
    if question.low is None or question.high is None:
        return ""
    return f" from {question.low:g} to {question.high:g}"


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
    the server runs."""
    app = make_app(db_path, https=bool(public_url and public_url.startswith("https://")))
    runner = web.AppRunner(app, access_log=None)  # no request log: no addresses kept
    await runner.setup()
    base = ""
    stop = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signals off Unix
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = port or _bound_port(runner)
        base = join_base(host, bound, public_url)
        app[STORE].set_class_join_url(base)
        if started is not None:
            started(base)
        await stop.wait()  # until Ctrl-C cancels it or SIGTERM (a service manager) sets it
    finally:
        if base:  # the teacher's page then says the server is not running
            app[STORE].clear_class_join_url(base)
        await runner.cleanup()


def _bound_port(runner: web.AppRunner) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    raise OSError("the server did not bind a port")
