"""The participant server's pages: plain HTML forms with inline CSS, no script.

Every text that came from a file or a person (the question, its options, labels, the answer)
is put in with `html.escape`, so it shows as text whatever it holds.

A phone follows the session by itself: a page that waits for the teacher (the lobby, an
answer given, answers locked, a result with a next question to come) reloads every few
seconds (`refresh`), with a link that stops it (`?still`: WCAG 2.2.1, a timing the reader
can turn off) and one that checks again. The question itself never reloads (the choice
being made would be lost); its countdown runs in CSS and hides the Send button at zero,
and an answer sent after it is refused with that said. Every page has one `main` landmark,
a language, labelled fields, visible focus and text of at least 7:1 contrast.
"""

from __future__ import annotations

import math
from html import escape

from cogbias.classroom import reveal
from cogbias.classroom.answer_reading import number_text
from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import ClassResults, ConditionResult, HumanResult

WAIT = 4  # seconds between reloads of a page waiting for the teacher
_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:40rem;
margin:0 auto;padding:1rem;line-height:1.5;color:#1b1b1b;background:#fff}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
.question{white-space:pre-wrap;font-size:1.1rem}
fieldset{border:0;padding:0;margin:0}legend{font-weight:600;padding:0}
label.option{display:block;padding:.6rem;margin:.4rem 0;border:1px solid #767676;
border-radius:.4rem}
label.option:has(input:checked){border:2px solid #1d4380;background:#eef3fb}
input[type=text]{font-size:1.2rem;padding:.4rem;width:12rem;border:1px solid #767676}
button{font-size:1.1rem;padding:.6rem 1.4rem;margin-top:.8rem;border-radius:.4rem;
border:1px solid #14305c;background:#1d4380;color:#fff}
:focus-visible{outline:3px solid #b35900;outline-offset:2px}
a{color:#1d4380}
.note{color:#454545}.error{color:#a00000;font-weight:600}
.given{font-size:1.15rem;font-weight:600;border-left:4px solid #1d4380;padding-left:.6rem}
.state{display:inline-block;font-weight:600;color:#1b1b1b;background:#e8e8e8;
padding:.1rem .5rem;border-radius:.3rem}
ul.shares{list-style:none;padding:0;margin:0}
ul.shares li{border-bottom:1px solid #ddd;padding:.3rem 0}ul.shares p{margin:.2rem 0}
.line{white-space:nowrap}
.track{display:inline-block;width:9rem;height:.9rem;background:#e8e8e8;vertical-align:middle}
.bar{background:#1d4380;height:100%;display:block}
.human{background:#595959}.who{display:inline-block;width:4.8rem}
.timer{height:.6rem;background:#e8e8e8;border-radius:.3rem;overflow:hidden}
.timer span{display:block;height:100%;background:#1d4380;animation:shrink linear forwards}
.timeup{visibility:hidden;animation:show 0s forwards}
.send{animation:hide 0s forwards}
@keyframes shrink{from{width:100%}to{width:0}}
@keyframes show{to{visibility:visible}}
@keyframes hide{to{visibility:hidden}}
@media (prefers-reduced-motion:reduce){.timer span{animation:none}}
""".strip()


def page(
    title: str, body: str, refresh: int | None = None, url: str | None = None, here: str = ""
) -> str:
    """A whole page; `refresh` reloads it every so many seconds (waiting for the teacher),
    or then goes to `url` (a form's page back to its question, so nothing is posted again).
    `here`: the page's own address, for its "stop updating" and "check again" links."""
    target = f";url={escape(url)}" if url else ""
    meta = f'<meta http-equiv="refresh" content="{refresh}{target}">' if refresh else ""
    if here and refresh:
        body += (
            '<p class="note">This page updates by itself every few seconds. '
            f'<a href="{escape(here)}?still=1">Stop updating</a></p>'
        )
    elif here:
        body += f'<p class="note"><a href="{escape(here)}">Check again</a></p>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><main>{body}</main></body></html>"
    )


def enter_code(message: str = "") -> str:
    error = f'<p class="error" id="problem">{escape(message)}</p>' if message else ""
    described = ' aria-describedby="problem"' if message else ""
    return page(
        "Join the class",
        "<h1>Join the class</h1>"
        f'{error}<form method="get" action="/"><label for="code">Code shown by your teacher'
        "</label><br><input type=text id=code name=code maxlength=12 "
        f'autocomplete="off" autocapitalize="characters" required autofocus{described}><br>'
        '<button type="submit">Join</button></form>',
    )


def message(
    title: str, text: str, refresh: int | None = None, url: str | None = None, here: str = ""
) -> str:
    return page(title, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>", refresh, url, here)


def _place(place: str, state: str) -> str:
    """'Question 2 of 3 · taking answers', as a line above a page's heading."""
    words = " · ".join(w for w in (place.capitalize(), state) if w)
    return f'<p><span class="state">{escape(words)}</span></p>' if words else ""


def lobby(here: str, place: str, follow: bool = True) -> str:
    """Joined, before the teacher opens the question."""
    return page(
        "You are in",
        _place(place, "waiting to start")
        + "<h1>You are in</h1><p>Your teacher opens the question in a moment; it appears "
        "on this page.</p>",
        WAIT if follow else None,
        here=here,
    )


def question_form(
    here: str,
    session_code: str,
    question: Question,
    condition: str,
    error: str = "",
    place: str = "",
    seconds_left: float | None = None,
) -> str:
    """The participant's question in their condition, and one answer to give; with a
    countdown, a bar that runs out and the Send button hidden at zero (CSS, no script)."""
    problem = f'<p class="error" id="problem" role="alert">{escape(error)}</p>' if error else ""
    described = ' aria-describedby="problem"' if error else ""
    if question.kind == "number":
        field = (
            f'<label for="answer">{escape(question.number_label or "Your answer")}</label><br>'
            f"<input type=text id=answer name=answer inputmode=decimal maxlength=20 "
            f"required{_bounds(question)}{described}>"
        )
    else:
        options = "".join(
            f'<label class="option"><input type=radio name=answer value="{escape(key)}" '
            f"required> {escape(label)}</label>"
            for key, label in zip(question.keys, question.options[condition], strict=False)
        )
        field = f"<fieldset{described}><legend>Your answer</legend>{options}</fieldset>"
    timer, send, timeup = "", "", ""
    if seconds_left is not None:
        left = max(1, math.ceil(seconds_left))
        timer = (
            f'<p>About {left} seconds left to answer.</p><div class="timer" aria-hidden="true">'
            f'<span style="animation-duration:{left}s"></span></div>'
        )
        send = f' class="send" style="animation-delay:{left}s"'
        timeup = (
            f'<p class="timeup error" style="animation-delay:{left}s">'
            "Time is up: answers are locked.</p>"
        )
    return page(
        "Your question",
        _place(place, "taking answers") + f"<h1>Your question</h1>{problem}{timer}"
        f'<p class="question">{escape(question.texts[condition])}</p>'
        f'<form method="post" action="{escape(here)}">'
        f'<input type="hidden" name="question" value="{escape(session_code)}">{field}<br>'
        f'<button type="submit"{send}>Send my answer</button></form>{timeup}'
        '<p class="note">Anonymous: no name is asked and one answer is kept per person.</p>',
    )


def _bounds(question: Question) -> str:
    if question.low is None or question.high is None:
        return ""
    return f' placeholder="{number_text(question.low)} to {number_text(question.high)}"'


def _given(question: Question, condition: str, answer: str) -> str:
    """The answer as stored, on a line of its own: an option's text, or the number as read
    ("40,5" was stored as 40.5, and the participant sees 40.5)."""
    if question.kind == "number":
        return (
            f'<p>Your answer is in. It was stored as the number:</p><p class="given">'
            f"{escape(answer)}</p>"
        )
    return f'<p>Your answer is in:</p><p class="given">{escape(_answer_text(question, condition, answer))}</p>'


def answered(
    here: str, question: Question, condition: str, answer: str, place: str = "", follow: bool = True
) -> str:
    return page(
        "Thank you",
        _place(place, "taking answers")
        + "<h1>Thank you</h1>"
        + _given(question, condition, answer)
        + "<p>The class's result appears on this page when your teacher reveals it.</p>",
        WAIT if follow else None,
        here=here,
    )


def locked(
    here: str,
    question: Question,
    condition: str,
    answer: str | None,
    place: str = "",
    follow: bool = True,
) -> str:
    """Answers stopped, before the reveal, for someone who was given the question."""
    said = (
        _given(question, condition, answer)
        if answer is not None
        else "<p>You did not send an answer to this question before answers were locked.</p>"
    )
    return page(
        "Answers are locked",
        _place(place, "answers locked")
        + "<h1>Answers are locked</h1>"
        + said
        + "<p>The class's result appears on this page when your teacher reveals it.</p>",
        WAIT if follow else None,
        here=here,
    )


def late(here: str, revealed: bool, more: bool, place: str = "", follow: bool = True) -> str:
    """Someone who was not given this question, after it stopped taking answers."""
    if revealed:
        text = "This question's result has been revealed; it no longer takes answers. "
        text += "The result is shown to those who answered it."
    else:
        text = "Answers to this question are locked: it no longer takes answers."
    if more:
        text += " The next question appears on this page when your teacher opens it."
    return page(
        "Answers are closed",
        _place(place, "revealed" if revealed else "answers locked")
        + f"<h1>Answers are closed</h1><p>{escape(text)}</p>",
        WAIT if more and follow else None,
        here=here if more else "",
    )


def _answer_text(question: Question, condition: str, answer: str) -> str:
    index = question.option_index(answer)
    options = question.options.get(condition, ())
    return options[index] if index is not None and index < len(options) else answer


def revealed(
    result: ClassResults,
    condition: str | None,
    answer: str | None,
    here: str = "",
    place: str = "",
    more: bool = False,
    follow: bool = True,
) -> str:
    """The class's result per condition, the humans beside it where known; with a next
    question to come, the page waits for it."""
    question = result.question
    mine = ""
    if condition is not None:
        group = escape(question.label(condition))
        said = ""
        if answer:
            said = f", and you answered: {escape(_answer_text(question, condition, answer))}"
        mine = f"<p>You were in the group <strong>{group}</strong>{said}</p>"
    humans = {h.condition: h for h in result.humans}
    blocks = [
        _condition_block(question, row, humans.get(row.condition)) for row in result.conditions
    ]
    source = f'<p class="note">Original study: {escape(result.citation)}</p>' if humans else ""
    after = "<p>The next question appears on this page when your teacher opens it.</p>"
    return page(
        "The class's result",
        _place(place, "revealed") + f"<h1>{escape(question.title)}: the class's result</h1>{mine}"
        f"<p>{escape(reveal.PARTICIPANT_INTRO)}</p>"
        + "".join(blocks)
        + source
        + (after if more else ""),
        WAIT if more and follow else None,
        here=here if more else "",
    )


def _condition_block(question: Question, row: ConditionResult, human: HumanResult | None) -> str:
    head = f"<h2>{escape(row.label)} ({row.n} answered)</h2>"
    if question.kind == "number":
        median, mean = reveal.readable(row.median, "number"), reveal.readable(row.mean, "number")
        lines = [f"<p>Class: median {median}, mean {mean}</p>"]
        if human is not None and human.median is not None:
            lines.append(f"<p>Original study: median {reveal.readable(human.median, 'number')}</p>")
        return head + "".join(lines)
    items = []
    for i, label in enumerate(question.options[row.condition]):
        share = row.shares[i] if i < len(row.shares) else math.nan
        lines = [_bar("Class", share, "bar")]
        if human is not None and i < len(human.shares) and human.shares[i] is not None:
            lines.append(_bar("Original", human.shares[i], "bar human"))
        items.append(f"<li><p>{escape(label)}</p>{''.join(lines)}</li>")
    mean = ""
    if question.kind == "scale" and row.mean is not None:
        mean = f"<p>Mean position: {row.mean:.2f} of {len(question.keys)}</p>"
    return head + f'<ul class="shares">{"".join(items)}</ul>{mean}'


def _bar(who: str, share: float | None, css: str) -> str:
    """One line: who, a bar of the share (of a track that is 100 %) and the share."""
    if share is None or math.isnan(share):
        return f'<p class="line"><span class="who">{who}</span>no answers</p>'
    return (
        f'<p class="line"><span class="who">{who}</span><span class="track">'
        f'<span class="{css}" style="width:{share * 100:.0f}%"></span></span> '
        f"{reveal.readable(share, reveal.SHARE)}</p>"
    )
