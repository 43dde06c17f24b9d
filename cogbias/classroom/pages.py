"""The participant server's pages: plain HTML forms with inline CSS, no script.

Every text that came from a file or a person (the question, its options, labels, the answer)
is put in with `html.escape`, so it shows as text whatever it holds.
"""

from __future__ import annotations

import math
from html import escape

from cogbias.classroom.questions import Question
from cogbias.classroom.sessions import ClassResults, ConditionResult, HumanResult

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:40rem;
margin:0 auto;padding:1rem;line-height:1.5;color:#1b1b1b;background:#fff}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:1.5rem}
.question{white-space:pre-wrap;font-size:1.1rem}
label.option{display:block;padding:.6rem;margin:.4rem 0;border:1px solid #bbb;border-radius:.4rem}
input[type=text],input[type=number]{font-size:1.2rem;padding:.4rem;width:12rem}
button{font-size:1.1rem;padding:.6rem 1.4rem;margin-top:.8rem;border-radius:.4rem;
border:1px solid #235;background:#2a5599;color:#fff}
.note{color:#555}.error{color:#a00;font-weight:600}
table{border-collapse:collapse;width:100%}td,th{padding:.3rem;text-align:left;
border-bottom:1px solid #ddd;vertical-align:top}
.bar{background:#2a5599;height:.9rem;display:inline-block}
.human{background:#999}.who{display:inline-block;width:4.5rem}
""".strip()


def page(title: str, body: str, refresh: int | None = None, url: str | None = None) -> str:
    """A whole page; `refresh` reloads it every so many seconds (waiting for the reveal), or
    then goes to `url` (a form's page back to its question, so nothing is posted again)."""
    target = f";url={escape(url)}" if url else ""
    meta = f'<meta http-equiv="refresh" content="{refresh}{target}">' if refresh else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )


def enter_code(message: str = "") -> str:
    error = f'<p class="error">{escape(message)}</p>' if message else ""
    return page(
        "Join the class",
        "<h1>Join the class</h1>"
        f"{error}<form method=get action='/'><label>Code shown by your teacher<br>"
        "<input type=text name=code maxlength=12 autocomplete=off autocapitalize=characters "
        "required autofocus></label><br><button type=submit>Join</button></form>",
    )


def message(title: str, text: str, refresh: int | None = None, url: str | None = None) -> str:
    return page(title, f"<h1>{escape(title)}</h1><p>{escape(text)}</p>", refresh, url)


def question_form(code: str, question: Question, condition: str, error: str = "") -> str:
    """The participant's question in their condition, and one answer to give."""
    problem = f'<p class="error">{escape(error)}</p>' if error else ""
    if question.kind == "number":
        bounds = _bounds(question)
        field = (
            f"<label>{escape(question.number_label or 'Your answer')}<br>"
            f"<input type=text name=answer inputmode=decimal maxlength=20 required{bounds}>"
            "</label>"
        )
    else:
        field = "".join(
            f'<label class="option"><input type=radio name=answer value="{escape(key)}" '
            f"required> {escape(label)}</label>"
            for key, label in zip(question.keys, question.options[condition], strict=False)
        )
    return page(
        "Your question",
        f"<h1>Your question</h1>{problem}"
        f'<p class="question">{escape(question.texts[condition])}</p>'
        f"<form method=post action='/s/{escape(code)}'>{field}<br>"
        "<button type=submit>Send my answer</button></form>"
        '<p class="note">Anonymous: no name is asked and one answer is kept per person.</p>',
    )


def _bounds(question: Question) -> str:
    if question.low is None or question.high is None:
        return ""
    return f' placeholder="{question.low:g} to {question.high:g}"'


def answered(question: Question, condition: str, answer: str) -> str:
    return page(
        "Thank you",
        "<h1>Thank you</h1>"
        f"<p>Your answer is in: <strong>{escape(_answer_text(question, condition, answer))}"
        "</strong>.</p><p class=note>The class's result appears on this page when your "
        "teacher reveals it (the page reloads itself).</p>",
        refresh=5,
    )


def _answer_text(question: Question, condition: str, answer: str) -> str:
    index = question.option_index(answer)
    options = question.options.get(condition, ())
    return options[index] if index is not None and index < len(options) else answer


def revealed(result: ClassResults, condition: str | None, answer: str | None) -> str:
    """The class's result per condition, the humans beside it where known."""
    question = result.question
    mine = ""
    if condition is not None:
        group = escape(question.labels.get(condition, condition))
        said = (
            f" and answered {escape(_answer_text(question, condition, answer))}" if answer else ""
        )
        mine = f"<p>You were in the group <strong>{group}</strong>{said}.</p>"
    humans = {h.condition: h for h in result.humans}
    blocks = [
        _condition_block(question, row, humans.get(row.condition)) for row in result.conditions
    ]
    source = f'<p class="note">Original study: {escape(result.citation)}</p>' if humans else ""
    return page(
        "The class's result",
        f"<h1>{escape(question.title)}: the class's result</h1>{mine}"
        "<p>Half the class read one version of the question, half the other.</p>"
        + "".join(blocks)
        + source,
    )


def _condition_block(question: Question, row: ConditionResult, human: HumanResult | None) -> str:
    head = f"<h2>{escape(row.label)} ({row.n} answered)</h2>"
    if question.kind == "number":
        lines = [f"<p>Class: median {_num(row.median)}, mean {_num(row.mean)}</p>"]
        if human is not None and human.median is not None:
            lines.append(f"<p>Original study: median {_num(human.median)}</p>")
        return head + "".join(lines)
    cells = []
    for i, label in enumerate(question.options[row.condition]):
        share = row.shares[i] if i < len(row.shares) else math.nan
        line = _bar("Class", share, "bar")
        if human is not None and i < len(human.shares) and human.shares[i] is not None:
            line += "<br>" + _bar("Original", human.shares[i], "bar human")
        cells.append(f"<tr><td>{escape(label)}</td><td>{line}</td></tr>")
    mean = ""
    if question.kind == "scale" and row.mean is not None:
        mean = f"<p>Mean position: {row.mean:.2f} of {len(question.keys)}</p>"
    return head + f"<table>{''.join(cells)}</table>{mean}"


def _bar(who: str, share: float | None, css: str) -> str:
    if share is None or math.isnan(share):
        return f'<span class="who">{who}</span>no answers'
    width = round(share * 10, 1)
    return (
        f'<span class="who">{who}</span><span class="{css}" style="width:{width}rem"></span> '
        f"{share:.0%}"
    )


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"
