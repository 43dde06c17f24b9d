"""Untrusted text made safe for the pages: HTML-escaped, Markdown defused, long text cut.

A template, an imported field or an LLM answer is data, never markup: every page puts it
through one of these before Streamlit's Markdown sees it, so `![x](http://host/p.png)` in an
answer is shown as those characters and the browser fetches nothing, and a bare
`http://host`, `www.host` or `name@host` is shown as text, never as a live link.
"""

from __future__ import annotations

import html
import re
from typing import Any

from cogbias.core.safetext import terminal_block

# Characters Markdown would act on, as numeric entities: the pages pass this HTML through
# `st.markdown`, which parses Markdown around (and, outside HTML blocks, between) the tags.
# An entity is never Markdown syntax, and the browser shows it as the character itself.
_MARKDOWN_ENTITIES = {c: f"&#{ord(c)};" for c in "\\`*_[]!$~:|#"}
_MARKDOWN_CHARS = re.compile("[" + re.escape("".join(_MARKDOWN_ENTITIES)) + "]")


# Streamlit's Markdown (GitHub's dialect) turns a bare "http://…", "https://…", "www.…" and
# "name@host.tld" into a live link *after* escapes and entities are read back into text, so
# neither a backslash nor an entity stops it. A WORD JOINER (U+2060: invisible, no width, no
# line break) inside each trigger does: the text reads the same and no link is made. (A link
# copied out of the page carries the joiner: untrusted addresses are not for following.)
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(https?(?=:)|www(?=\.)|(?=@))", re.IGNORECASE)


def unlinked(text: str) -> str:
    """`text` with a word joiner inside every bare-link trigger (see `WORD_JOINER`)."""
    return _AUTOLINK.sub(lambda m: m.group() + WORD_JOINER, text)


def html_text(text: str) -> str:
    """`text` safe inside HTML that goes through Markdown: HTML-escaped, Markdown's
    characters as entities, so `![x](http://host/p.png)` in an answer is shown, not fetched,
    and bare addresses unlinked."""
    # quote=False: True would write "&#x27;", whose "#" Markdown reads
    escaped = html.escape(unlinked(terminal_block(text)), quote=False)
    return _MARKDOWN_CHARS.sub(lambda m: _MARKDOWN_ENTITIES[m.group()], escaped)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>~$:&])")
_LINE_START = re.compile(r"^(\s*|\s*\d+)([#>+\-=|.)])")  # a heading, quote, list item


def escape_markdown(text: Any) -> str:
    """`text` with every Markdown/HTML-significant character backslash-escaped.

    For untrusted text (answers, names, imported fields) that must sit inside a Streamlit
    caption, label or header: `![x](http://host/p.png)` then shows as those characters and
    the browser fetches nothing. Escaped: brackets (links, images, Streamlit's `:red[...]`),
    `<` `>` (HTML), emphasis and code marks, `$` (math), `:` (icon and emoji codes), `&`
    (entities), and a block marker at the start; bare addresses are unlinked (`unlinked`).
    Newlines become spaces (a label is one line); controls, bidi overrides and invisible
    marks (`safetext.UNSHOWN`) are shown escaped (`\\u202e`), never acted on.
    """
    flat = " ".join(unlinked(terminal_block(str(text if text is not None else ""))).split())
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", flat)
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), escaped)


def escape_paragraphs(text: Any) -> str:
    """Like `escape_markdown`, keeping blank-line paragraph breaks (for descriptions)."""
    paragraphs = re.split(r"\n\s*\n", str(text if text is not None else ""))
    return "\n\n".join(escape_markdown(p) for p in paragraphs if p.strip())


def preview_text(text: str, limit: int = 600) -> tuple[str, bool]:
    """The first `limit` characters of a long text and whether it was cut (show the rest
    collapsed: a 5 MB answer must not be laid out in full by the browser)."""
    if len(text) <= limit:
        return text, False
    return text[:limit].rstrip() + " …", True
