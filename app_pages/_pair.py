"""One way to show a decided pair on every page (Learn, Preview, Explore, Datasets).

The options are listed in the order the decision model saw them, with a note when that was
reversed; then the raw answer, the extraction step's reading and the choice the score uses
(`cogbias.views.shown_pairs.ShownPair` holds the logic). Every model or imported text goes out through
`st.text` or escaped Markdown: it is data, never markup, so an answer holding
`![x](http://host/p.png)` cannot make the browser fetch anything.
"""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from app_pages import _tables
from cogbias.views import highlight, probability_bars, safe_text, sample_tables, shown_pairs

SHOWN_CHARS = 600  # a longer text shows its start; the rest sits in a collapsed expander
MAX_CHARS = 20_000  # more than this is never laid out on a page (exports hold it all)
PROSE_CHARS = 1_500  # a description's start shown as prose (the built-ins' are shorter)
# A half's heading is one of two fixed texts, never built from a name that came from outside.
HALF_TITLES = {"control": "**Control**", "treatment": "**Treatment**"}


def show_marked_halves(halves: Mapping[str, Mapping[str, str]], parts_named: bool = False) -> None:
    """Control and treatment side by side, from `highlight.filled_html` or `case_halves_html`
    (texts escaped for HTML and Markdown, insertions and differences marked); nothing else may
    be passed in. `parts_named` puts "Situation:" and "Prompt:" before the parts (Learn, for a
    class meeting them first)."""
    for column, name in zip(st.columns(2), ("control", "treatment"), strict=True):
        marked = halves[name]
        with column, st.container(border=True):
            st.markdown(HALF_TITLES[name])
            if parts_named:
                st.markdown("*Situation:* " + marked["situation"], unsafe_allow_html=True)
                st.markdown("*Prompt:* " + marked["prompt"], unsafe_allow_html=True)
            else:
                st.markdown(marked["situation"], unsafe_allow_html=True)
                st.markdown(highlight.emphasised(marked["prompt"]), unsafe_allow_html=True)
            st.markdown("<ol>" + marked["options"] + "</ol>", unsafe_allow_html=True)


def long_text(text: str, empty: str = "(none)") -> None:
    """Plain text; long texts collapsed after their first lines, huge ones cut."""
    start, cut = safe_text.preview_text(text, SHOWN_CHARS)
    st.text(start or empty)
    if cut:
        _all_of(text)


def long_prose(text: str, shown: int = PROSE_CHARS, caption: bool = False) -> None:
    """Untrusted prose (a test case's or a study's description): its start as escaped
    Markdown paragraphs (a caption with `caption`), the rest of a long one collapsed as plain
    text, of which at most MAX_CHARS are laid out. A browser took minutes over a 1 MB
    description shown whole."""
    start, cut = safe_text.preview_text(text, shown)
    (st.caption if caption else st.markdown)(safe_text.escape_paragraphs(start))
    if cut:
        _all_of(text)


def _all_of(text: str) -> None:
    """A long text whole in a collapsed expander, cut at MAX_CHARS (exports hold it all)."""
    note = "" if len(text) <= MAX_CHARS else f" (the first {MAX_CHARS:,} shown)"
    with st.expander(f"All {len(text):,} characters{note}"):
        st.text(text[:MAX_CHARS])


def safe_caption(text: str) -> None:
    """A caption of untrusted text (names, errors): Markdown escaped."""
    st.caption(safe_text.escape_markdown(text))


def show_half(half: shown_pairs.ShownHalf, html: Mapping[str, str] | None = None) -> None:
    """One half: its text (marked-up HTML from `highlight.filled_html` if given), the options
    as presented, the answer, the extraction and the scored choice."""
    st.markdown(HALF_TITLES[half.name])
    if html is not None:  # highlight.filled_html: escaped text with insertions marked
        st.markdown(html["situation"], unsafe_allow_html=True)
        st.markdown(highlight.emphasised(html["prompt"]), unsafe_allow_html=True)
    else:
        long_text(f"{half.situation.strip()}\n\n{half.prompt.strip()}")
    st.text("\n".join(half.option_lines()))
    show_rewrite_and_trace(half)
    st.markdown("*Answer*")
    long_text(half.answer, "(no answer)")
    if half.extraction and half.extraction != half.answer:
        safe_caption(f"Extraction step read: {half.extraction}")
    safe_caption(half.choice_sentence())
    _disagreement(half)


