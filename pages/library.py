"""Library: every built-in bias test, control and treatment side by side."""

import html

import streamlit as st

from cogbias import library, templates

st.title("Cognitive bias library")
st.caption(
    "Each test pairs a control and a treatment template that differ only in the detail that "
    "elicits the bias. [[Blue]] gaps are filled by a generator model for a scenario, "
    "{{red}} gaps by value generators."
)


@st.cache_data
def load() -> dict[str, library.TestCase]:
    return library.load_library()


cases = load()
choice = st.selectbox("Bias", list(cases), format_func=lambda cid: cases[cid].name)
case = cases[choice]
st.subheader(case.name)
st.write(case.description)
with st.expander("References"):
    for ref in case.references:
        st.markdown(f"- {ref}")


def highlight(text: str, other: str, side: str) -> str:
    parts = []
    for op, chunk in templates.diff(text, other) if side == "control" else templates.diff(other, text):
        if op == "equal":
            parts.append(html.escape(chunk))
        elif op == side:
            parts.append(f"<mark>{html.escape(chunk)}</mark>")
    out = "".join(parts)
    out = out.replace("[[", '<span style="color:#1c7ed6">[[').replace("]]", "]]</span>")
    return out.replace("{{", '<span style="color:#e03131">{{').replace("}}", "}}</span>")


left, right = st.columns(2)
for column, half, other in ((left, "control", "treatment"), (right, "treatment", "control")):
    mine, theirs = case.templates()[half], case.templates()[other]
    with column:
        st.markdown(f"**{half.capitalize()}**")
        for field in ("situation", "prompt"):
            body = highlight(getattr(mine, field), getattr(theirs, field), half)
            st.markdown(f"*{field.capitalize()}:* {body}", unsafe_allow_html=True)
        st.markdown("\n".join(f"{i}. {html.escape(o)}" for i, o in enumerate(mine.options, 1)))
st.caption(f"Metric parameters: {case.metric}")
