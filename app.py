"""cogbias app: navigation only; each page is a thin script in pages/."""

import streamlit as st

st.set_page_config(page_title="cogbias", page_icon="🧠", layout="wide")

pages = [
    st.Page("pages/library.py", title="Library", icon="📚", default=True),
]
st.navigation(pages).run()