def show_rewrite_and_trace(half: shown_pairs.ShownHalf) -> None:
    """A self-help rewrite (the question the model answered) and a reasoning model's trace,
    each collapsed: plain text, never markup. The answer is read without the trace."""
    if half.rewrite:
        with st.expander("Rewritten by the model (self-help), then answered"):
            st.text(half.rewrite[:MAX_CHARS])
    if half.reasoning:
        with st.expander(f"Reasoning trace ({len(half.reasoning):,} characters, not read)"):
            st.text(half.reasoning[:MAX_CHARS])


def _disagreement(half: shown_pairs.ShownHalf) -> None:
    disagreement = half.answer_disagreement()
    if disagreement:
        st.warning(safe_text.escape_markdown(disagreement), icon=":material/report:")


def show_pair(
    pair: shown_pairs.ShownPair,
    html: Mapping[str, Mapping[str, str]] | None = None,
    with_error: bool = True,
) -> None:
    """Both halves side by side, under a note if the options were not in canonical order;
    `with_error=False` where the page says why the pair failed in a sentence of its own."""
    note = pair.order_note()
    if note:
        st.info(note, icon=":material/swap_vert:")
    for column, half in zip(st.columns(2), pair.halves, strict=True):
        with column, st.container(border=True):
            show_half(half, None if html is None else html[half.name])
    if pair.error and with_error:
        safe_caption(f"Error: {pair.error}")


def show_answers(pair: shown_pairs.ShownPair) -> None:
    """A compact view of one model's pair (for side-by-side comparisons): per half, what it
    chose and its raw answer; the options' order noted when it was not canonical."""
    note = pair.order_note()
    if note:
        st.caption(note)
    for half in pair.halves:
        st.markdown(HALF_TITLES[half.name])
        safe_caption(half.choice_sentence())
        show_rewrite_and_trace(half)
        long_text(half.answer, "(no answer)")
        _disagreement(half)
    if pair.error:
        safe_caption(f"Error: {pair.error}")


def show_probabilities(pair: shown_pairs.ShownPair) -> None:
    """Both halves' option probabilities as bars (pairs of `--scoring probabilities` runs
    only; nothing for the others). Option texts go out escaped."""
    sentence = probability_bars.compare_sentence(pair)
    if sentence is None:
        return
    st.markdown("**Option probabilities**")
    for column, half in zip(st.columns(2), pair.halves, strict=True):
        with column:
            st.caption(half.name.capitalize())
            for bar in probability_bars.half_bars(half) or []:
                st.progress(min(1.0, bar.p), text=safe_text.escape_markdown(bar.text()))
            note = probability_bars.outside_note(half)
            if note:  # plain words; the technical detail one click (or hover) away
                st.caption(safe_text.escape_markdown(note[0]), help=note[1])
    safe_caption(sentence)


def show_samples(pair: shown_pairs.ShownPair, key: str = "samples") -> None:
    """Each half's samples and how they split (pairs of sampled runs only, `--samples N`;
    nothing for the others). Answers are shown in a table: text, never markup. `key` names
    the tables' downloads (one per pair on a page)."""
    tables = [sample_tables.sample_table(half) for half in pair.halves]
    if all(t is None for t in tables):
        return
    st.markdown("**Samples**")
    for column, half, table in zip(st.columns(2), pair.halves, tables, strict=True):
        with column:
            st.caption(half.name.capitalize())
            if table is not None:
                _tables.table(
                    table,
                    f"{key}_{half.name}",
                    f"samples-{half.name}",
                    hide_index=True,
                    width="stretch",
                )
            if sentence := sample_tables.tally_sentence(half):
                safe_caption(sentence)
